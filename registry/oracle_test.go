package registry

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// This file is a brute-force oracle for Cron.Next. It shares nothing with
// next.go or with robfig's bit sets: expressions are generated from a
// structured form whose match sets are computed here, wall times are walked
// civil date by civil date with package time, and each wall time is mapped to
// instants by asking time.Unix(i, 0).In(loc) which instants show it. The
// day extensions (L, W, #) are decided by counting days of the month with
// package time, and H values by its own FNV-1a over the name.

// Field indexes of oracleExpr.
const (
	fSecond = iota
	fMinute
	fHour
	fDom
	fMonth
	fDow
)

type fieldBounds struct{ min, max int }

// The day-of-week maximum is 7 (Sunday again), as in cronie: "5-7" and
// "FRI-SUN" reach Sunday, but "5/1" and "FRI/1", like "*", end on Saturday.
var oracleBounds = [6]fieldBounds{{0, 59}, {0, 59}, {0, 23}, {1, 31}, {1, 12}, {0, 7}}

var (
	monthNames     = []string{"", "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}
	dowNames       = []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}
	monthFullNames = []string{"", "january", "February", "MARCH", "april", "May", "JUNE", "july", "August", "SEPTEMBER", "october", "November", "DECEMBER"}
	dowFullNames   = []string{"Sunday", "MONDAY", "tuesday", "Wednesday", "THURSDAY", "friday", "Saturday"}
	// The field names that H hashes, and the last value a bare H picks
	// (day-of-month stops at 28 so that it exists in every month).
	oracleFieldNames = [6]string{"second", "minute", "hour", "day-of-month", "month", "day-of-week"}
	oracleHashLast   = [6]int{59, 59, 23, 28, 12, 6}
)

type elemKind int

const (
	elemStar           elemKind = iota // "*" or "?"
	elemStarStep                       // "*/s"
	elemValue                          // "a"
	elemRange                          // "a-b"
	elemRangeStep                      // "a-b/s"
	elemFromStep                       // "a/s": a through the field's maximum (Saturday for day-of-week)
	elemLast                           // day-of-month "L", or "L-a"
	elemLastWeekday                    // day-of-month "LW"
	elemNearestWeekday                 // day-of-month "aW"
	elemLastDow                        // day-of-week "aL"
	elemNthDow                         // day-of-week "a#b"
	elemHash                           // "H", "H/s", "H(a-b)", "H(a-b)/s"
)

type fieldElem struct {
	kind       elemKind
	a, b, step int
	names      bool // render a and b as JAN or MON
	full       bool // with names: render full names (January, friday)
	question   bool // render a star as "?"
	hashRange  bool // elemHash: H(a-b)
}

type oracleField []fieldElem

// oracleExpr is a cron expression as data, so its meaning is known without
// parsing it.
type oracleExpr struct {
	fields      [6]oracleField
	withSeconds bool
	descriptor  string // when set, rendered instead of the fields
	name        string // the schedule's name, which H fields hash
}

// oracleHash is 64-bit FNV-1a of name, a NUL byte and the field's name,
// written out from the FNV definition.
func oracleHash(name string, field int) uint64 {
	h := uint64(14695981039346656037)
	for _, b := range []byte(name + "\x00" + oracleFieldNames[field]) {
		h ^= uint64(b)
		h *= 1099511628211
	}
	return h
}

// set returns the values field i matches, indexed by value, leaving out the
// day extensions, which depend on the month (see dayExtMatches). Day-of-week
// 7 is folded onto 0.
func (e *oracleExpr) set(i int) [64]bool {
	var out [64]bool
	bd := oracleBounds[i]
	starMax := bd.max
	if i == fDow {
		starMax = 6
	}
	for _, el := range e.fields[i] {
		lo, hi, step := el.a, el.a, 1
		switch el.kind {
		case elemValue:
		case elemStar:
			lo, hi = bd.min, starMax
		case elemStarStep:
			lo, hi, step = bd.min, starMax, el.step
		case elemRange:
			hi = el.b
		case elemRangeStep:
			hi, step = el.b, el.step
		case elemFromStep:
			hi, step = max(starMax, el.a), el.step
		case elemHash:
			lo, hi, step = e.hashValues(i, el)
		default:
			continue
		}
		if i == fDow && hi == 0 && lo > 0 {
			hi = 7 // "SAT-SUN" ends on Sunday
		}
		for v := lo; v <= hi; v += step {
			out[v] = true
		}
	}
	if i == fDow && out[7] {
		out[0], out[7] = true, false
	}
	return out
}

// hashValues returns the first value, last value and step an H element
// stands for.
func (e *oracleExpr) hashValues(i int, el fieldElem) (lo, hi, step int) {
	lo, hi = oracleBounds[i].min, oracleHashLast[i]
	if el.hashRange {
		lo, hi = el.a, el.b
	} else if el.step > 0 {
		hi = max(oracleHashLast[i], oracleBounds[i].max)
		if i == fDow {
			hi = 6
		}
	}
	h := oracleHash(e.name, i)
	if el.step == 0 {
		v := lo + int(h%uint64(hi-lo+1))
		return v, v, 1
	}
	return lo + int(h%uint64(min(el.step, hi-lo+1))), hi, el.step
}

// dayExtMatches reports whether one of field i's L, W or # elements
// matches the date, by looking at the days around it.
func (e *oracleExpr) dayExtMatches(i int, y int, m time.Month, d int) bool {
	date := func(day int) time.Time { return time.Date(y, m, day, 12, 0, 0, 0, time.UTC) }
	inMonth := func(day int) bool { return date(day).Month() == m && day >= 1 }
	weekday := func(day int) int { return int(date(day).Weekday()) }
	isWeekday := func(day int) bool { return weekday(day) != 0 && weekday(day) != 6 }
	lastDay := time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day() // the 0th of next month
	for _, el := range e.fields[i] {
		switch el.kind {
		case elemLast:
			if d == lastDay-el.a {
				return true
			}
		case elemLastWeekday:
			last := lastDay
			for !isWeekday(last) {
				last--
			}
			if d == last {
				return true
			}
		case elemNearestWeekday:
			if !inMonth(el.a) || !isWeekday(d) {
				continue
			}
			// d must be the weekday of the month closest to day a.
			nearest := true
			for other := 1; other <= lastDay; other++ {
				if isWeekday(other) && abs(other-el.a) < abs(d-el.a) {
					nearest = false
				}
			}
			if nearest {
				return true
			}
		case elemLastDow:
			if weekday(d) == el.a%7 && !inMonth(d+7) {
				return true
			}
		case elemNthDow:
			n := 0
			for day := 1; day <= d; day++ {
				if weekday(day) == weekday(d) {
					n++
				}
			}
			if weekday(d) == el.a%7 && n == el.b {
				return true
			}
		}
	}
	return false
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func (e *oracleExpr) startsWithStar(i int) bool {
	return len(e.fields[i]) > 0 && (e.fields[i][0].kind == elemStar || e.fields[i][0].kind == elemStarStep)
}

func (e *oracleExpr) String() string {
	if e.descriptor != "" {
		return e.descriptor
	}
	var parts []string
	for i, f := range e.fields {
		if i == fSecond && !e.withSeconds {
			continue
		}
		var elems []string
		for _, el := range f {
			elems = append(elems, el.render(i))
		}
		parts = append(parts, strings.Join(elems, ","))
	}
	return strings.Join(parts, " ")
}

func (el fieldElem) render(field int) string {
	name := func(v int) string {
		switch {
		case el.names && el.full && field == fMonth:
			return monthFullNames[v]
		case el.names && el.full && field == fDow && v < 7:
			return dowFullNames[v]
		case el.names && field == fMonth:
			return monthNames[v]
		case el.names && field == fDow && v < 7:
			return dowNames[v]
		}
		return strconv.Itoa(v)
	}
	switch el.kind {
	case elemStar:
		if el.question {
			return "?"
		}
		return "*"
	case elemStarStep:
		return "*/" + strconv.Itoa(el.step)
	case elemValue:
		return name(el.a)
	case elemRange:
		return name(el.a) + "-" + name(el.b)
	case elemRangeStep:
		return name(el.a) + "-" + name(el.b) + "/" + strconv.Itoa(el.step)
	case elemFromStep:
		return name(el.a) + "/" + strconv.Itoa(el.step)
	case elemLast:
		if el.a == 0 {
			return "L"
		}
		return "L-" + strconv.Itoa(el.a)
	case elemLastWeekday:
		return "LW"
	case elemNearestWeekday:
		return strconv.Itoa(el.a) + "W"
	case elemLastDow:
		return name(el.a) + "L"
	case elemNthDow:
		return name(el.a) + "#" + strconv.Itoa(el.b)
	}
	h := "H"
	if el.hashRange {
		h += "(" + name(el.a) + "-" + name(el.b) + ")"
	}
	if el.step > 0 {
		h += "/" + strconv.Itoa(el.step)
	}
	return h
}

// compiledOracle holds an expression's match sets and DST classification.
type compiledOracle struct {
	expr                 *oracleExpr
	sec, min, hour       [64]bool
	dom, month, dow      [64]bool
	dayAND, wildcard     bool
	secs, mins, hours    []int // sorted matching values
	every, phase         int64 // @every period and phase in seconds
	loc                  *time.Location
	zone                 *zoneFacts
	minOffset, maxOffset int64
}

func compileOracle(e *oracleExpr, loc *time.Location, z *zoneFacts) *compiledOracle {
	c := &compiledOracle{expr: e, loc: loc, zone: z}
	c.sec, c.min, c.hour = e.set(fSecond), e.set(fMinute), e.set(fHour)
	c.dom, c.month, c.dow = e.set(fDom), e.set(fMonth), e.set(fDow)
	c.dayAND = e.startsWithStar(fDom) || e.startsWithStar(fDow)
	c.wildcard = e.startsWithStar(fMinute) || e.startsWithStar(fHour)
	for v := range 60 {
		if c.sec[v] {
			c.secs = append(c.secs, v)
		}
		if c.min[v] {
			c.mins = append(c.mins, v)
		}
		if v < 24 && c.hour[v] {
			c.hours = append(c.hours, v)
		}
	}
	c.minOffset, c.maxOffset = slices.Min(z.offsets), slices.Max(z.offsets)
	return c
}

func (c *compiledOracle) dayMatches(y int, m time.Month, d int) bool {
	if !c.month[m] {
		return false
	}
	domOK := c.dom[d] || c.expr.dayExtMatches(fDom, y, m, d)
	dowOK := c.dow[time.Date(y, m, d, 12, 0, 0, 0, time.UTC).Weekday()] || c.expr.dayExtMatches(fDow, y, m, d)
	if c.dayAND {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// wallMatches reports whether the civil time shown by t matches.
func (c *compiledOracle) wallMatches(t time.Time) bool {
	y, m, d := t.Date()
	return c.dayMatches(y, m, d) && c.hour[t.Hour()] && c.min[t.Minute()] && c.sec[t.Second()]
}

// zoneFacts is what the oracle knows about a zone: every UTC offset it uses
// in the years tested, and its transition instants (for choosing test
// instants, not for computing answers).
type zoneFacts struct {
	name        string
	offsets     []int64
	transitions []int64
}

const (
	oracleFirstYear = 1995
	oracleLastYear  = 2070
)

func newZoneFacts(t testing.TB, loc *time.Location) *zoneFacts {
	t.Helper()
	z := &zoneFacts{name: loc.String()}
	at := time.Date(oracleFirstYear, 1, 1, 0, 0, 0, 0, time.UTC).In(loc)
	end := time.Date(oracleLastYear, 1, 1, 0, 0, 0, 0, time.UTC)
	_, prev := at.Zone()
	for {
		_, off := at.Zone()
		if off%60 != 0 {
			t.Fatalf("%s uses offset %ds in the tested years; the oracle assumes whole minutes", z.name, off)
		}
		if !slices.Contains(z.offsets, int64(off)) {
			z.offsets = append(z.offsets, int64(off))
		}
		if off != prev {
			if at.Unix()%60 != 0 {
				t.Fatalf("%s changes offset at %v, not on a minute", z.name, at)
			}
			z.transitions = append(z.transitions, at.Unix())
		}
		prev = off
		_, next := at.ZoneBounds()
		switch {
		case next.IsZero() || next.After(end):
			return z
		case !next.After(at):
			// golang/go#81583: a bogus end on 31 December of leap years.
			next = at.Add(time.Hour)
		}
		at = next
	}
}

// wallSeconds is the civil time shown by instant i in loc, as seconds since
// 1970-01-01T00:00 of the same calendar.
func wallSeconds(loc *time.Location, i int64) int64 {
	_, off := time.Unix(i, 0).In(loc).Zone()
	return i + int64(off)
}

// instantsOf returns, ascending, every instant whose wall time in loc is w.
func (c *compiledOracle) instantsOf(w int64) []int64 {
	var out []int64
	for _, off := range c.zone.offsets {
		i := w - off
		if wallSeconds(c.loc, i) == w && !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// afterGap returns the first instant whose wall time is later than the
// non-existent wall time w: the end of the gap w falls in.
func (c *compiledOracle) afterGap(w int64) int64 {
	i := w - c.maxOffset
	i -= ((i % 60) + 60) % 60
	for wallSeconds(c.loc, i) <= w {
		i += 60
	}
	return i
}

// fires returns the instants wall time w stands for under the DST rules of the package doc (doc.go), and
// the clock-correction rule: a fixed-time schedule does not fire for wall
// times skipped by a jump of 3 hours or more.
func (c *compiledOracle) fires(w int64) []int64 {
	is := c.instantsOf(w)
	switch {
	case len(is) == 0 && c.wildcard:
		return nil
	case len(is) == 0:
		i := c.afterGap(w)
		if jump := wallSeconds(c.loc, i) - wallSeconds(c.loc, i-1) - 1; jump >= 3*3600 {
			return nil
		}
		return []int64{i}
	case !c.wildcard:
		return is[:1]
	}
	return is
}

// oracleHorizon bounds the oracle's search, below Next's own 30 years so
// that both agree on whether a fire time exists.
const oracleHorizon = 25 * 365 * 24 * time.Hour

// next returns up to k fire times strictly after from, ascending, and fewer
// when the expression fires less often within oracleHorizon.
func (c *compiledOracle) next(from time.Time, k int) []int64 {
	if c.every > 0 {
		slot := (from.Unix()-c.phase)/c.every*c.every + c.phase
		if slot > from.Unix() {
			slot -= c.every // round toward minus infinity for times before 1970
		}
		var out []int64
		for len(out) < k {
			if time.Unix(slot, 0).After(from) {
				out = append(out, slot)
			}
			slot += c.every
		}
		return out
	}
	after := from.Unix()
	wallStart := after + c.minOffset - 3600
	wallEnd := after + int64(oracleHorizon/time.Second)
	var found []int64
	// Walls from kth+maxOffset on map to instants after the kth fire found.
	done := func(w int64) bool {
		return len(found) >= k && w-c.maxOffset > found[k-1]
	}
	day := time.Unix(wallStart, 0).UTC()
	y, m, d := day.Date()
	for {
		dayStart := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		ds := dayStart.Unix()
		if ds > wallEnd || done(ds) {
			break
		}
		if c.dayMatches(y, m, d) {
		walls:
			for _, h := range c.hours {
				for _, mi := range c.mins {
					for _, s := range c.secs {
						w := ds + int64(h*3600+mi*60+s)
						if w < wallStart {
							continue
						}
						if done(w) {
							break walls
						}
						for _, i := range c.fires(w) {
							if time.Unix(i, 0).After(from) && !slices.Contains(found, i) {
								found = append(found, i)
								slices.Sort(found)
							}
						}
					}
				}
			}
		}
		y, m, d = time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC).Date()
	}
	var out []int64
	for _, i := range found {
		if len(out) < k && i <= after+int64(oracleHorizon/time.Second) {
			out = append(out, i)
		}
	}
	return out
}

// explains reports whether instant i may be a fire time of the expression:
// its wall time matches, or, for a fixed-time schedule, it ends a gap that
// hides a matching wall time.
func (c *compiledOracle) explains(i int64) bool {
	if c.every > 0 {
		return (i-c.phase)%c.every == 0
	}
	if c.wallMatches(time.Unix(i, 0).In(c.loc)) {
		return true
	}
	if c.wildcard {
		return false
	}
	for w := wallSeconds(c.loc, i-1) + 1; w < wallSeconds(c.loc, i); w++ {
		if c.wallMatches(time.Unix(w, 0).UTC()) {
			return true
		}
	}
	return false
}

// neverFires reports whether the day fields name only dates that do not
// exist, such as 30 February.
func (c *compiledOracle) neverFires() bool {
	for y := 2000; y < 2028; y++ { // a full cycle of weekdays and leap years
		for m := time.January; m <= time.December; m++ {
			for d := 1; d <= time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day(); d++ {
				if c.dayMatches(y, m, d) {
					return false
				}
			}
		}
	}
	return true
}

// Random expression generation.

// exprGen draws expressions biased toward what breaks DST handling: hours
// near the usual transition times, the months transitions fall in, and
// both fixed-time and wildcard shapes.
type exprGen struct{ r *rand.Rand }

func (g exprGen) pct(p int) bool { return g.r.IntN(100) < p }

func (g exprGen) between(lo, hi int) int { return lo + g.r.IntN(hi-lo+1) }

func (g exprGen) value(field int) int {
	bd := oracleBounds[field]
	switch field {
	case fHour:
		if g.pct(70) {
			return []int{0, 1, 2, 3, 4, 22, 23}[g.r.IntN(7)]
		}
	case fMinute, fSecond:
		if g.pct(50) {
			return []int{0, 0, 15, 30, 45, 59}[g.r.IntN(6)]
		}
	case fMonth:
		if g.pct(50) {
			return []int{3, 4, 9, 10, 11}[g.r.IntN(5)]
		}
	case fDow:
		return g.between(0, 7)
	}
	return g.between(bd.min, bd.max)
}

func (g exprGen) elem(field int) fieldElem {
	bd := oracleBounds[field]
	names := func() bool { return (field == fMonth || field == fDow) && g.pct(30) }
	span := bd.max - bd.min
	if field == fDow {
		span = 6
	}
	if el, ok := g.extension(field); ok {
		return el
	}
	ordered := func() (int, int) {
		a, b := g.value(field), g.value(field)
		if a > b {
			a, b = b, a
		}
		if field == fDow && a > 0 && g.pct(15) {
			b = 0 // "FRI-SUN", "5-0": a range ending on Sunday
		}
		return a, b
	}
	var el fieldElem
	switch k := g.r.IntN(10); {
	case k < 4:
		el = fieldElem{kind: elemValue, a: g.value(field)}
	case k < 6:
		a, b := ordered()
		el = fieldElem{kind: elemRange, a: a, b: b}
	case k < 8:
		a, b := ordered()
		el = fieldElem{kind: elemRangeStep, a: a, b: b, step: g.between(1, max(1, span/2))}
	default:
		// A step up to the whole field's range is valid, if odd.
		step := g.between(1, max(1, span/2))
		if g.pct(5) {
			step = span + 1
		}
		el = fieldElem{kind: elemFromStep, a: g.value(field), step: step}
	}
	el.names = names()
	el.full = el.names && g.pct(25)
	return el
}

// extension draws, now and then, an L, W, # or H element for the field.
func (g exprGen) extension(field int) (fieldElem, bool) {
	if g.pct(8) {
		bd := oracleBounds[field]
		el := fieldElem{kind: elemHash, names: g.pct(30) && (field == fMonth || field == fDow)}
		if g.pct(40) {
			el.hashRange = true
			first := bd.max
			if field == fDow {
				first = 6 // H(SAT-7) at the latest
			}
			el.a = g.between(bd.min, first)
			el.b = g.between(el.a, bd.max)
		}
		if g.pct(50) {
			el.step = g.between(1, max(1, (bd.max-bd.min)/2))
		}
		return el, true
	}
	switch {
	case field == fDom && g.pct(25):
		switch k := g.r.IntN(4); k {
		case 0:
			return fieldElem{kind: elemLast}, true
		case 1:
			return fieldElem{kind: elemLast, a: []int{1, 2, 3, 6, 15, 27, 28, 30}[g.r.IntN(8)]}, true
		case 2:
			return fieldElem{kind: elemLastWeekday}, true
		default:
			return fieldElem{kind: elemNearestWeekday, a: []int{1, 2, 3, 15, 28, 29, 30, 31, g.between(1, 31)}[g.r.IntN(9)]}, true
		}
	case field == fDow && g.pct(25):
		a := g.between(0, 7)
		names := a < 7 && g.pct(30)
		if g.pct(50) {
			return fieldElem{kind: elemLastDow, a: a, names: names}, true
		}
		return fieldElem{kind: elemNthDow, a: a, b: g.between(1, 5), names: names}, true
	}
	return fieldElem{}, false
}

// field draws one field; star is the chance of a bare '*' (or '?').
func (g exprGen) field(field, star int) oracleField {
	switch {
	case g.pct(star):
		return oracleField{{kind: elemStar, question: (field == fDom || field == fDow) && g.pct(20)}}
	case g.pct(15):
		bd := oracleBounds[field]
		return oracleField{{kind: elemStarStep, step: g.between(1, max(2, (bd.max-bd.min)/2))}}
	}
	n := 1
	if g.pct(35) {
		n = g.between(2, 4)
	}
	var f oracleField
	for range n {
		f = append(f, g.elem(field))
	}
	return f
}

var oracleDescriptors = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
	"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}

var oracleScheduleNames = []string{"jobs.prune-soft-deleted", "billing:invoice", "report", "a", "nightly-report", "jobs.send-digest"}

func (g exprGen) expr() *oracleExpr {
	e := &oracleExpr{name: oracleScheduleNames[g.r.IntN(len(oracleScheduleNames))]}
	if g.pct(5) {
		names := make([]string, 0, len(oracleDescriptors))
		for n := range oracleDescriptors {
			names = append(names, n)
		}
		slices.Sort(names)
		e.descriptor = names[g.r.IntN(len(names))]
		fields := strings.Fields(oracleDescriptors[e.descriptor])
		e.fields[fSecond] = oracleField{{kind: elemValue, a: 0}}
		for i, f := range fields {
			if f == "*" {
				e.fields[i+1] = oracleField{{kind: elemStar}}
			} else {
				v, _ := strconv.Atoi(f)
				e.fields[i+1] = oracleField{{kind: elemValue, a: v}}
			}
		}
		return e
	}
	e.withSeconds = g.pct(12)
	if e.withSeconds {
		e.fields[fSecond] = g.field(fSecond, 10)
	} else {
		e.fields[fSecond] = oracleField{{kind: elemValue, a: 0}}
	}
	e.fields[fMinute] = g.field(fMinute, 20)
	e.fields[fHour] = g.field(fHour, 30)
	e.fields[fDom] = g.field(fDom, 65)
	e.fields[fMonth] = g.field(fMonth, 65)
	e.fields[fDow] = g.field(fDow, 65)
	return e
}

// Self-tests: the oracle must itself reproduce the DST rules of the package doc, or the
// differential test proves nothing.

func TestOracleDesignExamples(t *testing.T) {
	t.Parallel()
	// Hand-built forms of docs/cron-syntax.md's DST examples and a few more.
	v := func(vals ...int) oracleField {
		var f oracleField
		for _, x := range vals {
			f = append(f, fieldElem{kind: elemValue, a: x})
		}
		return f
	}
	star := oracleField{{kind: elemStar}}
	tests := []struct {
		name  string
		expr  oracleExpr
		zone  string
		from  string
		want  []string
		every int64
	}{
		{"30 2 * * *", oracleExpr{fields: [6]oracleField{v(0), v(30), v(2), star, star, star}}, "America/New_York", "2026-03-07T12:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00"}, 0},
		{"30 1 * * *", oracleExpr{fields: [6]oracleField{v(0), v(30), v(1), star, star, star}}, "America/New_York", "2026-10-31T12:00:00-04:00",
			[]string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00", "2026-11-03T01:30:00-05:00"}, 0},
		{"0 * * * *", oracleExpr{fields: [6]oracleField{v(0), v(0), star, star, star, star}}, "America/New_York", "2026-11-01T00:30:00-04:00",
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"}, 0},
		{"0 0 */2 * MON", oracleExpr{fields: [6]oracleField{v(0), v(0), v(0), {{kind: elemStarStep, step: 2}}, star, v(1)}}, "UTC", "2026-01-01T00:00:00Z",
			[]string{"2026-01-05T00:00:00Z", "2026-01-19T00:00:00Z", "2026-02-09T00:00:00Z"}, 0},
		{"0 0 29 2 *", oracleExpr{fields: [6]oracleField{v(0), v(0), v(0), v(29), v(2), star}}, "UTC", "2026-01-01T00:00:00Z",
			[]string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z", "2036-02-29T00:00:00Z"}, 0},
		{"0 0 * * *", oracleExpr{fields: [6]oracleField{v(0), v(0), v(0), star, star, star}}, "Asia/Beirut", "2027-03-27T12:00:00+02:00",
			[]string{"2027-03-28T01:00:00+03:00", "2027-03-29T00:00:00+03:00", "2027-03-30T00:00:00+03:00"}, 0},
		{"0,30 2 * * *", oracleExpr{fields: [6]oracleField{v(0), v(0, 30), v(2), star, star, star}}, "Australia/Lord_Howe", "2026-10-03T12:00:00+10:30",
			[]string{"2026-10-04T02:30:00+11:00", "2026-10-05T02:00:00+11:00", "2026-10-05T02:30:00+11:00"}, 0},
		{"*/30 * * * *", oracleExpr{fields: [6]oracleField{v(0), {{kind: elemStarStep, step: 30}}, star, star, star, star}}, "Australia/Lord_Howe", "2026-04-05T01:00:00+11:00",
			[]string{"2026-04-05T01:30:00+11:00", "2026-04-05T01:30:00+10:30", "2026-04-05T02:00:00+10:30"}, 0},
		{"0 12 * * 7", oracleExpr{fields: [6]oracleField{v(0), v(0), v(12), star, star, v(7)}}, "UTC", "2026-11-28T00:00:00Z",
			[]string{"2026-11-29T12:00:00Z", "2026-12-06T12:00:00Z", "2026-12-13T12:00:00Z"}, 0},
		{"@every 90s", oracleExpr{}, "UTC", "2026-11-28T00:00:00Z",
			[]string{"2026-11-28T00:01:30Z", "2026-11-28T00:03:00Z", "2026-11-28T00:04:30Z"}, 90},
		// Wildcard in a spring-forward gap: nothing for the missing hour.
		{"*/30 2 * * *", oracleExpr{fields: [6]oracleField{v(0), {{kind: elemStarStep, step: 30}}, v(2), star, star, star}}, "America/New_York", "2026-03-07T12:00:00-05:00",
			[]string{"2026-03-09T02:00:00-04:00", "2026-03-09T02:30:00-04:00", "2026-03-10T02:00:00-04:00"}, 0},
		// Samoa skipped 30 December 2011 entirely: a 24-hour jump is a
		// clock correction, and the skipped day's fixed times do not run.
		{"0 12 30 12 *", oracleExpr{fields: [6]oracleField{v(0), v(0), v(12), v(30), v(12), star}}, "Pacific/Apia", "2011-12-01T00:00:00Z",
			[]string{"2012-12-30T12:00:00+14:00", "2013-12-30T12:00:00+14:00", "2014-12-30T12:00:00+14:00"}, 0},
		{"0 12 * * *", oracleExpr{fields: [6]oracleField{v(0), v(0), v(12), star, star, star}}, "Pacific/Apia", "2011-12-29T12:00:00-10:00",
			[]string{"2011-12-31T12:00:00+14:00", "2012-01-01T12:00:00+14:00", "2012-01-02T12:00:00+14:00"}, 0},
		// cronexpr's vectors for L, LW, 14W and 6#5.
		{"0 0 L * *", oracleExpr{fields: [6]oracleField{v(0), v(0), v(0), {{kind: elemLast}}, star, star}}, "UTC", "2014-01-01T00:00:00Z",
			[]string{"2014-01-31T00:00:00Z", "2014-02-28T00:00:00Z", "2014-03-31T00:00:00Z"}, 0},
		{"0 0 LW * *", oracleExpr{fields: [6]oracleField{v(0), v(0), v(0), {{kind: elemLastWeekday}}, star, star}}, "UTC", "2013-11-02T00:00:00Z",
			[]string{"2013-11-29T00:00:00Z", "2013-12-31T00:00:00Z", "2014-01-31T00:00:00Z"}, 0},
		{"0 0 14W * *", oracleExpr{fields: [6]oracleField{v(0), v(0), v(0), {{kind: elemNearestWeekday, a: 14}}, star, star}}, "UTC", "2013-08-31T00:00:00Z",
			[]string{"2013-09-13T00:00:00Z", "2013-10-14T00:00:00Z", "2013-11-14T00:00:00Z"}, 0},
		{"0 0 30W * *", oracleExpr{fields: [6]oracleField{v(0), v(0), v(0), {{kind: elemNearestWeekday, a: 30}}, star, star}}, "UTC", "2013-06-02T00:00:00Z",
			[]string{"2013-06-28T00:00:00Z", "2013-07-30T00:00:00Z", "2013-08-30T00:00:00Z"}, 0},
		{"0 0 * * 6#5", oracleExpr{fields: [6]oracleField{v(0), v(0), v(0), star, star, {{kind: elemNthDow, a: 6, b: 5}}}}, "UTC", "2013-09-02T08:44:30Z",
			[]string{"2013-11-30T00:00:00Z", "2014-03-29T00:00:00Z", "2014-05-31T00:00:00Z"}, 0},
		{"0 0 * * 5L", oracleExpr{fields: [6]oracleField{v(0), v(0), v(0), star, star, {{kind: elemLastDow, a: 5}}}}, "UTC", "2026-01-01T00:00:00Z",
			[]string{"2026-01-30T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-27T00:00:00Z"}, 0},
		// An extension in the gap of New York's spring forward.
		{"30 2 * 3 0#2", oracleExpr{fields: [6]oracleField{v(0), v(30), v(2), star, v(3), {{kind: elemNthDow, a: 0, b: 2}}}}, "America/New_York", "2026-03-01T00:00:00-05:00",
			[]string{"2026-03-08T03:00:00-04:00", "2027-03-14T03:00:00-04:00", "2028-03-12T03:00:00-04:00"}, 0},
		// H: minute 13 and hour 11 for "nightly-report".
		{"H H * * *", oracleExpr{name: "nightly-report", fields: [6]oracleField{v(0), {{kind: elemHash}}, {{kind: elemHash}}, star, star, star}}, "UTC", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T11:13:00Z", "2026-01-02T11:13:00Z", "2026-01-03T11:13:00Z"}, 0},
		{"H/15 * * * *", oracleExpr{name: "nightly-report", fields: [6]oracleField{v(0), {{kind: elemHash, step: 15}}, star, star, star, star}}, "UTC", "2026-01-01T00:00:00Z",
			[]string{"2026-01-01T00:13:00Z", "2026-01-01T00:28:00Z", "2026-01-01T00:43:00Z"}, 0},
		// Either day field may match when both are restricted (Vixie).
		{"0 0 13 * FRI", oracleExpr{fields: [6]oracleField{v(0), v(0), v(0), v(13), star, v(5)}}, "UTC", "2026-02-01T00:00:00Z",
			[]string{"2026-02-06T00:00:00Z", "2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name+" "+tt.zone, func(t *testing.T) {
			loc, err := time.LoadLocation(tt.zone)
			if err != nil {
				t.Fatal(err)
			}
			c := compileOracle(&tt.expr, loc, newZoneFacts(t, loc))
			c.every = tt.every
			from, err := time.Parse(time.RFC3339, tt.from)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, i := range c.next(from, len(tt.want)) {
				got = append(got, time.Unix(i, 0).In(loc).Format(time.RFC3339))
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("oracle: got  %v\nwant %v", got, tt.want)
			}
		})
	}
}

// TestOracleRendering pins the text and match set of the element shapes
// whose meaning is least obvious (Sunday as 7, "N/step").
func TestOracleRendering(t *testing.T) {
	t.Parallel()
	tests := []struct {
		elem  fieldElem
		field int
		want  string
		set   []int
	}{
		{fieldElem{kind: elemRange, a: 5, b: 7}, fDow, "5-7", []int{0, 5, 6}},
		{fieldElem{kind: elemFromStep, a: 5, step: 1}, fDow, "5/1", []int{5, 6}},
		{fieldElem{kind: elemFromStep, a: 5, step: 1, names: true}, fDow, "FRI/1", []int{5, 6}},
		{fieldElem{kind: elemFromStep, a: 7, step: 3}, fDow, "7/3", []int{0}},
		{fieldElem{kind: elemRange, a: 6, b: 0, names: true}, fDow, "SAT-SUN", []int{0, 6}},
		{fieldElem{kind: elemRange, a: 1, b: 7, names: true}, fDow, "MON-7", []int{0, 1, 2, 3, 4, 5, 6}},
		{fieldElem{kind: elemRange, a: 5, b: 0, names: true, full: true}, fDow, "friday-Sunday", []int{0, 5, 6}},
		{fieldElem{kind: elemValue, a: 7, names: true, full: true}, fMonth, "july", []int{7}},
		{fieldElem{kind: elemLast, a: 3}, fDom, "L-3", nil},
		{fieldElem{kind: elemLastWeekday}, fDom, "LW", nil},
		{fieldElem{kind: elemNearestWeekday, a: 15}, fDom, "15W", nil},
		{fieldElem{kind: elemLastDow, a: 5, names: true}, fDow, "FRIL", nil},
		{fieldElem{kind: elemNthDow, a: 1, b: 2, names: true}, fDow, "MON#2", nil},
		{fieldElem{kind: elemHash, hashRange: true, a: 0, b: 29, step: 10}, fMinute, "H(0-29)/10", []int{3, 13, 23}},
		{fieldElem{kind: elemStarStep, step: 2}, fDow, "*/2", []int{0, 2, 4, 6}},
		{fieldElem{kind: elemRangeStep, a: 1, b: 3, step: 1, names: true}, fMonth, "JAN-MAR/1", []int{1, 2, 3}},
		{fieldElem{kind: elemFromStep, a: 50, step: 4}, fMinute, "50/4", []int{50, 54, 58}},
		{fieldElem{kind: elemValue, a: 7}, fDow, "7", []int{0}},
	}
	for _, tt := range tests {
		e := &oracleExpr{name: "nightly-report"}
		e.fields[tt.field] = oracleField{tt.elem}
		if got := tt.elem.render(tt.field); got != tt.want {
			t.Errorf("render: got %q, want %q", got, tt.want)
		}
		set := e.set(tt.field)
		var got []int
		for v, ok := range set {
			if ok {
				got = append(got, v)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.set) {
			t.Errorf("%s: set %v, want %v", tt.want, got, tt.set)
		}
	}
}

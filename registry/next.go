package registry

import (
	"math"
	"time"
)

// Wall times are handled as "wall seconds": the civil date and time read as
// if it were UTC, counted from 1970-01-01T00:00:00. Instants are Unix seconds.

const (
	secondsPerDay = 86400
	// zoneMargin bounds how far a wall time can be from its instant's
	// neighbours in other zone periods: no offset change in the tz database
	// exceeds a day, so two days is safe.
	zoneMargin = 2 * secondsPerDay
	// horizonYears bounds the search for a next fire time. Parse-time checks
	// reject expressions that never fire; this guards the rest (a wildcard
	// schedule that only matches inside DST gaps) against looping.
	horizonYears = 30
	// clockCorrection is the smallest forward jump that is not daylight
	// saving time but a correction of the clock (Samoa skipping 30
	// December 2011): as cronie does, fixed-time schedules do not run for
	// the wall times it skips.
	clockCorrection = 3 * 3600
)

// period is one stretch of a zone with a constant UTC offset, [start, end).
type period struct {
	start, end, offset int64
}

func periodAt(loc *time.Location, instant int64) period {
	t := time.Unix(instant, 0).In(loc)
	_, off := t.Zone()
	p := period{start: math.MinInt64, end: math.MaxInt64, offset: int64(off)}
	s, e := t.ZoneBounds()
	if !s.IsZero() {
		p.start = s.Unix()
	}
	if !e.IsZero() {
		p.end = e.Unix()
	}
	// For the last UTC day of a leap year served by a zone's TZ footer rule
	// (after its explicit transitions, e.g. 2040-12-31 in New York), Go
	// reports an end at or before the instant (golang/go#81583); walking
	// periods from there never advanced. The offset is right and holds
	// through that day, which ends the year.
	if p.end <= instant {
		p.start, p.end = p.end, p.end+secondsPerDay
	}
	return p
}

// Next returns the first fire time strictly after t, in the expression's
// zone, or the zero Time if there is none within 30 years.
func (c *Cron) Next(t time.Time) time.Time {
	after := t.Unix() // floor: fire times are whole seconds
	if c.every > 0 {
		slot := (floorDiv(after-c.phase, c.every)+1)*c.every + c.phase
		return time.Unix(slot, 0).In(c.loc)
	}
	p := periodAt(c.loc, after)
	limit := after + horizonYears*366*secondsPerDay

	// Fast path: far from any zone transition, wall time and instant differ
	// by one fixed offset, so the first matching wall time is the answer.
	if p.start <= after-zoneMargin {
		if w, ok := c.nextWall(after+p.offset+1, limit+p.offset); ok {
			if i := w - p.offset; i < p.end-zoneMargin || p.end == math.MaxInt64 {
				return time.Unix(i, 0).In(c.loc)
			}
		}
	}
	if i, ok := c.nextNearTransition(after, limit); ok {
		return time.Unix(i, 0).In(c.loc)
	}
	return time.Time{}
}

// nextNearTransition is the general search: it walks matching wall times in
// order, maps each to its instants under the DST rules, and keeps the
// smallest instant after `after`. Near a fold wall order and instant order
// differ, so it continues until no later wall time can map to an earlier
// instant than the best found.
func (c *Cron) nextNearTransition(after, limit int64) (int64, bool) {
	z := zoneWindow{loc: c.loc}
	// No instant after `after` has a wall time before after+minOffset.
	minOffset := int64(math.MaxInt64)
	for _, p := range z.periods(after, after+zoneMargin) {
		minOffset = min(minOffset, p.offset)
	}
	best, found := int64(0), false
	stopWall := int64(math.MaxInt64)
	for w := after + minOffset; ; w++ {
		var ok bool
		if w, ok = c.nextWall(w, min(limit+secondsPerDay, stopWall-1)); !ok {
			return best, found
		}
		for _, i := range c.instants(&z, w) {
			if i > after && (!found || i < best) {
				best, found = i, true
				// Wall times from best+maxOffset on map to instants >= best.
				maxOffset := int64(math.MinInt64)
				for _, p := range z.periods(after, best) {
					maxOffset = max(maxOffset, p.offset)
				}
				stopWall = best + maxOffset
			}
		}
	}
}

// instants maps wall time w to the fire instants it stands for, applying
// the DST rules of the package doc. It returns at most a few instants.
func (c *Cron) instants(z *zoneWindow, w int64) []int64 {
	ps := z.periods(w-zoneMargin, w+zoneMargin)
	var out []int64
	for _, p := range ps {
		if i := w - p.offset; p.start <= i && i < p.end {
			if len(out) > 0 && !c.wildcard {
				break // fold: a fixed-time schedule fires at the earlier instant only
			}
			out = append(out, i)
		}
	}
	if len(out) > 0 || c.wildcard {
		return out // a wildcard schedule does not fire in a gap
	}
	// Gap: fire at the first instant after it, the transition itself,
	// unless the jump is a clock correction.
	for k := 1; k < len(ps); k++ {
		before, after := ps[k-1], ps[k]
		if before.end+before.offset <= w && w < after.start+after.offset {
			if after.offset-before.offset >= clockCorrection {
				return out
			}
			return append(out, after.start)
		}
	}
	return out
}

// zoneWindow caches the zone periods overlapping a range of instants, since
// the slow path resolves many wall times near the same transition.
type zoneWindow struct {
	loc    *time.Location
	cached []period
}

// periods returns the periods overlapping [from, to], in order.
func (z *zoneWindow) periods(from, to int64) []period {
	if n := len(z.cached); n > 0 && z.cached[0].start <= from && to < z.cached[n-1].end {
		lo, hi := 0, n
		for lo < n-1 && z.cached[lo].end <= from {
			lo++
		}
		for hi > lo+1 && z.cached[hi-1].start > to {
			hi--
		}
		return z.cached[lo:hi]
	}
	z.cached = z.cached[:0]
	for p := periodAt(z.loc, from); ; p = periodAt(z.loc, p.end) {
		z.cached = append(z.cached, p)
		if p.end > to || p.end == math.MaxInt64 {
			return z.cached
		}
	}
}

// nextWall returns the smallest matching wall time >= w and <= limit.
func (c *Cron) nextWall(w, limit int64) (int64, bool) {
	day := floorDiv(w, secondsPerDay)
	secOfDay := int(w - day*secondsPerDay)
	for day*secondsPerDay <= limit {
		y, m, d := civilFromDays(day)
		if c.month&(1<<m) == 0 {
			if m == 12 {
				day = daysFromCivil(y+1, 1, 1)
			} else {
				day = daysFromCivil(y, m+1, 1)
			}
			secOfDay = 0
			continue
		}
		if c.matchesDay(y, m, d, int(floorMod(day+4, 7))) { // 1970-01-01 was a Thursday
			if s, ok := c.timeOfDay(secOfDay); ok {
				if w := day*secondsPerDay + int64(s); w <= limit {
					return w, true
				}
				return 0, false
			}
		}
		day++
		secOfDay = 0
	}
	return 0, false
}

// timeOfDay returns the first matching second of the day >= from.
func (c *Cron) timeOfDay(from int) (int, bool) {
	h0, m0, s0 := from/3600, from/60%60, from%60
	for h := nextBit(c.hour, h0); h < 24; h = nextBit(c.hour, h+1) {
		mFrom := 0
		if h == h0 {
			mFrom = m0
		}
		for m := nextBit(c.minute, mFrom); m < 60; m = nextBit(c.minute, m+1) {
			sFrom := 0
			if h == h0 && m == m0 {
				sFrom = s0
			}
			if s := nextBit(c.second, sFrom); s < 60 {
				return h*3600 + m*60 + s, true
			}
		}
	}
	return 0, false
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// civilFromDays converts days since 1970-01-01 to a proleptic Gregorian
// date (Howard Hinnant's algorithm), avoiding time.Time in the hot loop.
func civilFromDays(z int64) (year, month, day int) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if m > 12 {
		m -= 12
	}
	if m <= 2 {
		y++
	}
	return int(y), int(m), int(d)
}

// daysFromCivil is the inverse of civilFromDays.
func daysFromCivil(year, month, day int) int64 {
	y := int64(year)
	if month <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	mp := int64(month+9) % 12
	doy := (153*mp+2)/5 + int64(day) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

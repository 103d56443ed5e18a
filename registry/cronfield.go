package registry

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	robfig "github.com/robfig/cron/v3"
)

// The fields of an expression, seconds first (a five-field expression has
// "0" there).
const (
	fieldSecond = iota
	fieldMinute
	fieldHour
	fieldDayOfMonth
	fieldMonth
	fieldDayOfWeek
)

type fieldSpec struct {
	name     string
	min, max int // numbers accepted; day-of-week 7 is Sunday again
	// last is the largest value of "*", "*/s" and "N/s": 6 (Saturday) in
	// day-of-week, max elsewhere.
	last int
	// names[v] is value v's three-letter name, full[v] its full name.
	names, full []string
	// hashLast is the largest value a bare H picks: 28 in day-of-month, so
	// that it fires in every month (as in Jenkins).
	hashLast int
	unit     string // for "@every 70m" in a hint; empty for day fields
	plural   string // "days of week", for messages
}

var fieldSpecs = [6]fieldSpec{
	{name: "second", min: 0, max: 59, last: 59, hashLast: 59, unit: "s", plural: "seconds"},
	{name: "minute", min: 0, max: 59, last: 59, hashLast: 59, unit: "m", plural: "minutes"},
	{name: "hour", min: 0, max: 23, last: 23, hashLast: 23, unit: "h", plural: "hours"},
	{name: "day-of-month", min: 1, max: 31, last: 31, hashLast: 28, plural: "days of month"},
	{name: "month", min: 1, max: 12, last: 12, hashLast: 12, plural: "months",
		names: []string{"", "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"},
		full:  []string{"", "JANUARY", "FEBRUARY", "MARCH", "APRIL", "MAY", "JUNE", "JULY", "AUGUST", "SEPTEMBER", "OCTOBER", "NOVEMBER", "DECEMBER"}},
	{name: "day-of-week", min: 0, max: 7, last: 6, hashLast: 6, plural: "days of week",
		names: []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"},
		full:  []string{"SUNDAY", "MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY", "SATURDAY"}},
}

// count is the number of distinct values of the field: the largest step
// that still makes sense.
func (sp *fieldSpec) count() int { return sp.last - sp.min + 1 }

// fieldSet is what one field matches.
type fieldSet struct {
	// items are the field's standard items (H resolved to numbers), which
	// robfig's parser turns into values (see standardValues).
	items  []stdItem
	values uint64
	// Day-of-month: last bit n for L-n, nearest bit d for dW, lastWeekday
	// for LW. Day-of-week: last bit w for wL, nth bit 7*(k-1)+w for w#k.
	last, nearest, nth uint64
	lastWeekday        bool
}

// stdItem is one standard list item: the values lo, lo+step, ... up to hi
// as belfry reads it (day-of-week 7 is Sunday), which the tests check
// robfig's values against, and the text robfig's parser is given for it.
type stdItem struct {
	lo, hi, step int
	robfig       string
}

// fieldError is a problem at bytes [offset, offset+len) of a field.
type fieldError struct {
	offset, len int
	msg         string
}

// parseField parses field number fi (0 = seconds), a comma-separated list.
func parseField(fi int, field string, cfg *cronConfig) (fieldSet, *fieldError) {
	var set fieldSet
	for start := 0; start <= len(field); {
		end := strings.IndexByte(field[start:], ',')
		if end < 0 {
			end = len(field)
		} else {
			end += start
		}
		item := field[start:end]
		if item == "" {
			at := max(start-1, 0)
			return set, &fieldError{at, min(1, len(field)-at), "empty list item; remove the extra comma"}
		}
		if msg := set.add(&fieldSpecs[fi], fi, item, cfg); msg != "" {
			return set, &fieldError{start, len(item), msg}
		}
		start = end + 1
	}
	return set, nil
}

// add adds one list item to the set, or says what is wrong with it.
func (set *fieldSet) add(sp *fieldSpec, fi int, item string, cfg *cronConfig) string {
	switch {
	case item == "*" || item == "?":
		if item == "?" && fi != fieldDayOfMonth && fi != fieldDayOfWeek {
			return "? is for day-of-month and day-of-week only; write *"
		}
		set.addValues(fi, sp.min, sp.last, 1, item)
		return ""
	case strings.HasPrefix(item, "*/"):
		step, msg := sp.step(item[2:])
		if msg != "" {
			return msg
		}
		set.addValues(fi, sp.min, sp.last, step, item)
		return ""
	case item[0] == 'H':
		return set.addHash(sp, fi, item, cfg)
	case fi == fieldDayOfMonth && (item[0] == 'L' || strings.HasSuffix(item, "W")):
		return set.addLastOrWeekday(sp, item)
	case fi == fieldDayOfWeek && strings.HasSuffix(item, "L"):
		if item == "L" {
			return "L alone is ambiguous in day-of-week (Quartz reads it as Saturday); write 6L for the last Saturday of the month, or L in day-of-month for its last day"
		}
		w, msg := sp.value(item[:len(item)-1])
		if msg != "" {
			return msg
		}
		set.last |= 1 << (w % 7)
		return ""
	case fi == fieldDayOfWeek && strings.Contains(item, "#"):
		day, nth, _ := strings.Cut(item, "#")
		w, msg := sp.value(day)
		if msg != "" {
			return msg
		}
		k, err := strconv.Atoi(nth)
		if !isDigits(nth) || err != nil || k < 1 || k > 5 {
			return fmt.Sprintf("%q after # must be 1 to 5 (the week of the month), e.g. MON#2 for the second Monday", nth)
		}
		set.nth |= 1 << (7*(k-1) + w%7)
		return ""
	}
	base, stepText, hasStep := strings.Cut(item, "/")
	loText, hiText, isRange := strings.Cut(base, "-")
	lo, msg := sp.value(loText)
	if msg != "" {
		if loText == "" && isRange {
			return "a range needs a start, e.g. 1-5; negative numbers are not values"
		}
		return msg
	}
	hi := lo
	switch {
	case isRange:
		if hi, msg = sp.value(hiText); msg != "" {
			return msg
		}
		if fi == fieldDayOfWeek && hi == 0 && lo > 0 {
			hi = 7 // SAT-SUN, FRI-0: a range ending on Sunday (as cronie reads it)
		}
		if lo > hi {
			return fmt.Sprintf("range %s runs backwards; ranges do not wrap around: write %s-%s,%s-%s", base,
				loText, sp.render(sp.last, loText), sp.render(sp.min, hiText), hiText)
		}
	case hasStep && lo <= sp.last:
		hi = sp.last // "N/s" runs to the last value: Saturday in day-of-week
	}
	step := 1
	if hasStep {
		if step, msg = sp.step(stepText); msg != "" {
			return msg
		}
	}
	text := item // robfig reads it as belfry does, unless:
	if fi == fieldDayOfWeek && hi == 7 || !robfigKnows(loText) || isRange && !robfigKnows(hiText) {
		text = "" // Sunday as 7 or a full name: write it in numbers
	}
	set.addValues(fi, lo, hi, step, text)
	return ""
}

// addValues adds the values lo, lo+step, ... up to hi (day-of-week 7 is
// Sunday) as one standard item. text is the item as robfig's parser is to
// read it, or empty to have it written in numbers it accepts.
func (set *fieldSet) addValues(fi, lo, hi, step int, text string) {
	if text == "" {
		text = numericItems(fi, lo, hi, step)
	}
	set.items = append(set.items, stdItem{lo: lo, hi: hi, step: step, robfig: text})
}

// robfigKnows reports whether robfig's parser reads a value text that
// fieldSpec.value accepted as belfry does: a number or a three-letter
// name, not a full name. (A day of week of 7 is the caller's to check.)
func robfigKnows(text string) bool { return len(text) <= 3 || isDigits(text) }

// numericItems writes the values lo, lo+step, ... up to hi as items
// robfig's parser accepts. Its day of week stops at 6, so Sunday as 7 is
// written 0: "5-7" becomes "5-6,0", "MON-SUN" "1-6,0", "1-7/3" "1-6/3,0"
// and "7" "0".
func numericItems(fi, lo, hi, step int) string {
	top := hi
	if fi == fieldDayOfWeek {
		top = min(hi, 6)
	}
	var items []string
	if lo <= top {
		items = append(items, spanText(lo, top, step))
	}
	if top < hi && (hi-lo)%step == 0 {
		items = append(items, "0")
	}
	return strings.Join(items, ",")
}

// spanText writes lo, lo+step, ... up to hi as one robfig item.
func spanText(lo, hi, step int) string {
	switch {
	case lo == hi:
		return strconv.Itoa(lo)
	case step == 1:
		return fmt.Sprintf("%d-%d", lo, hi)
	}
	return fmt.Sprintf("%d-%d/%d", lo, hi, step)
}

// robfigText is the field's standard items as robfig's parser is given
// them, empty when it has none.
func (set *fieldSet) robfigText() string {
	texts := make([]string, len(set.items))
	for k, it := range set.items {
		texts[k] = it.robfig
	}
	return strings.Join(texts, ",")
}

// standardParser is robfig's parser for the standard items of all six
// fields. Descriptors are expanded (and @every handled) before it.
var standardParser = robfig.NewParser(robfig.Second | robfig.Minute | robfig.Hour | robfig.Dom | robfig.Month | robfig.Dow)

// robfigStar is the bit robfig's parser adds for a field starting with *
// or ?; belfry decides that from the text (startsWithStar), as cronie.
const robfigStar = 1 << 63

// robfigRejects starts the message of a robfig error on items belfry
// validated, which is a bug in belfry, never a mistake in the expression.
const robfigRejects = "internal error: robfig/cron's parser rejects"

// standardValues has robfig's parser compute the values of every field's
// standard items, in one parse of the six fields. A field of extension
// items only ("L") is given as "*" and keeps no standard value.
func standardValues(sets *[6]fieldSet) error {
	var spec [6]string
	for i := range sets {
		spec[i] = cmp.Or(sets[i].robfigText(), "*")
	}
	text := strings.Join(spec[:], " ")
	sched, err := standardParser.Parse(text)
	s, ok := sched.(*robfig.SpecSchedule)
	if err != nil || !ok {
		return fmt.Errorf("%s %q, the standard items as belfry passes them on (%v); please report the expression as a bug in belfry", robfigRejects, text, err)
	}
	for i, values := range [6]uint64{s.Second, s.Minute, s.Hour, s.Dom, s.Month, s.Dow} {
		if len(sets[i].items) > 0 {
			sets[i].values = values &^ robfigStar
		}
	}
	return nil
}

// addLastOrWeekday adds L, L-n, LW or nW to a day-of-month set.
func (set *fieldSet) addLastOrWeekday(sp *fieldSpec, item string) string {
	switch {
	case item == "L":
		set.last |= 1
	case item == "LW":
		set.lastWeekday = true
	case strings.HasPrefix(item, "L-"):
		n, err := strconv.Atoi(item[2:])
		if !isDigits(item[2:]) || err != nil || n > 30 {
			return fmt.Sprintf("%q: L-n needs n from 0 to 30 (days before the last), e.g. L-3", item)
		}
		set.last |= 1 << n
	case strings.HasSuffix(item, "W") && item != "W":
		d, msg := sp.value(item[:len(item)-1])
		if msg != "" {
			return msg
		}
		set.nearest |= 1 << d
	default:
		return fmt.Sprintf("%q is not a day of month: want L (last day), L-3 (3 days before it), LW (last weekday) or 15W (weekday nearest the 15th)", item)
	}
	return ""
}

// addHash adds H, H/s, H(a-b) or H(a-b)/s: values picked by hashing the
// schedule's name with the field's name.
func (set *fieldSet) addHash(sp *fieldSpec, fi int, item string, cfg *cronConfig) string {
	rest := item[1:]
	lo, hi := sp.min, sp.hashLast
	if strings.HasPrefix(rest, "(") {
		inner, after, ok := strings.Cut(rest[1:], ")")
		loText, hiText, isRange := strings.Cut(inner, "-")
		if !ok || !isRange {
			return fmt.Sprintf("%q: want H, H/15, H(0-29) or H(0-29)/10", item)
		}
		var msg string
		if lo, msg = sp.value(loText); msg != "" {
			return msg
		}
		if hi, msg = sp.value(hiText); msg != "" {
			return msg
		}
		if fi == fieldDayOfWeek && hi == 0 && lo > 0 {
			hi = 7
		}
		if lo > hi {
			return fmt.Sprintf("range H(%s) runs backwards", inner)
		}
		rest = after
	} else if strings.HasPrefix(rest, "/") {
		hi = sp.last
	}
	step := 0
	if rest != "" {
		stepText, ok := strings.CutPrefix(rest, "/")
		if !ok {
			return fmt.Sprintf("%q: want H, H/15, H(0-29) or H(0-29)/10", item)
		}
		var msg string
		if step, msg = sp.step(stepText); msg != "" {
			return msg
		}
	}
	if cfg.name == "" {
		why := ""
		if !cfg.flags {
			why = " (explicit, so that renaming the function does not move the fire times)"
		}
		return fmt.Sprintf("H picks a value from the schedule's name, and none is given; add %s%s", cfg.setting("name", "nightly-report"), why)
	}
	cfg.hashed = true
	h := hashField(cfg.name, sp.name)
	if step == 0 {
		v := lo + int(h%uint64(hi-lo+1))
		set.addValues(fi, v, v, 1, "")
		return ""
	}
	set.addValues(fi, lo+int(h%uint64(min(step, hi-lo+1))), hi, step, "")
	return ""
}

// hashField is the number H fields derive their values from: FNV-1a
// (64-bit) of the schedule's name, a NUL byte and the field's name
// ("minute"). It is fixed by this definition, so every replica and every
// release of belfry pick the same values.
func hashField(name, field string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(field))
	return h.Sum64()
}

// value parses a number or a name of the field.
func (sp *fieldSpec) value(text string) (int, string) {
	if text == "" {
		return 0, fmt.Sprintf("missing value; %s are %s", sp.plural, sp.describe())
	}
	if isDigits(text) {
		v, err := strconv.Atoi(text)
		switch {
		case err != nil || v > sp.max:
			return 0, fmt.Sprintf("%s is above the maximum %d; %s are %s", text, sp.max, sp.plural, sp.describe())
		case v < sp.min:
			return 0, fmt.Sprintf("%s is below the minimum %d; %s are %s", text, sp.min, sp.plural, sp.describe())
		}
		return v, ""
	}
	upper := strings.ToUpper(text)
	for v := range sp.names {
		if sp.names[v] != "" && (upper == sp.names[v] || upper == sp.full[v]) {
			return v, ""
		}
	}
	if sp.names == nil || text[0] >= '0' && text[0] <= '9' {
		msg := fmt.Sprintf("%q is not a number; %s are %s", text, sp.plural, sp.describe())
		if strings.ContainsAny(text, "#LW") {
			msg += " (L and W belong in day-of-month: L, L-3, LW, 15W; L and # in day-of-week: 5L, MON#2)"
		}
		return 0, msg
	}
	kind := "month"
	if sp.max == 7 {
		kind = "day"
	}
	for v := range sp.names {
		if sp.names[v] != "" && len(upper) > 3 && strings.HasPrefix(upper, sp.names[v]) {
			return 0, fmt.Sprintf("unknown %s name %q; write %s or %s", kind, text, sp.names[v], sp.full[v])
		}
	}
	return 0, fmt.Sprintf("unknown %s name %q; %s are %s", kind, text, sp.plural, sp.describe())
}

// describe says which values the field takes, for messages.
func (sp *fieldSpec) describe() string {
	switch {
	case sp.names == nil:
		return fmt.Sprintf("%d-%d", sp.min, sp.max)
	case sp.max == 7:
		return "0-7 (0 and 7 are Sunday) or SUN-SAT"
	}
	return fmt.Sprintf("%d-%d or %s-%s", sp.min, sp.max, sp.names[sp.min], sp.names[sp.max])
}

// render writes value v as a number, or as a name when like is a name.
func (sp *fieldSpec) render(v int, like string) string {
	if sp.names != nil && !isDigits(like) {
		return sp.names[v%len(sp.names)]
	}
	return strconv.Itoa(v)
}

// step parses the step after a '/'.
func (sp *fieldSpec) step(text string) (int, string) {
	s, err := strconv.Atoi(text)
	switch {
	case !isDigits(text):
		return 0, fmt.Sprintf("step %q is not a whole number, e.g. */15", text)
	case s == 0:
		return 0, "a step of 0 never advances; want 1 or more, e.g. */15"
	case err != nil || s > sp.count():
		hint := "it would match only the first value"
		if sp.unit != "" {
			hint += fmt.Sprintf("; for a period longer than the field, write e.g. \"@every %s%s\"", text, sp.unit)
		}
		return 0, fmt.Sprintf("step %s is larger than the %s range %d-%d: %s", text, sp.name, sp.min, sp.last, hint)
	}
	return s, ""
}

func isDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

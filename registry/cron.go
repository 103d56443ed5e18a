package registry

import (
	"fmt"
	"math/bits"
	"regexp"
	"strconv"
	"strings"
	"time"

	robfig "github.com/robfig/cron/v3"
)

// Cron is a parsed cron expression bound to a zone. Its zero value is not
// usable; build one with ParseCron.
type Cron struct {
	expr string
	loc  *time.Location

	// Bit i set means value i matches. Fields never carry robfig's star bit.
	second, minute, hour, dom, month, dow uint64
	// domStar and dowStar record whether the day fields start with '*' or
	// '?', which decides between AND and OR of the day fields.
	domStar, dowStar bool
	// wildcard is true when the minute or hour field starts with '*'; see
	// the package doc for what it changes around DST transitions.
	wildcard bool
	// every is the @every period in seconds; zero for field expressions.
	every int64
}

// ExprError is a problem in a cron expression, located by byte offset.
type ExprError struct {
	Offset, Len int // the offending bytes within the expression
	Msg         string
}

func (e *ExprError) Error() string { return e.Msg }

// ExprExample is a valid expression that error messages show.
const ExprExample = `"17 3 * * *" (minute hour day-of-month month day-of-week)`

var descriptors = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// ExpandDescriptor returns the five-field form of a descriptor such as
// @daily ("0 0 * * *"), for tools that rewrite expressions; ok is false for
// anything else, @every included.
func ExpandDescriptor(expr string) (fields string, ok bool) {
	fields, ok = descriptors[strings.TrimSpace(expr)]
	return fields, ok
}

var fieldNames = [6]string{"second", "minute", "hour", "day-of-month", "month", "day-of-week"}

// fieldParser parses one field at a time (the others "*"), so an error names
// the field it is in.
var fieldParser = robfig.NewParser(robfig.Second | robfig.Minute | robfig.Hour |
	robfig.Dom | robfig.Month | robfig.Dow)

const robfigStar = 1 << 63

// ParseCron parses expr (5 fields, 6 with leading seconds, a descriptor such
// as @daily, or "@every <duration>") for evaluation in loc. It rejects zone
// prefixes (use the tz= key) and expressions that can never fire.
func ParseCron(expr string, loc *time.Location) (*Cron, error) {
	if loc == nil {
		loc = time.UTC
	}
	c := &Cron{expr: expr, loc: loc}
	trimmed := strings.TrimSpace(expr)
	lead := strings.Index(expr, trimmed)
	if trimmed == "" {
		return nil, &ExprError{0, len(expr), "empty cron expression; want e.g. " + ExprExample}
	}
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		if strings.HasPrefix(trimmed, prefix) {
			zone, _, _ := strings.Cut(trimmed[len(prefix):], " ")
			return nil, &ExprError{lead, len(prefix) + len(zone),
				fmt.Sprintf("zone prefix %s%s is not supported in the expression; use the key tz=%s", prefix, zone, zone)}
		}
	}
	if strings.HasPrefix(trimmed, "@every") {
		if err := c.parseEvery(trimmed, lead); err != nil {
			return nil, err
		}
		return c, nil
	}
	text := trimmed
	if strings.HasPrefix(trimmed, "@") {
		var ok bool
		if text, ok = descriptors[trimmed]; !ok {
			return nil, &ExprError{lead, len(trimmed), fmt.Sprintf("unknown descriptor %q; want one of @yearly @annually @monthly @weekly @daily @midnight @hourly, or \"@every 10m\"", trimmed)}
		}
	}
	fields, offsets := splitFields(text)
	if strings.HasPrefix(trimmed, "@") {
		offsets = []int{0, 0, 0, 0, 0}
	}
	for i := range offsets {
		offsets[i] += lead
	}
	switch len(fields) {
	case 5:
		fields = append([]string{"0"}, fields...)
		offsets = append([]int{-1}, offsets...)
	case 6:
	default:
		return nil, &ExprError{lead, len(trimmed), fmt.Sprintf("cron expression has %d fields; want 5 (minute hour day-of-month month day-of-week) or 6 with leading seconds, e.g. %s", len(fields), ExprExample)}
	}
	var sets [6]uint64
	for i, f := range fields {
		set, err := parseField(i, f)
		if err != nil {
			msg := err.Error() + "; want e.g. " + ExprExample
			if !strings.HasPrefix(trimmed, "@") {
				return nil, &ExprError{offsets[i], len(f), msg}
			}
			return nil, &ExprError{lead, len(trimmed), msg}
		}
		sets[i] = set
	}
	c.second, c.minute, c.hour, c.dom, c.month, c.dow = sets[0], sets[1], sets[2], sets[3], sets[4], sets[5]
	c.domStar = startsWithStar(fields[3])
	c.dowStar = startsWithStar(fields[5])
	c.wildcard = strings.HasPrefix(fields[1], "*") || strings.HasPrefix(fields[2], "*")
	if err := c.checkCanFire(); err != nil {
		return nil, &ExprError{offsets[3], len(fields[3]), err.Error()}
	}
	return c, nil
}

// MustParseCron is ParseCron for expressions known to be valid; it panics otherwise.
func MustParseCron(expr string, loc *time.Location) *Cron {
	c, err := ParseCron(expr, loc)
	if err != nil {
		panic(fmt.Sprintf("registry: parsing %q: %v", expr, err))
	}
	return c
}

func startsWithStar(field string) bool {
	return strings.HasPrefix(field, "*") || strings.HasPrefix(field, "?")
}

func (c *Cron) parseEvery(trimmed string, lead int) error {
	arg := strings.TrimSpace(strings.TrimPrefix(trimmed, "@every"))
	argAt := lead + strings.LastIndex(trimmed, arg)
	if arg == "" || !strings.HasPrefix(trimmed, "@every ") {
		return &ExprError{lead, len(trimmed), `@every needs a duration, e.g. "@every 15m"`}
	}
	d, err := time.ParseDuration(arg)
	switch {
	case err != nil:
		return &ExprError{argAt, len(arg), fmt.Sprintf("@every: %q is not a duration; want e.g. \"@every 15m\"", arg)}
	case d < time.Second || d%time.Second != 0:
		return &ExprError{argAt, len(arg), fmt.Sprintf("@every: %s must be a whole number of seconds, at least 1s; e.g. \"@every 90s\"", arg)}
	}
	c.every = int64(d / time.Second)
	c.wildcard = true
	return nil
}

// splitFields splits on spaces and tabs, keeping each field's byte offset.
func splitFields(s string) (fields []string, offsets []int) {
	start := -1
	for i := 0; i <= len(s); i++ {
		blank := i == len(s) || s[i] == ' ' || s[i] == '\t'
		if !blank && start < 0 {
			start = i
		}
		if blank && start >= 0 {
			fields = append(fields, s[start:i])
			offsets = append(offsets, start)
			start = -1
		}
	}
	return fields, offsets
}

// parseField parses field number i (0 = seconds) with robfig's parser.
func parseField(i int, f string) (uint64, error) {
	spec := [6]string{"*", "*", "*", "*", "*", "*"}
	spec[i] = f
	if i == 5 {
		spec[i] = sundayAsSeven(f)
	}
	sched, err := fieldParser.Parse(strings.Join(spec[:], " "))
	if err != nil {
		msg := err.Error()
		if strings.ContainsAny(f, "HLW#") {
			msg = "the H, L, W and # extensions are not supported"
		}
		return 0, fmt.Errorf("%s field %q: %s", fieldNames[i], f, msg)
	}
	s := sched.(*robfig.SpecSchedule)
	set := [6]uint64{s.Second, s.Minute, s.Hour, s.Dom, s.Month, s.Dow}[i] &^ robfigStar
	if set == 0 {
		return 0, fmt.Errorf("%s field %q matches no value", fieldNames[i], f)
	}
	return set, nil
}

var numericRange = regexp.MustCompile(`^(\d+)(?:-(\d+))?(?:/(\d+))?$`)

// sundayAsSeven rewrites day-of-week elements that use 7 for Sunday, which
// robfig's parser (bounds 0-6) rejects, into explicit lists with 0.
func sundayAsSeven(field string) string {
	elems := strings.Split(field, ",")
	for k, e := range elems {
		m := numericRange.FindStringSubmatch(e)
		if m == nil {
			continue
		}
		// Numbers too long for an int are left to robfig to reject.
		lo, err := strconv.Atoi(m[1])
		if err != nil {
			continue
		}
		hi := lo
		if m[2] != "" {
			if hi, err = strconv.Atoi(m[2]); err != nil {
				continue
			}
		} else if m[3] != "" {
			hi = 7 // "N/step" means N through the maximum
		}
		step := 1
		if m[3] != "" {
			if step, err = strconv.Atoi(m[3]); err != nil {
				continue
			}
		}
		if lo != 7 && hi != 7 || lo > hi || step < 1 || hi > 7 {
			continue // leave errors and 7-free elements to robfig
		}
		step = min(step, 8) // any larger step lands past 7 just the same, without overflowing v
		var vals []string
		for v := lo; v <= hi; v += step {
			vals = append(vals, strconv.Itoa(v%7))
		}
		elems[k] = strings.Join(vals, ",")
	}
	return strings.Join(elems, ",")
}

var daysIn = [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// checkCanFire rejects expressions such as "0 0 30 2 *" that name only days
// that never exist. A restricted day-of-week always fires somewhere (OR with
// the day of month, or AND with a starred one).
func (c *Cron) checkCanFire() error {
	if c.domStar || !c.dowStar {
		return nil
	}
	for m := 1; m <= 12; m++ {
		if c.month&(1<<m) != 0 && c.dom&(1<<(daysIn[m]+1)-1) != 0 {
			return nil
		}
	}
	return fmt.Errorf("never fires: no month in the expression has the day of month it names; e.g. \"0 0 28 2 *\" for 28 February")
}

// Expr returns the expression as written.
func (c *Cron) Expr() string { return c.expr }

// Location returns the zone the expression is evaluated in.
func (c *Cron) Location() *time.Location { return c.loc }

// Wildcard reports whether the minute or hour field starts with '*' (or the
// expression is @hourly or @every), which changes the DST rules.
func (c *Cron) Wildcard() bool { return c.wildcard }

// Every returns the period of an "@every" expression, or zero.
func (c *Cron) Every() time.Duration { return time.Duration(c.every) * time.Second }

// matchesDay applies the Vixie rule to a civil date.
func (c *Cron) matchesDay(month, day, weekday int) bool {
	if c.month&(1<<month) == 0 {
		return false
	}
	domOK := c.dom&(1<<day) != 0
	dowOK := c.dow&(1<<weekday) != 0
	if c.domStar || c.dowStar {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// nextBit returns the smallest set bit >= from in set, or 64.
func nextBit(set uint64, from int) int {
	if from >= 64 {
		return 64
	}
	return from + bits.TrailingZeros64(set>>from)
}

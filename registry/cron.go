package registry

import (
	"cmp"
	"fmt"
	"math/bits"
	"strings"
	"time"
)

// Cron is a parsed cron expression bound to a zone. Its zero value is not
// usable; build one with ParseCron.
type Cron struct {
	expr string
	loc  *time.Location

	// Bit i set means value i matches; day-of-week 7 is folded onto 0.
	second, minute, hour, dom, month, dow uint64
	// The day extensions. domLast bit n: the n-th day before the last of
	// the month (L is n=0, L-3 is n=3); domNearest bit d: the weekday
	// nearest day d (dW); domLastWeekday: LW; dowLast bit w: the last
	// weekday w of the month (5L); dowNth bit 7*(k-1)+w: the k-th weekday w
	// of the month (MON#2). dayExt is set when any of them is.
	domLast, domNearest, dowLast, dowNth uint64
	domLastWeekday, dayExt               bool
	// domStar and dowStar record whether the day fields start with '*' or
	// '?', which decides between AND and OR of the day fields.
	domStar, dowStar bool
	// wildcard is true when the minute or hour field starts with '*'; see
	// the package doc for what it changes around DST transitions.
	wildcard bool
	// every is the @every period in seconds, zero for field expressions;
	// phase shifts its slots (0 <= phase < every).
	every, phase int64
}

// ExprError is a problem in a cron expression, located by byte offset.
type ExprError struct {
	Offset, Len int // the offending bytes within the expression
	Msg         string
	// Setting, when not empty, names the setting that is wrong rather
	// than the expression text ("phase"), so that a directive can point at
	// its key.
	Setting string
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

// CronOption adds what an expression alone does not say to ParseCron.
type CronOption func(*cronConfig)

type cronConfig struct {
	name  string
	phase time.Duration
	flags bool
	// hashed is set by the parse when an H field took its value from
	// name: only then does the result depend on the name.
	hashed bool
}

// WithName gives the schedule's name, from which an H field takes its
// value. Without it, an expression using H is an error.
func WithName(name string) CronOption { return func(c *cronConfig) { c.name = name } }

// WithPhase shifts the slots of an "@every d" expression by phase (0 <=
// phase < d, whole seconds): "@every 1h" with phase 17m fires at :17 past
// every hour. It is an error with any other expression.
func WithPhase(phase time.Duration) CronOption { return func(c *cronConfig) { c.phase = phase } }

// FlagHints makes error messages name settings as command-line flags
// ("--tz Europe/Berlin", "--name") instead of directive keys ("tz=").
func FlagHints() CronOption { return func(c *cronConfig) { c.flags = true } }

// setting spells a setting with an example value the way the caller's user
// writes it: "the key tz=UTC" or "--tz UTC".
func (c *cronConfig) setting(key, example string) string {
	if c.flags {
		return "--" + key + " " + example
	}
	return "the key " + key + "=" + example
}

// ParseCron parses expr (5 fields, 6 with leading seconds, a descriptor such
// as @daily, or "@every <duration>") for evaluation in loc. It rejects zone
// prefixes (use the tz= key) and expressions that can never fire. The
// syntax is in the package doc.
func ParseCron(expr string, loc *time.Location, opts ...CronOption) (*Cron, error) {
	var cfg cronConfig
	for _, o := range opts {
		o(&cfg)
	}
	return parseCron(expr, loc, &cfg)
}

// parseCron is ParseCron with its options applied; it sets cfg.hashed.
func parseCron(expr string, loc *time.Location, cfg *cronConfig) (*Cron, error) {
	if loc == nil {
		loc = time.UTC
	}
	c := &Cron{expr: expr, loc: loc}
	trimmed := strings.TrimSpace(expr)
	lead := strings.Index(expr, trimmed)
	if trimmed == "" {
		return nil, &ExprError{Offset: 0, Len: len(expr), Msg: "empty cron expression; want e.g. " + ExprExample}
	}
	for _, prefix := range []string{"CRON_TZ=", "TZ="} {
		if strings.HasPrefix(trimmed, prefix) {
			zone, _, _ := strings.Cut(trimmed[len(prefix):], " ")
			return nil, &ExprError{Offset: lead, Len: len(prefix) + len(zone),
				Msg: fmt.Sprintf("zone prefix %s%s is not supported in the expression; use %s", prefix, zone, cfg.setting("tz", zone))}
		}
	}
	if strings.HasPrefix(trimmed, "@every") {
		if err := c.parseEvery(trimmed, lead, cfg); err != nil {
			return nil, err
		}
		return c, nil
	}
	if cfg.phase != 0 {
		return nil, &ExprError{Offset: lead, Len: len(trimmed), Setting: "phase",
			Msg: fmt.Sprintf("a phase applies only to @every expressions, not %q; e.g. \"@every 1h\" with %s", trimmed, cfg.setting("phase", "17m"))}
	}
	text := trimmed
	descriptor := strings.HasPrefix(trimmed, "@")
	if descriptor {
		var ok bool
		if text, ok = descriptors[trimmed]; !ok {
			return nil, &ExprError{Offset: lead, Len: len(trimmed), Msg: fmt.Sprintf("unknown descriptor %q; want one of @yearly @annually @monthly @weekly @daily @midnight @hourly, or \"@every 10m\"", trimmed)}
		}
	}
	fields, offsets := splitFields(text)
	withSeconds := len(fields) == 6
	for i := range offsets {
		offsets[i] += lead
		if descriptor {
			offsets[i] = lead
		}
	}
	switch len(fields) {
	case 5:
		fields = append([]string{"0"}, fields...)
		offsets = append([]int{-1}, offsets...)
	case 6:
	default:
		return nil, fieldCountError(fields, offsets, lead, trimmed)
	}
	var sets [6]fieldSet
	for i, f := range fields {
		set, err := parseField(i, f, cfg)
		if err != nil {
			if withSeconds {
				if e := trailingFieldError(fields, offsets, cfg); e != nil {
					return nil, e
				}
			}
			msg := fmt.Sprintf("%s field %q: %s; want e.g. %s", fieldSpecs[i].name, f, err.msg, ExprExample)
			if descriptor {
				return nil, &ExprError{Offset: lead, Len: len(trimmed), Msg: msg}
			}
			return nil, &ExprError{Offset: offsets[i] + err.offset, Len: err.len, Msg: msg}
		}
		sets[i] = set
	}
	if err := standardValues(&sets); err != nil {
		return nil, &ExprError{Offset: lead, Len: len(trimmed), Msg: err.Error()}
	}
	c.second, c.minute, c.hour = sets[0].values, sets[1].values, sets[2].values
	c.dom, c.month, c.dow = sets[3].values, sets[4].values, sets[5].values
	c.domLast, c.domNearest, c.domLastWeekday = sets[3].last, sets[3].nearest, sets[3].lastWeekday
	c.dowLast, c.dowNth = sets[5].last, sets[5].nth
	c.dayExt = c.domLast|c.domNearest|c.dowLast|c.dowNth != 0 || c.domLastWeekday
	c.domStar = startsWithStar(fields[3])
	c.dowStar = startsWithStar(fields[5])
	c.wildcard = strings.HasPrefix(fields[1], "*") || strings.HasPrefix(fields[2], "*")
	if !c.canFire() {
		return nil, &ExprError{Offset: offsets[3], Len: len(fields[3]),
			Msg: "never fires: no month in the expression has the day of month it names; e.g. \"0 0 28 2 *\" for 28 February"}
	}
	return c, nil
}

// MustParseCron is ParseCron for expressions known to be valid; it panics otherwise.
func MustParseCron(expr string, loc *time.Location, opts ...CronOption) *Cron {
	c, err := ParseCron(expr, loc, opts...)
	if err != nil {
		panic(fmt.Sprintf("registry: parsing %q: %v", expr, err))
	}
	return c
}

func startsWithStar(field string) bool {
	return strings.HasPrefix(field, "*") || strings.HasPrefix(field, "?")
}

// fieldCountError explains a wrong number of fields, recognising a pasted
// crontab line: a complete five-field schedule followed by a command.
func fieldCountError(fields []string, offsets []int, lead int, trimmed string) error {
	if len(fields) > 6 && !isDayOfWeekField(fields[5]) {
		if _, err := ParseCron(strings.Join(fields[:5], " "), time.UTC, WithName("x")); err == nil {
			return &ExprError{Offset: offsets[5], Len: lead + len(trimmed) - offsets[5],
				Msg: fmt.Sprintf("cron expression has %d fields; it looks like a crontab line: keep only the schedule, %q (the directive's function is the command)", len(fields), strings.Join(fields[:5], " "))}
		}
	}
	return &ExprError{Offset: lead, Len: len(trimmed), Msg: fmt.Sprintf("cron expression has %d fields; want 5 (minute hour day-of-month month day-of-week) or 6 with leading seconds, e.g. %s", len(fields), ExprExample)}
}

// trailingFieldError explains a six-field expression whose last field is
// not a day of week although the first five are a complete schedule: a
// crontab command or a stray extra field, not a seconds field.
func trailingFieldError(fields []string, offsets []int, cfg *cronConfig) error {
	five := strings.Join(fields[:5], " ")
	if isDayOfWeekField(fields[5]) {
		return nil
	}
	if _, err := ParseCron(five, time.UTC, WithName(cmp.Or(cfg.name, "x"))); err != nil {
		return nil
	}
	last := fields[5]
	what := "a trailing extra field"
	if strings.ContainsAny(last, "/.~$") {
		what = "a command from a crontab line"
	}
	return &ExprError{Offset: offsets[5], Len: len(last),
		Msg: fmt.Sprintf("%q is not a day of week and looks like %s: the first five fields, %q, are the whole schedule; drop the rest", last, what, five)}
}

// isDayOfWeekField reports whether f parses as a day-of-week field (any
// name serves H).
func isDayOfWeekField(f string) bool {
	_, err := parseField(fieldDayOfWeek, f, &cronConfig{name: "x"})
	return err == nil
}

func (c *Cron) parseEvery(trimmed string, lead int, cfg *cronConfig) error {
	arg := strings.TrimSpace(strings.TrimPrefix(trimmed, "@every"))
	argAt := lead + strings.LastIndex(trimmed, arg)
	if arg == "" || !strings.HasPrefix(trimmed, "@every ") {
		return &ExprError{Offset: lead, Len: len(trimmed), Msg: `@every needs a duration, e.g. "@every 15m"`}
	}
	d, err := time.ParseDuration(arg)
	switch {
	case err != nil && strings.HasSuffix(arg, "d"):
		return &ExprError{Offset: argAt, Len: len(arg), Msg: fmt.Sprintf("@every: %q is not a duration: Go durations have no d (day) unit; write hours, e.g. \"@every 24h\" for a day", arg)}
	case err != nil && strings.HasSuffix(arg, "w"):
		return &ExprError{Offset: argAt, Len: len(arg), Msg: fmt.Sprintf("@every: %q is not a duration: Go durations have no w (week) unit; write hours, e.g. \"@every 168h\" for a week", arg)}
	case err != nil:
		return &ExprError{Offset: argAt, Len: len(arg), Msg: fmt.Sprintf("@every: %q is not a duration; want e.g. \"@every 15m\"", arg)}
	case d < time.Second || d%time.Second != 0:
		return &ExprError{Offset: argAt, Len: len(arg), Msg: fmt.Sprintf("@every: %s must be a whole number of seconds, at least 1s; e.g. \"@every 90s\"", arg)}
	}
	if err := checkPhase(cfg.phase, d); err != nil {
		return &ExprError{Offset: lead, Len: len(trimmed), Setting: "phase",
			Msg: fmt.Sprintf("phase %s: %v; e.g. \"@every 1h\" with %s", cfg.phase, err, cfg.setting("phase", "17m"))}
	}
	c.every = int64(d / time.Second)
	c.phase = int64(cfg.phase / time.Second)
	c.wildcard = true
	return nil
}

// checkPhase reports whether phase can shift the slots of @every period.
func checkPhase(phase, period time.Duration) error {
	switch {
	case phase < 0 || phase%time.Second != 0:
		return fmt.Errorf("a phase is a whole number of seconds, 0 or more")
	case phase >= period:
		return fmt.Errorf("the phase must be shorter than the period %s", period)
	}
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

// canFire rejects expressions such as "0 0 30 2 *" that name only days
// that never exist. Weekdays and leap years repeat every 28 years (no
// century year in 2000-2027 breaks the cycle), so a day that matches at
// all matches in those years.
func (c *Cron) canFire() bool {
	if !c.domStar && !c.dowStar && c.dow != 0 || c.dowStar && !c.domStar && !c.dayExt && c.dom&(1<<29-2) != 0 && c.month != 0 {
		return true // a weekday or one of the 1st-28th fires in any month (fast path)
	}
	for day := daysFromCivil(2000, 1, 1); day < daysFromCivil(2028, 1, 1); day++ {
		y, m, d := civilFromDays(day)
		if c.matchesDay(y, m, d, int(floorMod(day+4, 7))) {
			return true
		}
	}
	return false
}

// Expr returns the expression as written.
func (c *Cron) Expr() string { return c.expr }

// Location returns the zone the expression is evaluated in.
func (c *Cron) Location() *time.Location { return c.loc }

// In returns the same expression evaluated in loc: the H values and the
// phase stay those it was parsed with.
func (c *Cron) In(loc *time.Location) *Cron {
	cp := *c
	cp.loc = loc
	return &cp
}

// Wildcard reports whether the minute or hour field starts with '*' (or the
// expression is @hourly or @every), which changes the DST rules.
func (c *Cron) Wildcard() bool { return c.wildcard }

// Every returns the period of an "@every" expression, or zero.
func (c *Cron) Every() time.Duration { return time.Duration(c.every) * time.Second }

// Phase returns the phase of an "@every" expression (see WithPhase).
func (c *Cron) Phase() time.Duration { return time.Duration(c.phase) * time.Second }

// matchesDay applies the Vixie rule to a civil date.
func (c *Cron) matchesDay(year, month, day, weekday int) bool {
	if c.month&(1<<month) == 0 {
		return false
	}
	domOK := c.dom&(1<<day) != 0
	dowOK := c.dow&(1<<weekday) != 0
	if c.dayExt && (!domOK || !dowOK) {
		last := daysInMonth(year, month)
		domOK = domOK || c.domExtMatches(day, weekday, last)
		dowOK = dowOK || c.dowLast&(1<<weekday) != 0 && day+7 > last ||
			c.dowNth&(1<<((day-1)/7*7+weekday)) != 0
	}
	if c.domStar || c.dowStar {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// domExtMatches reports whether L, L-n, LW or nW match day of a month of
// last days whose weekday is weekday.
func (c *Cron) domExtMatches(day, weekday, last int) bool {
	if c.domLast&(1<<(last-day)) != 0 {
		return true
	}
	if weekday == 0 || weekday == 6 {
		return false // LW and nW fire on weekdays only
	}
	if c.domLastWeekday && (day == last || weekday == 5 && day+2 >= last) {
		return true
	}
	if c.domNearest == 0 {
		return false
	}
	// nW fires on day when n is day itself, the Saturday before a Monday
	// or the Sunday after a Friday, or, at the month's edges, the 1st when
	// it is a Saturday (Monday the 3rd) or the last day when it is a
	// Sunday (Friday two days before).
	near := c.domNearest&(1<<day) != 0
	switch weekday {
	case 1:
		near = near || day >= 2 && c.domNearest&(1<<(day-1)) != 0 || day == 3 && c.domNearest&(1<<1) != 0
	case 5:
		near = near || day+1 <= last && c.domNearest&(1<<(day+1)) != 0 || day+2 == last && c.domNearest&(1<<last) != 0
	}
	return near
}

func daysInMonth(year, month int) int {
	if month == 2 && !(year%4 == 0 && (year%100 != 0 || year%400 == 0)) {
		return 28
	}
	return daysIn[month]
}

var daysIn = [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// nextBit returns the smallest set bit >= from in set, or 64.
func nextBit(set uint64, from int) int {
	if from >= 64 {
		return 64
	}
	return from + bits.TrailingZeros64(set>>from)
}

package admin

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/belfry/belfry/registry"
)

// describe puts a cron expression into words for the page ("at 03:17 every
// day, UTC"). It knows the forms schedules mostly use — a time of day or an
// interval, every day, on some weekdays or on one day of the month — and
// reports false for the rest, which the page then shows as the expression
// alone. The zone is named whenever the words mention a wall-clock time or
// a day; a pure interval ("every 5 minutes") runs the same in every zone.
func describe(expr, zone string) (string, bool) {
	expr = strings.TrimSpace(expr)
	if d, ok := strings.CutPrefix(expr, "@every "); ok {
		every, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil || every <= 0 {
			return "", false
		}
		return "every " + durationWords(every), true
	}
	if fields, ok := registry.ExpandDescriptor(expr); ok {
		expr = fields
	}
	f := strings.Fields(expr)
	sec := "0"
	switch len(f) {
	case 6:
		sec, f = f[0], f[1:]
	case 5:
	default:
		return "", false
	}
	minute, hour, dom, month, dow := f[0], f[1], f[2], f[3], f[4]
	when, interval, ok := timeWords(sec, minute, hour)
	if !ok {
		return "", false
	}
	days, ok := dayWords(dom, month, dow)
	if !ok {
		return "", false
	}
	switch {
	case interval && days == "every day":
		return when, true
	case days == "every day" && strings.HasPrefix(when, "every "):
		return when + ", " + zone, true // "every hour at :17", not "... every day"
	}
	return when + " " + days + ", " + zone, true
}

// timeWords describes the second, minute and hour fields; interval says the
// words are a pure interval, which the zone does not change.
func timeWords(sec, minute, hour string) (words string, interval, ok bool) {
	s, sOK := number(sec, 59)
	m, mOK := number(minute, 59)
	switch {
	case sec == "*" && minute == "*" && hour == "*":
		return "every second", true, true
	case strings.HasPrefix(sec, "*/") && minute == "*" && hour == "*":
		n, ok := step(sec, 59)
		return "every " + plural(n, "second", "seconds"), true, ok
	case !sOK:
		return "", false, false
	case strings.Contains(hour, "-") && s == 0:
		return hourRangeWords(minute, hour)
	case minute == "*" && hour == "*" && s == 0:
		return "every minute", true, true
	case strings.HasPrefix(minute, "*/") && hour == "*" && s == 0:
		n, ok := step(minute, 59)
		return "every " + plural(n, "minute", "minutes"), true, ok
	case !mOK:
		return "", false, false
	case hour == "*":
		return "every hour at :" + clockPart(m, s), false, true
	case strings.HasPrefix(hour, "*/"):
		n, ok := step(hour, 23)
		return "every " + plural(n, "hour", "hours") + " at :" + clockPart(m, s), false, ok
	}
	var times []string
	for h := range strings.SplitSeq(hour, ",") {
		n, ok := number(h, 23)
		if !ok {
			return "", false, false
		}
		times = append(times, fmt.Sprintf("%02d:%s", n, clockPart(m, s)))
	}
	return "at " + joinAnd(times), false, true
}

// hourRangeWords describes a minute field within an hour range, as
// business-hours schedules use: "every 15 minutes from 09:00 to 17:45".
func hourRangeWords(minute, hour string) (string, bool, bool) {
	from, to, ok := strings.Cut(hour, "-")
	first, fOK := number(from, 23)
	last, lOK := number(to, 23)
	if !ok || !fOK || !lOK || first >= last {
		return "", false, false
	}
	span := func(what string, m0, m1 int) (string, bool, bool) {
		return fmt.Sprintf("%s from %02d:%02d to %02d:%02d", what, first, m0, last, m1), false, true
	}
	if minute == "*" {
		return span("every minute", 0, 59)
	}
	if n, ok := step(minute, 59); ok && strings.HasPrefix(minute, "*/") {
		return span("every "+plural(n, "minute", "minutes"), 0, 59/n*n)
	}
	if m, ok := number(minute, 59); ok {
		return span(fmt.Sprintf("every hour at :%02d", m), m, m)
	}
	return "", false, false
}

// clockPart is "17" for minute 17, or "17:30" when there are seconds.
func clockPart(m, s int) string {
	if s != 0 {
		return fmt.Sprintf("%02d:%02d", m, s)
	}
	return fmt.Sprintf("%02d", m)
}

var (
	weekdays   = []string{"Sundays", "Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays", "Saturdays"}
	dayAbbrevs = []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}
	monthNames = []string{"January", "February", "March", "April", "May", "June", "July", "August",
		"September", "October", "November", "December"}
	monthAbbrevs = []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}
)

// dayWords describes the day-of-month, month and day-of-week fields.
func dayWords(dom, month, dow string) (string, bool) {
	anyDom, anyDow := dom == "*" || dom == "?", dow == "*" || dow == "?"
	switch {
	case month != "*" && anyDow:
		mo, ok := named(month, monthAbbrevs, 1, 12)
		d, dOK := number(dom, 31)
		// 2024 is a leap year: 29 February is a day some years have.
		if !ok || !dOK || d == 0 || time.Date(2024, time.Month(mo), d, 0, 0, 0, 0, time.UTC).Day() != d {
			return "", false
		}
		return fmt.Sprintf("on %d %s every year", d, monthNames[mo-1]), true
	case month != "*":
		return "", false
	case anyDom && anyDow:
		return "every day", true
	case anyDom:
		return weekdayWords(dow)
	case !anyDow:
		return "", false // either may match: too subtle for a phrase
	case dom == "L":
		return "on the last day of every month", true
	}
	d, ok := number(dom, 31)
	if !ok || d == 0 {
		return "", false
	}
	return "on the " + ordinal(d) + " of every month", true
}

func weekdayWords(dow string) (string, bool) {
	switch strings.ToUpper(dow) {
	case "1-5", "MON-FRI":
		return "on weekdays", true
	case "0,6", "6,0", "6-7", "SAT,SUN", "SUN,SAT", "SAT-SUN":
		return "on weekends", true
	}
	var days []string
	for d := range strings.SplitSeq(dow, ",") {
		n, ok := named(d, dayAbbrevs, 0, 7)
		if !ok {
			return "", false
		}
		days = append(days, weekdays[n%7])
	}
	return "on " + joinAnd(days), true
}

// number parses a plain field value in [0, max].
func number(field string, max int) (int, bool) {
	n, err := strconv.Atoi(field)
	return n, err == nil && n >= 0 && n <= max && !strings.HasPrefix(field, "+")
}

// named parses a number in [lo, hi] or a three-letter name (names[0] is lo).
func named(field string, names []string, lo, hi int) (int, bool) {
	for i, name := range names {
		if strings.EqualFold(field, name) {
			return lo + i, true
		}
	}
	n, ok := number(field, hi)
	return n, ok && n >= lo
}

// step parses "*/N".
func step(field string, max int) (int, bool) {
	n, ok := number(strings.TrimPrefix(field, "*/"), max)
	return n, ok && n > 0
}

func joinAnd(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}

// durationWords says an @every interval: "30 seconds", "2 hours", "1h30m".
func durationWords(d time.Duration) string {
	for _, u := range []struct {
		unit      time.Duration
		one, many string
	}{{time.Hour, "hour", "hours"}, {time.Minute, "minute", "minutes"}, {time.Second, "second", "seconds"}} {
		if d%u.unit == 0 {
			return plural(int(d/u.unit), u.one, u.many)
		}
	}
	return d.String()
}

// plural writes "1 retry" or "2 retries".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

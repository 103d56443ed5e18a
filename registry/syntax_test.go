package registry

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	robfig "github.com/robfig/cron/v3"
)

// The tests in this file pin the syntax of the package doc's table: the
// forms other cron implementations accept, and the mistakes they catch.

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := LoadZone(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// An open "N/step" in day-of-week runs to Saturday whether N is a number
// or a name; only an explicit range reaches Sunday (7).
func TestParseCronDayOfWeekNumberAndNameAgree(t *testing.T) {
	t.Parallel()
	from := mustTime(t, "2026-01-04T12:00:00Z") // a Sunday
	tests := []struct {
		number, name string
		want         []string
	}{
		{"0 0 * * 1/2", "0 0 * * MON/2", []string{"2026-01-05T00:00:00Z", "2026-01-07T00:00:00Z", "2026-01-09T00:00:00Z", "2026-01-12T00:00:00Z"}},
		{"0 0 * * 5/1", "0 0 * * FRI/1", []string{"2026-01-09T00:00:00Z", "2026-01-10T00:00:00Z", "2026-01-16T00:00:00Z", "2026-01-17T00:00:00Z"}},
		{"0 0 * * 4/3", "0 0 * * THU/3", []string{"2026-01-08T00:00:00Z", "2026-01-15T00:00:00Z", "2026-01-22T00:00:00Z", "2026-01-29T00:00:00Z"}},
		{"0 0 * * 1-7/2", "0 0 * * MON-SUN/2", []string{"2026-01-05T00:00:00Z", "2026-01-07T00:00:00Z", "2026-01-09T00:00:00Z", "2026-01-11T00:00:00Z"}},
	}
	for _, tt := range tests {
		for _, expr := range []string{tt.number, tt.name} {
			if got := nextN(MustParseCron(expr, time.UTC), from, len(tt.want)); !slices.Equal(got, tt.want) {
				t.Errorf("%q from %s: got %v, want %v", expr, from.Format(time.RFC3339), got, tt.want)
			}
		}
	}
}

// Ranges may end on Sunday, written 7, SUN or 0 (read as 7, as cronie
// does); every spelling of the same days fires alike.
func TestParseCronSundayEndsRange(t *testing.T) {
	t.Parallel()
	tests := []struct{ expr, same string }{
		{"0 0 * * SAT-SUN", "0 0 * * 0,6"},
		{"0 0 * * MON-SUN", "0 0 * * *"},
		{"0 0 * * FRI-SUN", "0 0 * * 5,6,0"},
		{"0 0 * * Wed-Sun", "0 0 * * 3,4,5,6,0"},
		{"0 0 * * MON-7", "0 0 * * 1-6,0"},
		{"0 0 * * 5-0", "0 0 * * 5-7"},
		{"0 0 * * sat-0", "0 0 * * 6,7"},
		{"0 0 * * SUN-SAT", "0 0 * * *"},
		{"0 0 * * SUN-SUN", "0 0 * * 0"},
	}
	for _, tt := range tests {
		checkSameSchedule(t, tt.expr, tt.same)
	}
}

// Full names are accepted in any case; other spellings are errors that
// name the forms to write, never a false "not supported" nor a Go error.
func TestParseCronNames(t *testing.T) {
	t.Parallel()
	for expr, same := range map[string]string{
		"0 0 * JULY *":           "0 0 * 7 *",
		"0 0 1 DECEMBER *":       "0 0 1 12 *",
		"0 0 * January-march *":  "0 0 * 1-3 *",
		"0 0 * * friday":         "0 0 * * 5",
		"0 0 * * Monday-FRIDAY":  "0 0 * * 1-5",
		"0 0 * * WED-SUN":        "0 0 * * 3-7",
		"0 0 * * sunday#1":       "0 0 * * 0#1",
		"0 0 * JUL,aug,SEP * ":   "0 0 * 7-9 *",
		"0 0 * * THU,saturday/1": "0 0 * * 4,6",
	} {
		checkSameSchedule(t, expr, same)
	}
	tests := []struct {
		expr        string
		offset, len int
		msgHas      []string
	}{
		{"0 0 * * THUR", 8, 4, []string{`unknown day name "THUR"`, "THU or THURSDAY"}},
		{"0 0 * * WEDS", 8, 4, []string{`unknown day name "WEDS"`, "WED or WEDNESDAY"}},
		{"0 0 * * MON-THUR", 8, 8, []string{`unknown day name "THUR"`, "THU or THURSDAY"}},
		{"0 0 * * MON-FRY", 8, 7, []string{`unknown day name "FRY"`, "SUN-SAT"}},
		{"0 0 * JULI *", 6, 4, []string{`unknown month name "JULI"`, "JUL or JULY"}},
		{"0 0 * DECEMBRE *", 6, 8, []string{`unknown month name "DECEMBRE"`, "DEC or DECEMBER"}},
		{"0 0 * JUL-FEB *", 6, 7, []string{"range JUL-FEB runs backwards", "JUL-DEC,JAN-FEB"}},
		{"0 22-2 * * *", 2, 4, []string{"range 22-2 runs backwards", "22-23,0-2"}},
		{"0 0 * * FRI-MON", 8, 7, []string{"FRI-SAT,SUN-MON"}},
	}
	for _, tt := range tests {
		checkExprError(t, tt.expr, tt.offset, tt.len, append(tt.msgHas, "!not supported", "!strconv"))
	}
}

// checkExprError asserts that expr fails at [offset, offset+len) with a
// message containing each of msgHas ("!x": not containing x).
func checkExprError(t *testing.T, expr string, offset, length int, msgHas []string, opts ...CronOption) {
	t.Helper()
	c, err := ParseCron(expr, time.UTC, opts...)
	var ee *ExprError
	if !errors.As(err, &ee) || c != nil {
		t.Errorf("ParseCron(%q) = %v, %v; want an *ExprError", expr, c, err)
		return
	}
	if ee.Offset != offset || ee.Len != length {
		t.Errorf("ParseCron(%q): error at offset %d len %d, want %d len %d: %s", expr, ee.Offset, ee.Len, offset, length, ee.Msg)
	}
	for _, want := range msgHas {
		if not, ok := strings.CutPrefix(want, "!"); ok {
			if strings.Contains(ee.Msg, not) {
				t.Errorf("ParseCron(%q): message %q contains %q", expr, ee.Msg, not)
			}
		} else if !strings.Contains(ee.Msg, want) {
			t.Errorf("ParseCron(%q): message %q does not contain %q", expr, ee.Msg, want)
		}
	}
}

func TestParseCronMistakes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr        string
		offset, len int
		msgHas      []string
	}{
		// A step larger than the field's range matches one value only.
		{"*/70 * * * *", 0, 4, []string{"step 70 is larger than the minute range 0-59", `"@every 70m"`}},
		{"0 */25 * * *", 2, 4, []string{"step 25 is larger than the hour range 0-23", `"@every 25h"`}},
		{"0 0 */40 * *", 4, 4, []string{"step 40 is larger than the day-of-month range 1-31"}},
		{"0 0 * */13 *", 6, 4, []string{"step 13 is larger than the month range 1-12"}},
		{"0 0 * * */8", 8, 3, []string{"step 8 is larger than the day-of-week range 0-6"}},
		{"*/61 * * * * *", 0, 4, []string{"second range 0-59", `"@every 61s"`}},
		// Empty list items.
		{"1,,2 * * * *", 1, 1, []string{`minute field "1,,2": empty list item`}},
		{"1, * * * *", 1, 1, []string{"empty list item"}},
		{",5 * * * *", 0, 1, []string{"empty list item"}},
		{"0 0 * * MON,", 11, 1, []string{"empty list item"}},
		// A pasted crontab line, and a stray sixth field.
		{"0 0 * * * /usr/bin/backup", 10, 15, []string{"looks like a command", `"0 0 * * *"`}},
		{"0 0 * * * /usr/bin/backup --full", 10, 22, []string{"looks like a crontab line", `"0 0 * * *"`}},
		{"0 9 * * 1-5 extra", 12, 5, []string{"trailing extra field", `"0 9 * * 1-5"`}},
		{"0 0 * * MON ./run.sh", 12, 8, []string{"looks like a command"}},
		// Values out of range name the range, day-of-week its 7.
		{"0 0 * * 8", 8, 1, []string{"8 is above the maximum 7", "0-7 (0 and 7 are Sunday)"}},
		{"0 0 0 * *", 4, 1, []string{"0 is below the minimum 1", "days of month are 1-31"}},
		{"-1 * * * *", 0, 2, []string{"a range needs a start"}},
		{"? * * * *", 0, 1, []string{"day-of-month and day-of-week only"}},
		{"5L * * * *", 0, 2, []string{"L and W belong in day-of-month"}},
		{"0 0 * * 5W", 8, 2, []string{"L and W belong in day-of-month"}},
		{"0 0 * * 1-5L", 8, 4, []string{`"1-5" is not a number`, "!unknown day name"}},
		// @every durations.
		{"@every 1d", 7, 2, []string{"no d (day) unit", `"@every 24h"`}},
		{"@every 2w", 7, 2, []string{"no w (week) unit", `"@every 168h"`}},
		// The day extensions' own mistakes.
		{"0 0 * * L", 8, 1, []string{"L alone is ambiguous", "6L"}},
		{"0 0 * * MON#6", 8, 5, []string{`"6" after # must be 1 to 5`}},
		{"0 0 * * MON#0", 8, 5, []string{"must be 1 to 5"}},
		{"0 0 L-31 * *", 4, 4, []string{"L-n needs n from 0 to 30"}},
		{"0 0 32W * *", 4, 3, []string{"32 is above the maximum 31"}},
		{"0 0 LX * *", 4, 2, []string{"want L (last day)"}},
		{"0 0 31W 2 *", 4, 3, []string{"never fires"}},
		{"0 0 L-30 2 *", 4, 4, []string{"never fires"}},
		{"H(5) * * * *", 0, 4, []string{"want H, H/15, H(0-29)"}},
		{"H(30-10) * * * *", 0, 8, []string{"runs backwards"}},
		{"H/0 * * * *", 0, 3, []string{"a step of 0 never advances"}},
		{"H(0-70) * * * *", 0, 7, []string{"70 is above the maximum 59"}},
	}
	for _, tt := range tests {
		checkExprError(t, tt.expr, tt.offset, tt.len, tt.msgHas, WithName("nightly-report"))
	}
}

// Messages name directive keys by default and flags with FlagHints, so
// that crongen next speaks of --tz and --name.
func TestParseCronSettingHints(t *testing.T) {
	t.Parallel()
	checkExprError(t, "CRON_TZ=Europe/Berlin 0 0 * * *", 0, 21, []string{"use the key tz=Europe/Berlin"})
	checkExprError(t, "CRON_TZ=Europe/Berlin 0 0 * * *", 0, 21, []string{"use --tz Europe/Berlin", "!tz="}, FlagHints())
	checkExprError(t, "H 3 * * *", 0, 1, []string{"add the key name=nightly-report"})
	checkExprError(t, "H 3 * * *", 0, 1, []string{"add --name nightly-report", "!name="}, FlagHints())
	checkExprError(t, "17 3 * * *", 0, 10, []string{"only to @every", "the key phase=17m"}, WithPhase(17*time.Minute))
	checkExprError(t, "17 3 * * *", 0, 10, []string{"only to @every", "--phase 17m"}, WithPhase(17*time.Minute), FlagHints())
	checkExprError(t, "@every 1h", 0, 9, []string{"shorter than the period 1h0m0s"}, WithPhase(time.Hour))
	checkExprError(t, "@every 1h", 0, 9, []string{"whole number of seconds"}, WithPhase(1500*time.Millisecond))
	checkExprError(t, "@every 1h", 0, 9, []string{"whole number of seconds, 0 or more"}, WithPhase(-time.Minute))
	_, err := ParseCron("@every 1h", time.UTC, WithPhase(time.Hour))
	if ee := (*ExprError)(nil); !errors.As(err, &ee) || ee.Setting != "phase" {
		t.Errorf("a bad phase: error %#v, want Setting \"phase\"", err)
	}
}

// The vectors of gorhill/cronexpr's tests for L, W and #, in UTC.
func TestNextPeerVectors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr, from string
		want       []string
	}{
		{"0 0 * * 6#5", "2013-09-02T08:44:30Z", []string{"2013-11-30", "2014-03-29", "2014-05-31", "2014-08-30", "2014-11-29"}},
		{"0 0 14W * *", "2013-03-31T00:00:00Z", []string{"2013-04-15"}},
		{"0 0 14W * *", "2013-08-31T00:00:00Z", []string{"2013-09-13"}},
		{"0 0 30W * *", "2013-03-02T00:00:00Z", []string{"2013-03-29"}},
		{"0 0 30W * *", "2013-06-02T00:00:00Z", []string{"2013-06-28"}},
		{"0 0 30W * *", "2013-09-02T00:00:00Z", []string{"2013-09-30"}},
		{"0 0 30W * *", "2013-11-02T00:00:00Z", []string{"2013-11-29"}},
		{"0 0 L * *", "2013-09-02T00:00:00Z", []string{"2013-09-30"}},
		{"0 0 L * *", "2014-01-01T00:00:00Z", []string{"2014-01-31"}},
		{"0 0 L * *", "2014-02-01T00:00:00Z", []string{"2014-02-28"}},
		{"0 0 L * *", "2016-02-15T00:00:00Z", []string{"2016-02-29"}},
		{"0 0 LW * *", "2013-09-02T00:00:00Z", []string{"2013-09-30"}},
		{"0 0 LW * *", "2013-11-02T00:00:00Z", []string{"2013-11-29"}},
		{"0 0 LW * *", "2014-08-15T00:00:00Z", []string{"2014-08-29"}},
		// Beyond cronexpr: the nearest weekday stays in its month, L-n
		// counts back from the last day, nL is the last such weekday.
		{"0 0 1W * *", "2026-07-31T00:00:00Z", []string{"2026-08-03", "2026-09-01", "2026-10-01", "2026-11-02"}},
		{"0 0 31W * *", "2026-01-01T00:00:00Z", []string{"2026-01-30", "2026-03-31", "2026-05-29", "2026-07-31"}},
		{"0 0 L-3 * *", "2026-01-01T00:00:00Z", []string{"2026-01-28", "2026-02-25", "2026-03-28", "2026-04-27"}},
		{"0 0 * * 5L", "2026-01-01T00:00:00Z", []string{"2026-01-30", "2026-02-27", "2026-03-27", "2026-04-24"}},
		{"0 0 * * MON#2", "2026-01-01T00:00:00Z", []string{"2026-01-12", "2026-02-09", "2026-03-09", "2026-04-13"}},
		{"0 0 * * 7#1,SATL", "2026-01-01T00:00:00Z", []string{"2026-01-04", "2026-01-31", "2026-02-01", "2026-02-28"}},
		// Both day fields restricted: either matches (Vixie).
		{"0 0 L * MON#1", "2026-01-01T00:00:00Z", []string{"2026-01-05", "2026-01-31", "2026-02-02", "2026-02-28"}},
		{"0 0 1,L * *", "2026-01-15T00:00:00Z", []string{"2026-01-31", "2026-02-01", "2026-02-28", "2026-03-01"}},
		// A day-of-week extension ANDed with a starred day of month.
		{"0 0 */2 * FRI#1", "2026-01-01T00:00:00Z", []string{"2026-04-03", "2026-05-01", "2026-06-05", "2026-07-03"}},
	}
	for _, tt := range tests {
		c, err := ParseCron(tt.expr, time.UTC)
		if err != nil {
			t.Errorf("ParseCron(%q): %v", tt.expr, err)
			continue
		}
		var got []string
		for at := mustTime(t, tt.from); len(got) < len(tt.want); {
			at = c.Next(at)
			got = append(got, at.Format(time.DateOnly))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%q from %s: got %v, want %v", tt.expr, tt.from, got, tt.want)
		}
	}
}

// The DST rules hold for the new forms as for any other.
func TestNextDSTWithExtensions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr, name, zone, from string
		want                   []string
	}{
		// The second Sunday of March 2026 is New York's spring forward:
		// a fixed time in the gap runs at the first instant after it.
		{"30 2 * 3 SUN#2", "", "America/New_York", "2026-03-01T00:00:00-05:00", []string{"2026-03-08T03:00:00-04:00", "2027-03-14T03:00:00-04:00"}},
		{"30 2 L-23 3 *", "", "America/New_York", "2026-03-01T00:00:00-05:00", []string{"2026-03-08T03:00:00-04:00", "2027-03-08T02:30:00-05:00"}},
		// Its first Sunday of November is the fall back: the earlier only.
		{"30 1 * 11 0#1", "", "America/New_York", "2026-10-01T00:00:00-04:00", []string{"2026-11-01T01:30:00-04:00", "2027-11-07T01:30:00-04:00"}},
		{"30 2 L * *", "", "America/New_York", "2026-02-27T00:00:00-05:00", []string{"2026-02-28T02:30:00-05:00", "2026-03-31T02:30:00-04:00"}},
		// H picks minute 13 and hour 11 for this name (pinned: the hash
		// is part of the schedule's meaning). In London, hour 1 falls in
		// the spring-forward gap on 29 March 2026 and repeats on 25
		// October.
		{"H H * * *", "nightly-report", "UTC", "2026-01-01T00:00:00Z", []string{"2026-01-01T11:13:00Z", "2026-01-02T11:13:00Z"}},
		{"H 1 * * *", "nightly-report", "Europe/London", "2026-03-28T12:00:00Z", []string{"2026-03-29T02:00:00+01:00", "2026-03-30T01:13:00+01:00"}},
		{"H 2 * * *", "nightly-report", "Europe/London", "2026-03-28T12:00:00Z", []string{"2026-03-29T02:13:00+01:00", "2026-03-30T02:13:00+01:00"}},
		{"H 1 * * *", "nightly-report", "Europe/London", "2026-10-24T12:00:00+01:00", []string{"2026-10-25T01:13:00+01:00", "2026-10-26T01:13:00Z"}},
		{"H/15 * * * *", "nightly-report", "UTC", "2026-01-01T00:00:00Z", []string{"2026-01-01T00:13:00Z", "2026-01-01T00:28:00Z", "2026-01-01T00:43:00Z", "2026-01-01T00:58:00Z", "2026-01-01T01:13:00Z"}},
		{"H(0-29) 3 * * *", "nightly-report", "UTC", "2026-01-01T00:00:00Z", []string{"2026-01-01T03:13:00Z"}},
		// A wildcard H/15 schedule has both instants of the repeated hour.
		{"H/30 * * * *", "nightly-report", "America/New_York", "2026-11-01T00:50:00-04:00", []string{"2026-11-01T01:13:00-04:00", "2026-11-01T01:43:00-04:00", "2026-11-01T01:13:00-05:00", "2026-11-01T01:43:00-05:00"}},
	}
	for _, tt := range tests {
		loc := mustZone(t, tt.zone)
		c, err := ParseCron(tt.expr, loc, WithName(tt.name))
		if err != nil {
			t.Errorf("ParseCron(%q): %v", tt.expr, err)
			continue
		}
		if got := nextN(c, mustTime(t, tt.from), len(tt.want)); !slices.Equal(got, tt.want) {
			t.Errorf("%q named %q in %s from %s:\n got %v\nwant %v", tt.expr, tt.name, tt.zone, tt.from, got, tt.want)
		}
	}
}

// H spreads schedules: the same name always gets the same minute, and many
// names get many minutes, within the field's range or the given one.
func TestParseCronHashSpreads(t *testing.T) {
	t.Parallel()
	minutes := map[int]bool{}
	for i := range 200 {
		name := "jobs.task-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		a := MustParseCron("H(10-39) 3 * * *", time.UTC, WithName(name))
		b := MustParseCron("H(10-39) 3 * * *", time.UTC, WithName(name))
		if a.minute != b.minute || bitCount(a.minute) != 1 {
			t.Fatalf("%s: minutes %b and %b, want one and the same", name, a.minute, b.minute)
		}
		m := nextBit(a.minute, 0)
		if m < 10 || m > 39 {
			t.Errorf("%s: H(10-39) picked %d", name, m)
		}
		minutes[m] = true
		if d := MustParseCron("0 0 H * *", time.UTC, WithName(name)); nextBit(d.dom, 0) > 28 {
			t.Errorf("%s: H in day-of-month picked %d, want 1-28 (days every month has)", name, nextBit(d.dom, 0))
		}
	}
	if len(minutes) < 25 {
		t.Errorf("200 names got %d distinct minutes of 30", len(minutes))
	}
}

func bitCount(x uint64) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

func TestParseCronEveryPhase(t *testing.T) {
	t.Parallel()
	ny := mustZone(t, "America/New_York")
	c := MustParseCron("@every 1h", ny, WithPhase(17*time.Minute))
	if c.Phase() != 17*time.Minute {
		t.Errorf("Phase() = %s, want 17m", c.Phase())
	}
	// Across New York's fall back the slots stay an hour apart.
	got := nextN(c, mustTime(t, "2026-11-01T00:30:00-04:00"), 4)
	want := []string{"2026-11-01T01:17:00-04:00", "2026-11-01T01:17:00-05:00", "2026-11-01T02:17:00-05:00", "2026-11-01T03:17:00-05:00"}
	if !slices.Equal(got, want) {
		t.Errorf("@every 1h phase 17m: got %v, want %v", got, want)
	}
	// Before the epoch too, and a zero phase is the plain period.
	if got := MustParseCron("@every 90s", time.UTC, WithPhase(30*time.Second)).Next(time.Unix(-100, 0)); got.Unix() != -60 {
		t.Errorf("@every 90s phase 30s after -100: got %d, want -60", got.Unix())
	}
	if got := MustParseCron("@every 1h", time.UTC, WithPhase(0)).Next(year2026); !got.Equal(year2026.Add(time.Hour)) {
		t.Errorf("@every 1h phase 0: got %s", got)
	}
}

// Samoa skipped 30 December 2011: the clocks jumped 24 hours, a clock
// correction rather than daylight saving time, so (as in cronie) a
// fixed-time schedule does not run for the skipped day.
func TestNextSkipsClockCorrection(t *testing.T) {
	t.Parallel()
	apia := mustZone(t, "Pacific/Apia")
	tests := []struct {
		expr, from string
		want       []string
	}{
		{"0 12 * * *", "2011-12-29T12:00:00-10:00", []string{"2011-12-31T12:00:00+14:00", "2012-01-01T12:00:00+14:00", "2012-01-02T12:00:00+14:00"}},
		{"0 12 30 12 *", "2011-12-01T00:00:00Z", []string{"2012-12-30T12:00:00+14:00"}},
		// Samoa's daylight saving gaps (one hour) keep the DST rule.
		{"30 3 * * *", "2011-09-23T12:00:00-11:00", []string{"2011-09-24T04:00:00-10:00", "2011-09-25T03:30:00-10:00"}},
	}
	for _, tt := range tests {
		if got := nextN(MustParseCron(tt.expr, apia), mustTime(t, tt.from), len(tt.want)); !slices.Equal(got, tt.want) {
			t.Errorf("%q in Pacific/Apia from %s:\n got %v\nwant %v", tt.expr, tt.from, got, tt.want)
		}
	}
}

// The same name and phase reach the schedule from a directive and from a
// Schedule given to New.
func TestScheduleNameAndPhaseReachTheParser(t *testing.T) {
	t.Parallel()
	noop := func(ctx context.Context, occ Occurrence) error { return nil }
	r, err := New(
		Schedule{Name: "nightly-report", Expr: "H H * * *", Handler: noop},
		Schedule{Name: "tick", Expr: "@every 1h", Phase: 17 * time.Minute, Handler: noop},
	)
	if err != nil {
		t.Fatal(err)
	}
	report, _ := r.Lookup("nightly-report")
	if got := report.Next(year2026).Format(time.RFC3339); got != "2026-01-01T11:13:00Z" {
		t.Errorf("nightly-report: Next = %s, want 2026-01-01T11:13:00Z", got)
	}
	tick, _ := r.Lookup("tick")
	if got := tick.Next(year2026).Format(time.RFC3339); got != "2026-01-01T00:17:00Z" {
		t.Errorf("tick: Next = %s, want 2026-01-01T00:17:00Z", got)
	}
	if _, err := New(Schedule{Name: "x", Expr: "0 3 * * *", Phase: time.Minute, Handler: noop}); err == nil || !strings.Contains(err.Error(), "only to @every") {
		t.Errorf("New with a phase on a field expression: %v, want an error", err)
	}
	for line, want := range map[string]string{
		`//cron:schedule "H H * * *" name=nightly-report`: "2026-01-01T11:13:00Z",
		`//cron:schedule "@every 1h" phase=17m`:           "2026-01-01T00:17:00Z",
	} {
		_, c := parseDirectiveLine(t, line)
		d, err := ParseDirective(c)
		if err != nil {
			t.Errorf("%s: %v", line, err)
			continue
		}
		if got := d.Cron.Next(year2026).Format(time.RFC3339); got != want {
			t.Errorf("%s: Next = %s, want %s", line, got, want)
		}
		if s := d.Schedule("ignored"); s.Phase != d.Phase {
			t.Errorf("%s: Schedule().Phase = %s, want %s", line, s.Phase, d.Phase)
		}
	}
}

// TestParseCronMatchesRobfig checks the claim of the package doc that the
// syntax robfig/cron accepts means the same here: on random expressions
// that robfig's parser accepts, the fields match the same values.
func TestParseCronMatchesRobfig(t *testing.T) {
	t.Parallel()
	parser := robfig.NewParser(robfig.Second | robfig.Minute | robfig.Hour | robfig.Dom | robfig.Month | robfig.Dow | robfig.Descriptor)
	g := exprGen{rand.New(rand.NewPCG(*seedFlag, 15))}
	compared := 0
	for range 20000 {
		e := g.expr()
		e.withSeconds = true // robfig's parser here wants the seconds field
		text := e.String()
		sched, err := parser.Parse(text)
		if err != nil {
			continue // L, W, #, H, 7 for Sunday, full names: belfry's own
		}
		c, err := ParseCron(text, time.UTC, WithName(e.name))
		if err != nil {
			if strings.Contains(err.Error(), "never fires") {
				continue // robfig accepts "0 0 0 30 2 *" and then never fires
			}
			t.Errorf("robfig accepts %q, ParseCron: %v", text, err)
			continue
		}
		s := sched.(*robfig.SpecSchedule)
		got := [6]uint64{c.second, c.minute, c.hour, c.dom, c.month, c.dow}
		want := [6]uint64{s.Second, s.Minute, s.Hour, s.Dom, s.Month, s.Dow}
		for i := range got {
			if got[i] != want[i]&^(1<<63) {
				t.Errorf("%q: %s field matches %b, robfig %b", text, fieldSpecs[i].name, got[i], want[i]&^(1<<63))
			}
		}
		// robfig reads only a bare * or ? as unrestricted; belfry, as
		// cronie, any field starting with * ("*/2" too): a documented
		// difference.
		fields := strings.Fields(text)
		if len(fields) != 6 {
			compared++
			continue // a descriptor
		}
		domStar := s.Dom&(1<<63) != 0 || strings.HasPrefix(fields[3], "*/")
		dowStar := s.Dow&(1<<63) != 0 || strings.HasPrefix(fields[5], "*/")
		if c.domStar != domStar || c.dowStar != dowStar {
			t.Errorf("%q: day fields starred %v/%v, robfig %v/%v", text, c.domStar, c.dowStar, domStar, dowStar)
		}
		compared++
	}
	t.Logf("%d random expressions that robfig accepts match the same values", compared)
	if compared < 5000 {
		t.Errorf("compared only %d expressions with robfig", compared)
	}
}

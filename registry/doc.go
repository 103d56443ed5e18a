// Package registry is the dependency-light core that crongen, cronlint, the
// generated code and the runtime share, so that they can never disagree about
// what a schedule means.
//
// It holds the //cron:schedule directive grammar ([ParseDirective]), cron
// expressions and their fire times ([ParseCron], [Cron.Next]), the
// [Schedule] and [Registry] types that generated code builds, and the
// [Occurrence] that a handler receives.
//
// # Syntax
//
// An expression has five fields, or six with a leading seconds field:
//
//	field          values                        names
//	second         0-59 (only with six fields)
//	minute         0-59
//	hour           0-23
//	day of month   1-31
//	month          1-12                          JAN-DEC, January-December
//	day of week    0-7 (0 and 7 are Sunday)      SUN-SAT, Sunday-Saturday
//
// Names are case-insensitive. Each field is a comma-separated list of:
//
//	form        meaning                                             example
//	*           every value (? too, in the two day fields)          * * * * *
//	a           one value                                           17 3 * * *
//	a-b         a range; it cannot wrap (write 22-23,0-2); in       0 0 * * SAT-SUN
//	            day-of-week it may end on Sunday: 7, SUN or 0
//	*/s, a-b/s  every s-th value; s at most the field's size        */15 * * * *
//	a/s         a, a+s, ... to the field's last value: Saturday     0 0 * * MON/2
//	            in day-of-week, whether a is a number or a name
//	L           day of month: the last day                          0 0 L * *
//	L-n         day of month: n days before the last (0-30)         0 0 L-3 * *
//	LW          day of month: the last weekday (Monday-Friday)      0 18 LW * *
//	nW          day of month: the weekday nearest day n, within     0 9 15W * *
//	            the month (1W on a Saturday is Monday the 3rd);
//	            months without day n are skipped
//	dL          day of week: the last weekday d of the month        0 22 * * 5L
//	d#k         day of week: the k-th (1-5) weekday d of the month  0 9 * * MON#2
//	H           a value picked from the schedule's name             H 3 * * *
//	H/s         every s-th value from a start picked from the name  H/15 * * * *
//	H(a-b)[/s]  the same within a-b                                 H(0-29) 3 * * *
//
// Instead of fields: @yearly (or @annually), @monthly, @weekly, @daily (or
// @midnight), @hourly, and "@every d": slots at whole multiples of d since
// the Unix epoch, so every replica computes the same ones, shifted by a
// phase (0 <= phase < d, [WithPhase], the directive key phase=) so that
// hourly jobs need not all start at :00.
//
// When day-of-month or day-of-week starts with '*' or '?', a day must match
// both; otherwise either (Vixie cron), L, W and # included: "0 0 L * FRI"
// fires on the last day of the month and on every Friday, "0 0 ? * FRI#1"
// on the first Friday only.
//
// H (as in Jenkins) spreads schedules that would otherwise pile up on the
// same minute with a one-character edit: the value is derived from the
// schedule's name (FNV-1a, 64-bit, of the name, a NUL byte and the field's
// name, modulo the number of candidate values), so every replica and every
// release picks the same one. A bare H in day-of-month picks from 1-28, days
// that every month has. Without a name ([WithName]) H is an error; a
// directive using H must set name= explicitly, so that renaming its
// function does not move its fire times.
//
// The standard items (numbers, three-letter names, ranges, steps, * and ?)
// are parsed by github.com/robfig/cron/v3's parser. This package checks
// every item before it, so that a mistake is reported with its field, the
// item and the fix, and adds what robfig lacks: L, W, # and H, full names,
// 7 for Sunday and ranges ending on Sunday, which robfig is given in
// numbers it reads alike ("MON-SUN" as "1-6,0", H as the value it picks).
//
// Where this differs from robfig/cron, whose syntax it otherwise
// accepts: 7 is Sunday and ranges may end on Sunday; L, W, #, H and full
// names exist; a step larger than its field (*/70 in minutes) and
// an empty list item (1,,2) are errors, not silently accepted; '?' is for
// the day fields only; a day field starting with '*' ("*/2" too, as in
// cronie) leaves the day to the other field, where robfig treats only a
// bare '*' so; "@every" slots count from the epoch, not from when a
// job was added; zone prefixes (CRON_TZ=) are refused in favour of tz=; and
// fire times follow the rules below, where robfig's Next skips gaps and
// doubles folds. As in robfig there is no year field, no @reboot, and
// day-of-week counts from Sunday = 0 (not Quartz's 1); L alone in
// day-of-week, which Quartz reads as Saturday, is an error.
//
// # Time
//
// Fire times come from this package's own [Cron.Next], which follows the
// cronie-compatible daylight-saving rules, for every form above:
//
//	wall time                    fixed-time schedule            wildcard schedule
//	exists once                  that instant                   that instant
//	exists twice (fall back)     the earlier instant only       both instants
//	does not exist (spring fwd)  the first instant after gap    nothing
//
// A schedule is wildcard when its minute or hour field starts with '*'
// (@hourly and @every too); otherwise, H forms included, it is fixed-time.
//
// A forward jump of 3 hours or more is not daylight saving time but a
// correction of the clock (Samoa skipped 30 December 2011 whole): as in
// cronie, no schedule runs for the wall times it skips, so a daily noon job
// runs on 29 and 31 December, not a second time at midnight of the 31st.
//
// The package imports time/tzdata so that a zone named in a directive
// resolves even on hosts without a zoneinfo database (scratch images); the
// host's database still wins where it exists.
package registry

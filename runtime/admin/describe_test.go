package admin

import "testing"

func TestDescribe(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		expr, zone, want string
	}{
		{"17 3 * * *", "UTC", "at 03:17 every day, UTC"},
		{"0 0 * * *", "UTC", "at 00:00 every day, UTC"},
		{"@daily", "Europe/London", "at 00:00 every day, Europe/London"},
		{"@midnight", "UTC", "at 00:00 every day, UTC"},
		{"30 9,17 * * *", "UTC", "at 09:30 and 17:30 every day, UTC"},
		{"0 6,12,18 * * *", "UTC", "at 06:00, 12:00 and 18:00 every day, UTC"},
		{"0 9 * * 1-5", "Europe/London", "at 09:00 on weekdays, Europe/London"},
		{"0 9 * * MON-FRI", "UTC", "at 09:00 on weekdays, UTC"},
		{"0 10 * * SAT,SUN", "UTC", "at 10:00 on weekends, UTC"},
		{"0 2 * * 0", "UTC", "at 02:00 on Sundays, UTC"},
		{"0 2 * * 7", "UTC", "at 02:00 on Sundays, UTC"},
		{"0 2 * * mon", "UTC", "at 02:00 on Mondays, UTC"},
		{"0 2 * * 1,3,5", "UTC", "at 02:00 on Mondays, Wednesdays and Fridays, UTC"},
		{"@weekly", "UTC", "at 00:00 on Sundays, UTC"},
		{"0 4 1 * *", "UTC", "at 04:00 on the 1st of every month, UTC"},
		{"0 4 2 * *", "UTC", "at 04:00 on the 2nd of every month, UTC"},
		{"0 4 3 * *", "UTC", "at 04:00 on the 3rd of every month, UTC"},
		{"0 4 11 * *", "UTC", "at 04:00 on the 11th of every month, UTC"},
		{"0 4 22 * ?", "UTC", "at 04:00 on the 22nd of every month, UTC"},
		{"@monthly", "UTC", "at 00:00 on the 1st of every month, UTC"},
		{"0 23 L * *", "UTC", "at 23:00 on the last day of every month, UTC"},
		{"@yearly", "UTC", "at 00:00 on 1 January every year, UTC"},
		{"0 12 25 DEC *", "UTC", "at 12:00 on 25 December every year, UTC"},
		{"17 * * * *", "UTC", "every hour at :17, UTC"},
		{"@hourly", "Asia/Kolkata", "every hour at :00, Asia/Kolkata"},
		{"5 */2 * * *", "UTC", "every 2 hours at :05, UTC"},
		{"* * * * *", "UTC", "every minute"},
		{"*/5 * * * *", "Europe/London", "every 5 minutes"},
		{"*/1 * * * *", "UTC", "every 1 minute"},
		{"*/15 * * * 1-5", "UTC", "every 15 minutes on weekdays, UTC"},
		{"0 9-17 * * 1-5", "Europe/London", "every hour at :00 from 09:00 to 17:00 on weekdays, Europe/London"},
		{"30 8-18 * * *", "UTC", "every hour at :30 from 08:30 to 18:30, UTC"},
		{"*/15 9-17 * * *", "UTC", "every 15 minutes from 09:00 to 17:45, UTC"},
		{"*/7 9-10 * * *", "UTC", "every 7 minutes from 09:00 to 10:56, UTC"},
		{"* 22-23 * * *", "UTC", "every minute from 22:00 to 23:59, UTC"},
		{"* * * * * *", "UTC", "every second"},
		{"*/10 * * * * *", "UTC", "every 10 seconds"},
		{"30 17 3 * * *", "UTC", "at 03:17:30 every day, UTC"},
		{"0 17 3 * * *", "UTC", "at 03:17 every day, UTC"},
		{"@every 30s", "UTC", "every 30 seconds"},
		{"@every 1h", "UTC", "every 1 hour"},
		{"@every 2m", "UTC", "every 2 minutes"},
		{"@every 90m", "UTC", "every 90 minutes"},
		{"@every 1500ms", "UTC", "every 1.5s"},
	} {
		got, ok := describe(tt.expr, tt.zone)
		if !ok || got != tt.want {
			t.Errorf("describe(%q, %q) = %q, %v; want %q", tt.expr, tt.zone, got, ok, tt.want)
		}
	}
}

// Forms without a short phrase are left to the expression itself.
func TestDescribeFallsBack(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{
		"",
		"0 0 1 * MON",     // day-of-month or day-of-week: easy to misread in words
		"0 0 * 1-6 *",     // a month range
		"H 3 * * *",       // hashed minute
		"0 0 L-2 * *",     // Quartz day-of-month forms
		"0 0 * * 5L",      // last Friday
		"0 0 * * MON#2",   // second Monday
		"0-30 * * * *",    // a minute range
		"0 5-1 * * *",     // a reversed hour range
		"0-30 9-17 * * *", // a minute range within hours
		"0 9-17/2 * * *",  // a stepped hour range
		"10/5 * * * *",    // an offset step
		"1,2 * * * *",     // a minute list
		"0 0 31 2 *",      // not a real day; registry rejects it anyway
		"0 25 * * *",      // out of range
		"@every nonsense",
		"1 2 3 4 5 6 7",
	} {
		if got, ok := describe(expr, "UTC"); ok {
			t.Errorf("describe(%q) = %q, want no description", expr, got)
		}
	}
}

func TestPlural(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		n    int
		want string
	}{{0, "0 retries"}, {1, "1 retry"}, {2, "2 retries"}} {
		if got := plural(tt.n, "retry", "retries"); got != tt.want {
			t.Errorf("plural(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

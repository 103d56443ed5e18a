package registry_test

import (
	"fmt"
	"time"

	"github.com/belfry/belfry/registry"
)

func printNext(c *registry.Cron, from string, n int) {
	at, err := time.Parse(time.RFC3339, from)
	if err != nil {
		panic(err)
	}
	for range n {
		at = c.Next(at)
		fmt.Println(at.Format("Mon 2006-01-02 15:04 MST"))
	}
}

// L is the last day of the month, LW its last weekday.
func ExampleParseCron_lastDay() {
	lastDay := registry.MustParseCron("0 0 L * *", time.UTC)
	printNext(lastDay, "2028-01-15T00:00:00Z", 3)
	lastWeekday := registry.MustParseCron("0 18 LW * *", time.UTC)
	printNext(lastWeekday, "2026-05-01T00:00:00Z", 2)
	// Output:
	// Mon 2028-01-31 00:00 UTC
	// Tue 2028-02-29 00:00 UTC
	// Fri 2028-03-31 00:00 UTC
	// Fri 2026-05-29 18:00 UTC
	// Tue 2026-06-30 18:00 UTC
}

// MON#2 is the second Monday of the month, 5L its last Friday.
func ExampleParseCron_nthWeekday() {
	printNext(registry.MustParseCron("0 9 * * MON#2", time.UTC), "2026-01-01T00:00:00Z", 2)
	printNext(registry.MustParseCron("0 22 * * 5L", time.UTC), "2026-01-01T00:00:00Z", 2)
	// Output:
	// Mon 2026-01-12 09:00 UTC
	// Mon 2026-02-09 09:00 UTC
	// Fri 2026-01-30 22:00 UTC
	// Fri 2026-02-27 22:00 UTC
}

// H takes its value from the schedule's name, so schedules spread out
// while every replica computes the same times.
func ExampleParseCron_hash() {
	for _, name := range []string{"nightly-report", "jobs.prune-soft-deleted"} {
		c := registry.MustParseCron("H 3 * * *", time.UTC, registry.WithName(name))
		fmt.Print(name, ": ")
		printNext(c, "2026-01-01T00:00:00Z", 1)
	}
	_, err := registry.ParseCron("H 3 * * *", time.UTC)
	fmt.Println(err != nil)
	// Output:
	// nightly-report: Thu 2026-01-01 03:13 UTC
	// jobs.prune-soft-deleted: Thu 2026-01-01 03:38 UTC
	// true
}

// A phase moves @every slots off the top of the hour.
func ExampleParseCron_everyPhase() {
	c := registry.MustParseCron("@every 1h", time.UTC, registry.WithPhase(17*time.Minute))
	printNext(c, "2026-01-01T00:00:00Z", 2)
	// Output:
	// Thu 2026-01-01 00:17 UTC
	// Thu 2026-01-01 01:17 UTC
}

// A day-of-week range may end on Sunday; an open step ends on Saturday.
func ExampleParseCron_sundayRange() {
	printNext(registry.MustParseCron("0 10 * * SAT-SUN", time.UTC), "2026-01-01T00:00:00Z", 2)
	printNext(registry.MustParseCron("0 10 * * FRI/1", time.UTC), "2026-01-03T12:00:00Z", 2)
	// Output:
	// Sat 2026-01-03 10:00 UTC
	// Sun 2026-01-04 10:00 UTC
	// Fri 2026-01-09 10:00 UTC
	// Sat 2026-01-10 10:00 UTC
}

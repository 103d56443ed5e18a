package registry

import (
	"strings"
	"testing"
	"time"

	robfig "github.com/robfig/cron/v3"
)

// benchExprs are typical schedules; the last has a seconds field.
var benchExprs = []string{"17 3 * * *", "*/5 * * * *", "0 9 * * MON-FRI", "0 0 1 * *", "*/10 * * * * *"}

// benchExtExprs use the forms robfig cannot parse (L, W, #, H, a phase), so
// they have no yardstick; they must be as cheap as the rest.
var benchExtExprs = []string{"0 0 L * *", "0 18 LW * *", "30 2 15W * *", "0 9 * * MON#2", "0 22 * * 5L", "H H * * *", "H/15 * * * *", "@every 1h"}

var benchZones = []string{"UTC", "America/New_York"}

// nearTransitionExprs fire every few seconds or minutes: within an hour of
// a DST transition every call of Next has a transition to resolve.
var nearTransitionExprs = []string{"* * * * * *", "*/7 * * * * *", "*/5 * * * *", "30 1 * * *"}

// nearTransition names the benchmark cases whose start instants lie within
// an hour of New York's transitions.
const nearTransition = "America/New_York±1h"

// benchCase is one expression in one zone with its start instants.
type benchCase struct {
	name  string
	expr  string
	loc   *time.Location
	froms []time.Time
}

// benchCases lists the cases of exprs in benchZones, and of
// nearTransitionExprs near New York's transitions. BenchmarkNext and
// BenchmarkRobfigNext name them alike, so make bench pairs them.
func benchCases(b *testing.B, exprs []string) []benchCase {
	b.Helper()
	var cases []benchCase
	for _, expr := range exprs {
		for _, zone := range benchZones {
			loc, err := LoadZone(zone)
			if err != nil {
				b.Fatal(err)
			}
			cases = append(cases, benchCase{benchName(expr, zone), expr, loc, benchFroms(b, loc)})
		}
	}
	ny, err := LoadZone("America/New_York")
	if err != nil {
		b.Fatal(err)
	}
	for _, expr := range nearTransitionExprs {
		cases = append(cases, benchCase{benchName(expr, nearTransition), expr, ny, nearTransitionFroms(b, ny)})
	}
	return cases
}

// benchFroms spreads start instants over 2026 at an interval prime to the
// hour, so the benchmark averages over times of day, weekdays and both DST
// transitions instead of timing one lucky instant.
func benchFroms(b *testing.B, loc *time.Location) []time.Time {
	b.Helper()
	froms := make([]time.Time, 1024)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range froms {
		froms[i] = at.Add(time.Duration(i) * 30803 * time.Second).In(loc)
	}
	return froms
}

// nearTransitionFroms spreads start instants over the two hours around
// each of the zone's 2026 transitions, at a step prime to the minute.
func nearTransitionFroms(b *testing.B, loc *time.Location) []time.Time {
	b.Helper()
	var froms []time.Time
	for _, tr := range Transitions(loc, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
		for at := tr.At.Add(-time.Hour); at.Before(tr.At.Add(time.Hour)); at = at.Add(7 * time.Second) {
			froms = append(froms, at.In(loc))
		}
	}
	if len(froms) == 0 {
		b.Fatalf("%s has no transitions in 2026", loc)
	}
	return froms
}

func benchName(expr, zone string) string {
	return strings.ReplaceAll(expr, "/", "÷") + "/" + zone
}

var benchSink time.Time

// benchPhase gives the @every benchmark a phase, so that it is measured.
func benchPhase(expr string) time.Duration {
	if strings.HasPrefix(expr, "@every") {
		return 17 * time.Minute
	}
	return 0
}

func BenchmarkNext(b *testing.B) {
	for _, bc := range benchCases(b, append(benchExprs[:len(benchExprs):len(benchExprs)], benchExtExprs...)) {
		b.Run(bc.name, func(b *testing.B) {
			c := MustParseCron(bc.expr, bc.loc, WithName("jobs.nightly-report"), WithPhase(benchPhase(bc.expr)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				benchSink = c.Next(bc.froms[i%len(bc.froms)])
			}
		})
	}
}

// BenchmarkRobfigNext is the yardstick for BenchmarkNext: robfig's own Next
// on the same expressions and instants (it gets DST wrong, but its cost is
// what a user would compare with). robfig evaluates in the argument's zone.
func BenchmarkRobfigNext(b *testing.B) {
	for _, bc := range benchCases(b, benchExprs) {
		b.Run(bc.name, func(b *testing.B) {
			s := parseRobfig(b, bc.expr)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				benchSink = s.Next(bc.froms[i%len(bc.froms)])
			}
		})
	}
}

// parseRobfig parses expr with robfig's parser, five fields or six.
func parseRobfig(b *testing.B, expr string) robfig.Schedule {
	b.Helper()
	parse := robfig.ParseStandard
	if len(strings.Fields(expr)) == 6 {
		parse = robfig.NewParser(robfig.Second | robfig.Minute | robfig.Hour | robfig.Dom | robfig.Month | robfig.Dow).Parse
	}
	s, err := parse(expr)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkParseCron times ParseCron on the typical and the extension
// forms. Parsing happens once per schedule at start-up, so it may allocate;
// this keeps its cost in view.
func BenchmarkParseCron(b *testing.B) {
	for _, expr := range append(benchExprs[:len(benchExprs):len(benchExprs)], benchExtExprs...) {
		b.Run(expr, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseCron(expr, time.UTC, WithName("jobs.nightly-report"), WithPhase(benchPhase(expr))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLoadZoneUnknown is the error path a family pays for each member
// stored with a zone this build cannot load: the suggestion is worked out
// once per name.
func BenchmarkLoadZoneUnknown(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadZone("Europe/Londn"); err == nil {
			b.Fatal("Europe/Londn loaded")
		}
	}
}

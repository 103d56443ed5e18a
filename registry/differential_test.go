package registry

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var (
	longFlag = flag.Bool("long", false, "run the differential test of Cron.Next with many more expressions and instants")
	seedFlag = flag.Uint64("seed", 1, "seed of the differential test's random expressions and instants")
)

// differentialZones are chosen for their transitions: 30-minute shifts
// (Lord_Howe), midnight gaps (Santiago, Beirut, Havana), a skipped day
// (Apia 2011), Ramadan suspensions (Casablanca), negative DST (Dublin), a
// two-hour shift (Troll), odd offsets (St_Johns, Kathmandu, Tehran).
var differentialZones = []string{
	"America/New_York", "Europe/London", "Australia/Lord_Howe", "America/Santiago",
	"Asia/Beirut", "America/Havana", "Pacific/Apia", "Asia/Tehran", "Africa/Casablanca",
	"Europe/Dublin", "Antarctica/Troll", "America/St_Johns", "Asia/Kathmandu", "UTC",
}

// Test instants lie in these years: the later ones are past the explicit
// transitions of most zones, where Go computes zone periods from the TZ
// footer rule.
const (
	differentialFirstYear = 2005
	differentialLastYear  = 2046
)

type differentialConfig struct {
	exprsPerZone, fromsPerExpr, k int
}

// TestNextDifferential compares Cron.Next with the brute-force oracle on
// random expressions, zones and instants near DST transitions. Reproduce a
// failure with -seed; search harder with -long.
func TestNextDifferential(t *testing.T) {
	cfg := differentialConfig{exprsPerZone: 100, fromsPerExpr: 4, k: 5}
	if *longFlag {
		cfg = differentialConfig{exprsPerZone: 3000, fromsPerExpr: 12, k: 8}
	}
	t.Logf("seed %d (rerun with -seed=%d; -long for a longer search)", *seedFlag, *seedFlag)
	var exprs, froms, fires, rejected atomic.Int64
	t.Run("zones", func(t *testing.T) {
		for zi, name := range differentialZones {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				loc, err := LoadZone(name)
				if err != nil {
					t.Fatal(err)
				}
				d := &differential{
					t: t, loc: loc, zone: newZoneFacts(t, loc), cfg: cfg,
					r: rand.New(rand.NewPCG(*seedFlag, uint64(zi))),
				}
				for range cfg.exprsPerZone {
					d.runExpr()
					if d.failures >= 5 {
						t.Fatal("too many failures; stopping this zone")
					}
				}
				exprs.Add(d.exprs)
				froms.Add(d.froms)
				fires.Add(d.fires)
				rejected.Add(d.rejected)
			})
		}
	})
	t.Logf("compared %d random expressions per zone x %d zones (%d expression-zone pairs parsed), %d from-instants, %d fire times; %d never-firing expressions rejected as expected",
		cfg.exprsPerZone, len(differentialZones), exprs.Load(), froms.Load(), fires.Load(), rejected.Load())
	if !t.Failed() && fires.Load() == 0 {
		t.Fatal("no fire time was compared")
	}
}

type differential struct {
	t    *testing.T
	r    *rand.Rand
	loc  *time.Location
	zone *zoneFacts
	cfg  differentialConfig

	exprs, froms, fires, rejected, failures int64
}

func (d *differential) runExpr() {
	g := exprGen{d.r}
	var (
		e            *oracleExpr
		text         string
		every, phase int64
	)
	if g.pct(6) {
		every = []int64{1, 7, 60, 90, 900, 3600, 5400, 86400, 90000, 7 * 86400}[d.r.IntN(10)]
		text = "@every " + (time.Duration(every) * time.Second).String()
		e = &oracleExpr{}
		if g.pct(50) {
			phase = d.r.Int64N(every)
		}
	} else {
		e = g.expr()
		text = e.String()
	}
	o := compileOracle(e, d.loc, d.zone)
	o.every, o.phase = every, phase
	c, err := ParseCron(text, d.loc, WithName(e.name), WithPhase(time.Duration(phase)*time.Second))
	switch {
	case err != nil && every == 0 && o.neverFires() && strings.Contains(err.Error(), "never fires"):
		d.rejected++
		return
	case err != nil:
		d.failf("ParseCron(%q) named %q: %v", text, e.name, err)
		return
	case every == 0 && o.neverFires():
		d.failf("ParseCron(%q) accepted an expression that never fires", text)
		return
	case c.Wildcard() != (o.wildcard || every > 0):
		d.failf("%q: Wildcard() = %v, want %v", text, c.Wildcard(), o.wildcard || every > 0)
	}
	d.exprs++
	for range d.cfg.fromsPerExpr {
		d.compare(c, o, d.from())
	}
}

// from picks a test instant, mostly close to one of the zone's transitions.
func (d *differential) from() time.Time {
	lo := time.Date(differentialFirstYear, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	hi := time.Date(differentialLastYear, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	var inRange []int64
	for _, tr := range d.zone.transitions {
		if lo <= tr && tr < hi {
			inRange = append(inRange, tr)
		}
	}
	var at int64
	switch k := d.r.IntN(100); {
	case k < 75 && len(inRange) > 0:
		at = inRange[d.r.IntN(len(inRange))]
		switch d.r.IntN(3) {
		case 0:
			at += d.r.Int64N(4*86400) - 2*86400
		case 1:
			at += d.r.Int64N(6*3600) - 3*3600
		default:
			at += []int64{-3601, -3600, -1800, -61, -60, -1, 0, 1, 59, 60, 1799, 1800, 3600}[d.r.IntN(13)]
		}
	case k < 82:
		// The last days of a leap year, where Go's zone bounds are odd
		// (golang/go#81583).
		y := []int{2008, 2024, 2036, 2040, 2044}[d.r.IntN(5)]
		at = time.Date(y, 12, 30, 0, 0, 0, 0, time.UTC).Unix() + d.r.Int64N(3*86400)
	default:
		at = lo + d.r.Int64N(hi-lo)
	}
	if d.r.IntN(4) == 0 {
		return time.Unix(at, d.r.Int64N(1e9)).In(d.loc)
	}
	return time.Unix(at, 0).In(d.loc)
}

func (d *differential) compare(c *Cron, o *compiledOracle, from time.Time) {
	d.froms++
	want := o.next(from, d.cfg.k)
	// The oracle looks oracleHorizon ahead; Next's horizon is longer.
	complete := from.Add(oracleHorizon - 2*24*time.Hour)
	prev := from
	var got []int64
	for range d.cfg.k {
		r := c.Next(prev)
		if r.IsZero() {
			break
		}
		switch {
		case !r.After(prev):
			d.failf("%q in %s: Next(%s) = %s, not after its argument", c.Expr(), d.zone.name, fmtInstant(prev), fmtInstant(r))
			return
		case r.Location() != d.loc:
			d.failf("%q in %s: Next(%s) = %s is in %s", c.Expr(), d.zone.name, fmtInstant(prev), fmtInstant(r), r.Location())
		case r.Nanosecond() != 0:
			d.failf("%q in %s: Next(%s) = %s is not on a whole second", c.Expr(), d.zone.name, fmtInstant(prev), fmtInstant(r))
		case !o.explains(r.Unix()):
			d.failf("%q in %s: Next(%s) = %s does not match the expression", c.Expr(), d.zone.name, fmtInstant(prev), fmtInstant(r))
		}
		if len(got) == len(want) {
			if !r.After(complete) {
				got = append(got, r.Unix()) // reported below as unexpected
			}
			break
		}
		got = append(got, r.Unix())
		prev = r
	}
	d.fires += int64(len(got))
	if !slices.Equal(got, want) {
		d.failf("%q in %s from %s (unix %d):\n  Next   %s\n  oracle %s", c.Expr(), d.zone.name,
			fmtInstant(from), from.Unix(), fmtInstants(got, d.loc), fmtInstants(want, d.loc))
	}
}

func (d *differential) failf(format string, args ...any) {
	d.t.Helper()
	d.failures++
	d.t.Errorf("seed %d: "+format, append([]any{*seedFlag}, args...)...)
}

func fmtInstant(t time.Time) string { return t.Format(time.RFC3339Nano) }

func fmtInstants(is []int64, loc *time.Location) string {
	var s []string
	for _, i := range is {
		s = append(s, time.Unix(i, 0).In(loc).Format(time.RFC3339))
	}
	return fmt.Sprint(s)
}

// TestNextLeapYearEndPastExplicitTransitions pins the hang found by the
// differential test: Go reports a zone period ending before the instant on
// 31 December of leap years served by a TZ footer rule (golang/go#81583).
func TestNextLeapYearEndPastExplicitTransitions(t *testing.T) {
	t.Parallel()
	for _, zone := range []string{"America/New_York", "Europe/London", "Australia/Lord_Howe"} {
		loc, err := LoadZone(zone)
		if err != nil {
			t.Fatal(err)
		}
		c := MustParseCron("0 0 * * *", loc)
		from := time.Date(2040, 12, 29, 12, 0, 0, 0, loc)
		done := make(chan []string, 1)
		go func() {
			var got []string
			for at := from; len(got) < 4; {
				at = c.Next(at)
				got = append(got, at.Format(time.DateOnly))
			}
			done <- got
		}()
		select {
		case got := <-done:
			want := []string{"2040-12-30", "2040-12-31", "2041-01-01", "2041-01-02"}
			if !slices.Equal(got, want) {
				t.Errorf("%s: got %v, want %v", zone, got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Next from %s did not return within 10s", zone, from)
		}
	}
}

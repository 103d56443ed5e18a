package registry

import (
	"errors"
	"go/ast"
	"go/token"
	"testing"
	"time"
)

var fuzzExprs = []string{
	"17 3 * * *", "*/5 * * * *", "0 9 * * MON-FRI", "0 0 1 * *", "*/10 * * * * *",
	"0 0 29 2 *", "0 0 30 2 *", "0 12 * * 7", "0 0 * * 5-7", "0 0 * * 7/2",
	"0,30 2 * * *", "30 1 1-7 3,11 SUN", "0 0 */2 * MON", "@daily", "@hourly", "@every 90s",
	"@every 1h30m", "@every 500ms", "@every", "@weekly ", "  @yearly", "@reboot",
	"CRON_TZ=Europe/Berlin 0 0 * * *", "TZ=UTC", "0 0 L * *", "0 0 15W * *", "H 0 * * *",
	"0 0 * * 5#3", "", " ", "\t", "* * * *", "* * * * * * *", "60 * * * *", "0 24 * * *",
	"0 0 0 * *", "0 0 * 13 *", "0 0 * * 8", "1-2-3 * * * *", "1/2/3 * * * *", "*/0 * * * *",
	"0 0 * * 7/99999999999999999999", "0 0 * * 7/9223372036854775807", "5/0 * * * *",
	"? ? ? ? ?", "0 0 ? * ?", "jan * * * *", "0 0 * JAN-DEC/3 *", "0 0 31 4,6,9,11 *",
	// The day extensions, H, Sunday ranges, names, and the mistakes
	// around them.
	"0 0 L * *", "0 0 L-3 * *", "0 0 LW * *", "0 0 1W,15W,31W * *", "0 0 * * 5L", "0 0 * * MON#2",
	"0 0 L * MON#1", "30 2 L-23 3 *", "0 0 * * 7#1,SATL", "0 0 * * L", "0 0 L-31 * *", "0 0 * * 1#6",
	"H 3 * * *", "H/15 * * * *", "H(0-29) 3 * * *", "H(0-29)/10 H(MON-FRI) * * *", "0 0 H * H", "H(5) * * * *",
	"0 0 * * SAT-SUN", "0 0 * * MON-7", "0 0 * * FRI-0", "0 0 * * 1/2", "0 0 * * MON/2", "0 0 * JUL-FEB *",
	"0 0 * * THUR", "0 0 * * friday", "0 0 1 December *", "*/70 * * * *", "1,,2 * * * *", ",5 * * * *",
	"0 0 * * * /usr/bin/backup", "0 9 * * 1-5 extra", "@every 1d", "-1 * * * *", "0 0 31W 2 *",
}

func FuzzParseCron(f *testing.F) {
	for _, e := range fuzzExprs {
		f.Add(e)
	}
	loc, err := LoadZone("America/New_York")
	if err != nil {
		f.Fatal(err)
	}
	froms := []time.Time{
		time.Date(2026, 3, 8, 1, 59, 59, 0, loc),
		time.Date(2026, 11, 1, 0, 30, 0, 500, loc),
		time.Date(2040, 12, 30, 23, 0, 0, 0, time.UTC),
		time.Unix(0, 0),
	}
	f.Fuzz(func(t *testing.T, expr string) {
		for _, zone := range []*time.Location{time.UTC, loc} {
			// A name, so that H forms parse; a phase for @every ones.
			c, err := ParseCron(expr, zone, WithName("jobs.fuzz"))
			if err == nil && c.Every() > 7*time.Second {
				c, err = ParseCron(expr, zone, WithName("jobs.fuzz"), WithPhase(7*time.Second))
			}
			if err != nil {
				var ee *ExprError
				if !errors.As(err, &ee) {
					t.Fatalf("ParseCron(%q): error %v is %T, want *ExprError", expr, err, err)
				}
				if ee.Offset < 0 || ee.Len < 0 || ee.Offset > len(expr) || ee.Offset+ee.Len > len(expr) {
					t.Fatalf("ParseCron(%q): error at [%d, +%d) outside the expression: %v", expr, ee.Offset, ee.Len, ee)
				}
				if c != nil {
					t.Fatalf("ParseCron(%q) returned %v with error %v", expr, c, err)
				}
				continue
			}
			for _, from := range froms {
				at := from
				for range 3 {
					next := c.Next(at)
					if next.IsZero() {
						break
					}
					if !next.After(at) {
						t.Fatalf("ParseCron(%q) in %s: Next(%s) = %s, not after its argument", expr, zone, at, next)
					}
					at = next
				}
			}
		}
	})
}

var fuzzDirectives = []string{
	DirectiveExample,
	`//cron:schedule "17 3 * * *"`,
	"//cron:schedule `*/5 * * * *` name=tick tz=America/New_York queue=q timeout=1m retry=0 grace=30s overlap=skip misfire=latest payload=cfg",
	`//cron:schedule "17 3 * * *" color=red`,
	`//cron:schedule "17 3 * * *" tz=UTC tz=UTC`,
	`//cron:schedule "17 3 * * *" queue=`,
	`//cron:schedule "17 3 * * *" tz=Mars/Olympus`,
	`//cron:schedule "17 3 * * *" timeout=soon retry=-1 overlap=never`,
	`//cron:schedule tz=UTC "17 3 * * *"`,
	`//cron:schedule "17 3 * * *" "0 4 * * *"`,
	`//cron:schedule "17 3 * * *`,
	`//cron:schedule "CRON_TZ=Europe/Berlin 17 3 * * *"`,
	`//cron:schedule "17\x203 * * 8"`,
	`//cron:schedule "\u00e9 * * * *"`,
	`//cron:schedule "0 0 30 2 *"`,
	`//cron:schedule "@every 15m" =x`,
	`//cron:schedule`,
	`//cron:`,
	`//cron:foo "x"`,
	`// cron:schedule "17 3 * * *"`,
	"//cron:schedule \"17 3 * * *\"\u00a0tz=UTC",
	`//cron:schedule "H H * * *" name=nightly-report tz=Europe/London`,
	`//cron:schedule "H 3 * * *"`,
	`//cron:schedule "@every 1h" phase=17m`,
	`//cron:schedule "@every 1h" phase=1h`,
	`//cron:schedule "17 3 * * *" phase=17m`,
	`//cron:schedule "0 0 LW * MON#1" tz=America/New_York`,
}

func FuzzParseDirective(f *testing.F) {
	for _, d := range fuzzDirectives {
		f.Add(d)
	}
	const slash = token.Pos(1000)
	f.Fuzz(func(t *testing.T, text string) {
		d, err := ParseDirective(&ast.Comment{Slash: slash, Text: text})
		if err == nil {
			if d != nil && d.Cron == nil {
				t.Fatalf("ParseDirective(%q) has no Cron", text)
			}
			return
		}
		if d != nil {
			t.Fatalf("ParseDirective(%q) returned %+v with error %v", text, d, err)
		}
		var pe *PosError
		if !errors.As(err, &pe) {
			t.Fatalf("ParseDirective(%q): error %v is %T, want *PosError", text, err, err)
		}
		var all PosErrors
		if !errors.As(err, &all) || len(all) == 0 || all[0] != pe {
			t.Fatalf("ParseDirective(%q): error %v is not a PosErrors starting with %v", text, err, pe)
		}
		end := slash + token.Pos(len(text))
		for i, pe := range all {
			if pe.Pos < slash || pe.End > end || pe.Pos > pe.End {
				t.Fatalf("ParseDirective(%q): error at [%d, %d) outside the comment [%d, %d]: %v",
					text, pe.Pos, pe.End, slash, end, pe)
			}
			if i > 0 && pe.Pos < all[i-1].Pos {
				t.Fatalf("ParseDirective(%q): errors out of position order: %v", text, err)
			}
		}
	})
}

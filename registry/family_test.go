package registry

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestFamilyDirective(t *testing.T) {
	t.Parallel()
	_, c := parseDirectiveLine(t, `//cron:schedule "0 9 * * MON" name=weekly-report per=tenant tz=Europe/Paris`)
	d, err := ParseDirective(c)
	if err != nil {
		t.Fatal(err)
	}
	s := d.Schedule("x")
	if s.Per != "tenant" || !s.Family() || s.Zone != "Europe/Paris" {
		t.Errorf("schedule %+v, want a family per tenant defaulting to Europe/Paris", s)
	}
}

func newFamily(t *testing.T) *Schedule {
	t.Helper()
	reg, err := New(Schedule{Name: "weekly-report", Expr: "0 9 * * MON", Zone: "UTC", Per: "tenant",
		Handler: func(context.Context, Occurrence) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := reg.Lookup("weekly-report")
	return s
}

func TestForMember(t *testing.T) {
	t.Parallel()
	fam := newFamily(t)
	from := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC) // a Monday
	tests := []struct {
		zone, expr string
		want       time.Time
	}{
		{"", "", time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)},
		{"Asia/Tokyo", "", time.Date(2026, 3, 9, 0, 0, 0, 0, time.UTC)}, // Monday 09:00 JST passed at 00:00Z
		{"America/New_York", "", time.Date(2026, 3, 2, 14, 0, 0, 0, time.UTC)},
		{"America/New_York", "30 8 * * *", time.Date(2026, 3, 2, 13, 30, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		m, err := fam.ForMember(tt.zone, tt.expr)
		if err != nil {
			t.Fatalf("ForMember(%q, %q): %v", tt.zone, tt.expr, err)
		}
		if got := m.Next(from); !got.Equal(tt.want) {
			t.Errorf("ForMember(%q, %q).Next = %s, want %s", tt.zone, tt.expr, got, tt.want)
		}
		if m.Name != fam.Name || m.Per != "tenant" {
			t.Errorf("member schedule lost the family's name or per: %+v", m)
		}
	}
	if fam.Zone != "UTC" || fam.Location() != time.UTC {
		t.Errorf("ForMember changed the family itself: zone %s", fam.Zone)
	}
}

// A member's bad zone or expression reads as crongen's message for a bad
// tz= or expression.
func TestForMemberErrorsSpeakLikeCrongen(t *testing.T) {
	t.Parallel()
	fam := newFamily(t)
	for _, tt := range []struct{ zone, expr, line string }{
		{"Mars/Olympus", "", `//cron:schedule "0 9 * * MON" tz=Mars/Olympus`},
		{"Local", "", `//cron:schedule "0 9 * * MON" tz=Local`},
		{"", "0 25 * * *", `//cron:schedule "0 25 * * *"`},
		{"", "CRON_TZ=UTC 0 9 * * *", `//cron:schedule "CRON_TZ=UTC 0 9 * * *"`},
	} {
		_, err := fam.ForMember(tt.zone, tt.expr)
		if err == nil {
			t.Fatalf("ForMember(%q, %q) accepted", tt.zone, tt.expr)
		}
		_, c := parseDirectiveLine(t, tt.line)
		_, derr := ParseDirective(c)
		if derr == nil || !strings.Contains(derr.Error(), err.Error()) {
			t.Errorf("ForMember(%q, %q) = %q; crongen says %v", tt.zone, tt.expr, err, derr)
		}
	}
}

func TestNewChecksPer(t *testing.T) {
	t.Parallel()
	_, err := New(Schedule{Name: "x", Expr: "@daily", Per: "Tenants!", Handler: func(context.Context, Occurrence) error { return nil }})
	if err == nil || !strings.Contains(err.Error(), "per=tenant") {
		t.Errorf("New with a bad Per: %v", err)
	}
}

// A family's members cannot catch up with misfire=all: the directive says
// so at the value, and New refuses it too.
func TestAFamilyRefusesMisfireAll(t *testing.T) {
	t.Parallel()
	line := `//cron:schedule "0 9 * * MON" name=weekly-report per=tenant misfire=all`
	fset, c := parseDirectiveLine(t, line)
	_, err := ParseDirective(c)
	var errs PosErrors
	if !errors.As(err, &errs) || len(errs) != 1 || !strings.Contains(errs[0].Msg, "misfire=all is not offered for a family") {
		t.Fatalf("ParseDirective: %v, want one error about misfire=all", err)
	}
	if got, want := fset.Position(errs[0].Pos).Column, strings.Index(line, "=all")+2; got != want {
		t.Errorf("error at column %d, want %d (the value)", got, want)
	}
	for _, m := range []Misfire{MisfireSkip, MisfireLatest} {
		if _, err := New(Schedule{Name: "f", Expr: "@daily", Per: "tenant", Misfire: m, Handler: func(context.Context, Occurrence) error { return nil }}); err != nil {
			t.Errorf("misfire=%s on a family: %v", m, err)
		}
	}
	if _, err := New(Schedule{Name: "f", Expr: "@daily", Per: "tenant", Misfire: MisfireAll, Handler: func(context.Context, Occurrence) error { return nil }}); err == nil {
		t.Error("New accepted misfire=all on a family")
	}
}

// A family cannot buffer or replace: the directive says so at the value,
// and New refuses it too; a plain schedule takes both.
func TestAFamilyRefusesBufferOneAndReplace(t *testing.T) {
	t.Parallel()
	h := func(context.Context, Occurrence) error { return nil }
	for _, o := range []Overlap{OverlapBufferOne, OverlapReplace} {
		line := `//cron:schedule "0 9 * * MON" name=weekly-report per=tenant overlap=` + string(o)
		fset, c := parseDirectiveLine(t, line)
		_, err := ParseDirective(c)
		var errs PosErrors
		if !errors.As(err, &errs) || len(errs) != 1 || !strings.Contains(errs[0].Msg, "overlap="+string(o)+" is not offered for a family") {
			t.Fatalf("ParseDirective: %v, want one error about overlap=%s", err, o)
		}
		if got, want := fset.Position(errs[0].Pos).Column, strings.Index(line, "overlap=")+len("overlap=")+1; got != want {
			t.Errorf("error at column %d, want %d (the value)", got, want)
		}
		if _, err := New(Schedule{Name: "f", Expr: "@daily", Per: "tenant", Overlap: o, Handler: h}); err == nil {
			t.Errorf("New accepted overlap=%s on a family", o)
		}
		_, plain := parseDirectiveLine(t, `//cron:schedule "* * * * * *" overlap=`+string(o))
		d, err := ParseDirective(plain)
		if err != nil || d.Overlap != o {
			t.Errorf("overlap=%s on a schedule: %+v, %v", o, d, err)
		}
		if _, err := New(Schedule{Name: "s", Expr: "@daily", Overlap: o, Handler: h}); err != nil {
			t.Errorf("New refused overlap=%s: %v", o, err)
		}
	}
}

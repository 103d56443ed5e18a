package registry

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// parseDirectiveLine parses line as the first comment of a real file, so
// that positions go through a token.FileSet as they do in crongen and
// cronlint.
func parseDirectiveLine(t *testing.T, line string) (*token.FileSet, *ast.Comment) {
	t.Helper()
	src := "package p\n\n" + line + "\nfunc F() {}\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "jobs.go", src, parser.ParseComments)
	if err != nil {
		t.Fatalf("parsing %q: %v", src, err)
	}
	return fset, f.Comments[0].List[0]
}

func TestParseDirectiveErrors(t *testing.T) {
	t.Parallel()
	// Columns are 1-based byte columns. The prefix `//cron:schedule ` is 16
	// bytes and `"17 3 * * *" ` 13 more, so the first key starts at 30.
	tests := []struct {
		name, line  string
		col, endCol int
		msgHas      []string
	}{
		{"unknown key", `//cron:schedule "17 3 * * *" color=red`, 30, 35,
			[]string{`unknown key "color"`, DirectiveExample}},
		{"duplicate key", `//cron:schedule "17 3 * * *" tz=UTC tz=UTC`, 37, 43,
			[]string{"key tz is given twice", "tz=UTC"}},
		{"empty value", `//cron:schedule "17 3 * * *" queue=`, 30, 36,
			[]string{"key queue has an empty value", "queue=maintenance"}},
		{"bad tz", `//cron:schedule "17 3 * * *" tz=Mars/Olympus`, 33, 45,
			[]string{`unknown zone "Mars/Olympus"`, "tz=UTC"}},
		{"host zone", `//cron:schedule "17 3 * * *" tz=Local`, 33, 38,
			[]string{"depends on the host", "tz=UTC"}},
		{"bad timeout", `//cron:schedule "17 3 * * *" timeout=soon`, 38, 42,
			[]string{`bad value "soon" for timeout`, "timeout=20m"}},
		{"sub-second timeout", `//cron:schedule "17 3 * * *" timeout=500ms`, 38, 43,
			[]string{"at least 1s", "timeout=20m"}},
		{"bad grace", `//cron:schedule "17 3 * * *" grace=0s`, 36, 38,
			[]string{"grace", "grace=10m"}},
		{"bad retry", `//cron:schedule "17 3 * * *" retry=-1`, 36, 38,
			[]string{`bad value "-1" for retry`, "retry=3"}},
		{"bad overlap", `//cron:schedule "17 3 * * *" overlap=never`, 38, 43,
			[]string{`bad value "never" for overlap`, "overlap=skip"}},
		{"bad misfire", `//cron:schedule "17 3 * * *" misfire=now`, 38, 41,
			[]string{"misfire", "misfire=latest"}},
		{"bad resume", `//cron:schedule "17 3 * * *" resume=later`, 37, 42,
			[]string{`bad value "later" for resume`, "resume=next"}},
		{"bad per", `//cron:schedule "17 3 * * *" per=Tenant`, 34, 40,
			[]string{`bad value "Tenant" for per`, "per=tenant"}},
		{"bad name", `//cron:schedule "17 3 * * *" name=-prune`, 35, 41,
			[]string{"name", "name=prune-soft-deleted"}},
		{"bad payload", `//cron:schedule "17 3 * * *" payload=1cfg`, 38, 42,
			[]string{"package-level variable", "payload=digestConfig"}},
		{"not key=value", `//cron:schedule "17 3 * * *" verbose`, 30, 37,
			[]string{`"verbose" is not key=value`, "tz=UTC"}},
		{"missing expression", `//cron:schedule`, 1, 16,
			[]string{"missing cron expression", DirectiveExample}},
		{"key before expression", `//cron:schedule tz=UTC "17 3 * * *"`, 17, 23,
			[]string{"must come first", DirectiveExample}},
		{"second quoted argument", `//cron:schedule "17 3 * * *" "0 4 * * *"`, 30, 41,
			[]string{"unexpected quoted argument", DirectiveExample}},
		{"unterminated quote", `//cron:schedule "17 3 * * *`, 17, 28,
			[]string{"malformed arguments", DirectiveExample}},
		{"CRON_TZ prefix", `//cron:schedule "CRON_TZ=Europe/Berlin 17 3 * * *"`, 18, 39,
			[]string{"use the key tz=Europe/Berlin"}},
		{"TZ prefix", `//cron:schedule "TZ=UTC 17 3 * * *"`, 18, 24,
			[]string{"use the key tz=UTC"}},
		{"bad hour field", `//cron:schedule "17 25 * * *"`, 21, 23,
			[]string{`hour field "25"`, ExprExample}},
		{"bad field after leading spaces", `//cron:schedule "  17 3 * * MON-FRY"`, 29, 36,
			[]string{`day-of-week field "MON-FRY"`, ExprExample}},
		{"bad field in raw string", "//cron:schedule `17 3 * 13 *` tz=UTC", 25, 27,
			[]string{`month field "13"`}},
		{"escaped expression", `//cron:schedule "17\x203 * * 8"`, 17, 32,
			[]string{`day-of-week field "8"`}},
		{"never fires", `//cron:schedule "0 0 30 2 *"`, 22, 24,
			[]string{"never fires", `"0 0 28 2 *"`}},
		{"too few fields", `//cron:schedule "17 3 * *"`, 18, 26,
			[]string{"has 4 fields", ExprExample}},
		{"H without a name", `//cron:schedule "H 3 * * *"`, 18, 19,
			[]string{"H picks a value from the schedule's name", "name=nightly-report"}},
		{"phase without @every", `//cron:schedule "17 3 * * *" phase=17m`, 36, 39,
			[]string{`bad value "17m" for phase`, "only to @every", "phase=17m"}},
		{"phase not shorter than the period", `//cron:schedule "@every 1h" phase=1h`, 35, 37,
			[]string{`bad value "1h" for phase`, "shorter than the period 1h0m0s"}},
		{"unknown directive", `//cron:foo "17 3 * * *"`, 1, 11,
			[]string{`unknown directive "//cron:foo"`, DirectiveExample}},
		{"bare prefix", `//cron:`, 1, 8,
			[]string{"unknown directive", DirectiveExample}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset, c := parseDirectiveLine(t, tt.line)
			d, err := ParseDirective(c)
			if err == nil {
				t.Fatalf("ParseDirective(%s) = %+v, want an error", tt.line, d)
			}
			var pe *PosError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is %T, want *PosError", err, err)
			}
			pos, end := fset.Position(pe.Pos), fset.Position(pe.End)
			if pos.Line != 3 || pos.Column != tt.col || end.Column != tt.endCol {
				t.Errorf("error at %d:%d-%d, want 3:%d-%d (%q); message: %s",
					pos.Line, pos.Column, end.Column, tt.col, tt.endCol, tt.line[tt.col-1:tt.endCol-1], pe.Msg)
			}
			for _, want := range tt.msgHas {
				if !strings.Contains(pe.Msg, want) {
					t.Errorf("message %q does not contain %q", pe.Msg, want)
				}
			}
		})
	}
}

// TestDirectiveExamplesAreValid makes sure that the examples error messages
// offer parse: a message that suggests an invalid fix is worse than none.
func TestDirectiveExamplesAreValid(t *testing.T) {
	t.Parallel()
	expr, _, _ := strings.Cut(ExprExample, " (")
	lines := []string{DirectiveExample, `//cron:schedule ` + expr}
	for _, k := range Keys() {
		expr := `"17 3 * * *"`
		if k == "phase" {
			expr = `"@every 1h"` // a phase shifts @every slots only
		}
		lines = append(lines, `//cron:schedule `+expr+` `+keySpecs[k].example)
	}
	for _, line := range lines {
		_, c := parseDirectiveLine(t, line)
		if _, err := ParseDirective(c); err != nil {
			t.Errorf("example %s: %v", line, err)
		}
	}
}

func TestParseDirective(t *testing.T) {
	t.Parallel()
	line := "//cron:schedule `0 9 * * MON-FRI`\tname=send-digest tz=Europe/Berlin queue=mail timeout=90s retry=0 grace=1m overlap=skip misfire=latest payload=digestConfig resume=next"
	fset, c := parseDirectiveLine(t, line)
	d, err := ParseDirective(c)
	if err != nil {
		t.Fatal(err)
	}
	want := Directive{Expr: "0 9 * * MON-FRI", Name: "send-digest", Zone: "Europe/Berlin", Queue: "mail",
		Timeout: 90 * time.Second, MaxRetry: 0, Grace: time.Minute, Overlap: OverlapSkip, Misfire: MisfireLatest, Payload: "digestConfig",
		Resume: ResumeNext}
	ignore := cmpopts.IgnoreFields(Directive{}, "Slash", "ExprPos", "Keys", "Cron")
	if diff := cmp.Diff(want, *d, ignore); diff != "" {
		t.Errorf("ParseDirective mismatch (-want +got):\n%s", diff)
	}
	if col := fset.Position(d.ExprPos).Column; col != 17 {
		t.Errorf("ExprPos at column %d, want 17 (the opening quote)", col)
	}
	kv, ok := d.Key("queue")
	if !ok || kv.Value != "mail" || fset.Position(kv.KeyPos).Column != 69 || fset.Position(kv.ValuePos).Column != 75 {
		t.Errorf("Key(queue) = %+v, %v; want value mail with key at column 69, value at 75", kv, ok)
	}
	if d.Cron == nil || d.Cron.Location().String() != "Europe/Berlin" || d.Cron.Wildcard() {
		t.Errorf("Cron = %+v, want a fixed-time schedule in Europe/Berlin", d.Cron)
	}
	s := d.Schedule("jobs.send")
	if s.Name != "send-digest" || s.Cron() != d.Cron || s.Queue != "mail" {
		t.Errorf("Schedule = %+v", s)
	}
}

func TestParseDirectiveDefaults(t *testing.T) {
	t.Parallel()
	_, c := parseDirectiveLine(t, `//cron:schedule "17 3 * * *"`)
	d, err := ParseDirective(c)
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "" || d.Zone != ZoneDefault || d.Queue != QueueDefault || d.Timeout != TimeoutDefault ||
		d.MaxRetry != RetryDefault || d.Grace != GraceDefault || d.Overlap != OverlapAllow || d.Misfire != MisfireSkip {
		t.Errorf("defaults not applied: %+v", d)
	}
	if s := d.Schedule("jobs.prune"); s.Name != "jobs.prune" {
		t.Errorf("Schedule name %q, want the default jobs.prune", s.Name)
	}
}

func TestParseDirectiveIgnoresOtherComments(t *testing.T) {
	t.Parallel()
	for _, line := range []string{"// cron:schedule \"17 3 * * *\"", "//go:generate crongen", "// plain comment", "//cronjob:schedule x"} {
		_, c := parseDirectiveLine(t, line)
		if d, err := ParseDirective(c); d != nil || err != nil {
			t.Errorf("ParseDirective(%s) = %v, %v; want nil, nil", line, d, err)
		}
	}
}

func TestDefaultName(t *testing.T) {
	t.Parallel()
	tests := []struct{ pkg, fn, want string }{
		{"jobs", "PruneSoftDeleted", "jobs.prune-soft-deleted"},
		{"jobs", "sendDigest", "jobs.send-digest"},
		{"jobs", "HTTPCheck", "jobs.http-check"},
		{"jobs", "CheckHTTP", "jobs.check-http"},
		{"jobs", "Prune", "jobs.prune"},
		{"jobs", "prune_old", "jobs.prune_old"},
		{"jobs", "Prune_Old", "jobs.prune_old"},
		{"jobs", "Sync2FA", "jobs.sync2-fa"},
		{"billing", "ID", "billing.id"},
	}
	for _, tt := range tests {
		if got := DefaultName(tt.pkg, tt.fn); got != tt.want {
			t.Errorf("DefaultName(%q, %q) = %q, want %q", tt.pkg, tt.fn, got, tt.want)
		}
		if !nameRE.MatchString(DefaultName(tt.pkg, tt.fn)) {
			t.Errorf("DefaultName(%q, %q) is not a valid schedule name", tt.pkg, tt.fn)
		}
	}
}

// TestParseDirectiveReportsEveryProblem checks that one run reports every
// problem of a directive, each at its own position, in order.
func TestParseDirectiveReportsEveryProblem(t *testing.T) {
	t.Parallel()
	line := `//cron:schedule "61 3 * * *" timout=20m queue= retry=many tz=Mars/Olympus overlap=skip overlap=allow`
	fset, c := parseDirectiveLine(t, line)
	_, err := ParseDirective(c)
	var errs PosErrors
	if !errors.As(err, &errs) {
		t.Fatalf("ParseDirective error %v is %T, want PosErrors", err, err)
	}
	want := []struct {
		text, msg string
	}{
		{`61`, `minute field "61"`},
		{`timout`, `unknown key "timout" (did you mean timeout?)`},
		{`queue=`, "key queue has an empty value"},
		{`many`, `bad value "many" for retry`},
		{`Mars/Olympus`, `unknown zone "Mars/Olympus"`},
		{`overlap=allow`, "key overlap is given twice"},
	}
	if len(errs) != len(want) {
		t.Fatalf("%d errors, want %d:\n%v", len(errs), len(want), err)
	}
	for i, w := range want {
		pos, end := fset.Position(errs[i].Pos), fset.Position(errs[i].End)
		if got := line[pos.Column-1 : end.Column-1]; got != w.text || !strings.Contains(errs[i].Msg, w.msg) {
			t.Errorf("error %d at %q: %s; want it at %q saying %q", i, got, errs[i].Msg, w.text, w.msg)
		}
	}
}

func TestUnknownKeySuggestion(t *testing.T) {
	t.Parallel()
	tests := []struct{ key, want string }{
		{"timout", "timeout"}, {"tmeout", "timeout"}, {"Timeout", "timeout"}, {"queues", "queue"},
		{"retyr", "retry"}, {"zone", ""}, {"color", ""}, {"x", ""},
	}
	for _, tt := range tests {
		if got := suggestKey(tt.key); got != tt.want {
			t.Errorf("suggestKey(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
	_, c := parseDirectiveLine(t, `//cron:schedule "17 3 * * *" color=red`)
	if _, err := ParseDirective(c); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("color=red: %v; want an error without a suggestion", err)
	}
}

func TestSpacedDirective(t *testing.T) {
	t.Parallel()
	for _, line := range []string{"// cron:schedule \"17 3 * * *\"", "//  cron:schedule", "//\tcron:schedule x"} {
		fset, c := parseDirectiveLine(t, line)
		e := SpacedDirective(c)
		if e == nil {
			t.Errorf("SpacedDirective(%q) = nil, want an error", line)
			continue
		}
		if pos := fset.Position(e.Pos); pos.Column != 1 || !strings.Contains(e.Msg, "write //cron:") {
			t.Errorf("SpacedDirective(%q) = %q at column %d, want column 1 and the fix", line, e.Msg, pos.Column)
		}
	}
	for _, line := range []string{"//cron:schedule \"17 3 * * *\"", "// cron jobs are declared below", "// cron:", "// cron:Schedule", "// see cron: it runs"} {
		_, c := parseDirectiveLine(t, line)
		if e := SpacedDirective(c); e != nil {
			t.Errorf("SpacedDirective(%q) = %q, want nil", line, e.Msg)
		}
	}
}

// TestUnknownZoneSuggestion checks the did-you-mean of a misspelt zone:
// crongen and cronlint both report ParseDirective's error, at the value.
func TestUnknownZoneSuggestion(t *testing.T) {
	t.Parallel()
	tests := []struct{ zone, want string }{
		{"Europe/Londn", "Europe/London"}, {"europe/london", "Europe/London"},
		{"Amercia/New_York", "America/New_York"}, {"Asia/Tokio", "Asia/Tokyo"},
		{"London", "Europe/London"}, {"New York", "America/New_York"}, {"utc", "UTC"},
		{"Mars/Olympus", ""}, {"PST", ""}, {"CEST", ""}, {"Nowhere", ""},
		{strings.Repeat("Europe/London", 10), ""},
	}
	for _, tt := range tests {
		if got := SuggestZone(tt.zone); got != tt.want {
			t.Errorf("SuggestZone(%q) = %q, want %q", tt.zone, got, tt.want)
		}
	}

	line := `//cron:schedule "17 3 * * *" tz=Europe/Londn`
	fset, c := parseDirectiveLine(t, line)
	_, err := ParseDirective(c)
	var errs PosErrors
	if !errors.As(err, &errs) || len(errs) != 1 {
		t.Fatalf("tz=Europe/Londn: %v; want one error", err)
	}
	pos, end := fset.Position(errs[0].Pos), fset.Position(errs[0].End)
	if got := line[pos.Column-1 : end.Column-1]; pos.Line != 3 || pos.Column != 33 || got != "Europe/Londn" {
		t.Errorf("tz=Europe/Londn: error at %d:%d on %q, want 3:33 on the value", pos.Line, pos.Column, got)
	}
	if want := `unknown zone "Europe/Londn" (did you mean Europe/London?)`; !strings.Contains(errs[0].Msg, want) {
		t.Errorf("tz=Europe/Londn: %q, want it to say %q", errs[0].Msg, want)
	}
	_, c = parseDirectiveLine(t, `//cron:schedule "17 3 * * *" tz=Mars/Olympus`)
	if _, err := ParseDirective(c); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("tz=Mars/Olympus: %v; want an error without a suggestion", err)
	}
}

// TestSuggestZoneRemembers checks that asking again for the same unknown
// zone does not walk the zone list again (a family lists every member
// stored with a zone this build cannot load), that a remembered answer is
// the walk's answer, and that distinct names cannot grow the memory past
// its bound. Not parallel: AllocsPerRun counts every goroutine's
// allocations.
func TestSuggestZoneRemembers(t *testing.T) {
	for _, zone := range []string{"Europe/Londn", "Mars/Olympus", "New York"} {
		first, again := SuggestZone(zone), SuggestZone(zone)
		if want := nearestZone(zone); first != want || again != want {
			t.Errorf("SuggestZone(%q) = %q, then %q; want %q both times", zone, first, again, want)
		}
		if allocs := testing.AllocsPerRun(20, func() { SuggestZone(zone) }); allocs != 0 {
			t.Errorf("SuggestZone(%q) asked again: %v allocations, want 0 (the answer remembered)", zone, allocs)
		}
	}
	for i := range maxSuggestions + 10 {
		SuggestZone(fmt.Sprintf("Nowhere/%d", i))
	}
	suggestions.Lock()
	remembered := len(suggestions.near)
	suggestions.Unlock()
	if remembered > maxSuggestions {
		t.Errorf("%d answers remembered, want at most %d", remembered, maxSuggestions)
	}
}

// TestGoGenerateLeavesZoneNamesAlone checks that go generate, which make
// test runs, does not regenerate zonenames.txt: its content depends on the
// Go release that writes it, and a test run must not rewrite a tracked
// file. make zones does it, by hand.
func TestGoGenerateLeavesZoneNamesAlone(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in the registry package: %v", err)
	}
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if strings.HasPrefix(line, "//go:generate") && strings.Contains(line, "zonenames") {
				t.Errorf("%s:%d: %s: the zone list is regenerated by make zones, not go generate", name, i+1, line)
			}
		}
	}
}

// TestZoneNamesLoad checks that every zone a suggestion may name loads:
// a suggestion must never be itself an unknown zone.
func TestZoneNamesLoad(t *testing.T) {
	t.Parallel()
	names := zoneNames()
	if len(names) < 400 {
		t.Fatalf("zonenames.txt lists %d zones; regenerate it with make zones", len(names))
	}
	for _, name := range names {
		if _, err := LoadZone(name); err != nil {
			t.Errorf("zonenames.txt lists %s: %v", name, err)
		}
		if len(name) > longestZoneName {
			t.Errorf("zone %s is longer than longestZoneName (%d)", name, longestZoneName)
		}
	}
}

package registry

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestOccurrenceIDsAreUnambiguous builds every name CheckName accepts from
// a small alphabet of segments (digits, ID markers, ordinary words) and
// checks that no two occurrences, scheduled, manual or re-run, of
// different names or slots or requests share an ID. Without the reserved segments,
// "a:manual" at slot 5 is "a"'s manual run with request "5".
func TestOccurrenceIDsAreUnambiguous(t *testing.T) {
	t.Parallel()
	segments := []string{"a", "5", "manual", "rerun", "member", "-1"}
	var names []string
	var build func(prefix string, depth int)
	build = func(prefix string, depth int) {
		if depth == 0 {
			return
		}
		for _, seg := range segments {
			name := seg
			if prefix != "" {
				name = prefix + ":" + seg
			}
			if CheckName(name) == nil {
				names = append(names, name)
			}
			build(name, depth-1)
		}
	}
	build("", 5)
	if len(names) < 100 {
		t.Fatalf("only %d names built; the alphabet is too small to test anything", len(names))
	}
	slots := []time.Time{time.Unix(5, 0), time.Unix(-1, 0), time.Unix(1772884800, 0)}
	requests := []string{"5", "a", "a:5", "manual", "-1", "5:5"}
	owner := map[string]string{}
	claim := func(id, what string) {
		if prev, dup := owner[id]; dup {
			t.Errorf("ID %q is both %s and %s", id, prev, what)
		}
		owner[id] = what
	}
	var scopes []Scope
	for _, ns := range []string{"", "a", "a:5", "billing.jobs-1f"} {
		for _, name := range names {
			for _, member := range []string{"", "a", "5", "manual", "a.5"} {
				scopes = append(scopes, Scope{Namespace: ns, Schedule: name, Member: member})
			}
		}
	}
	for _, sc := range scopes {
		what := fmt.Sprintf("%+v", sc)
		claimKind := func(id, what string, want IDKind) {
			claim(id, what)
			if got := KindOfID(id); got != want {
				t.Errorf("KindOfID(%q) = %d, want %d", id, got, want)
			}
		}
		for _, slot := range slots {
			claimKind(sc.ID(slot), what+" at "+slot.String(), Scheduled)
		}
		for _, req := range requests {
			claimKind(sc.ManualID(req), what+" manual "+req, Manual)
			for _, slot := range slots {
				claimKind(sc.RerunID(slot, req), what+" rerun of "+slot.String()+" request "+req, Rerun)
			}
		}
	}
	t.Logf("%d names, %d IDs, all distinct", len(names), len(owner))
	// Names with ':' are accepted at all.
	if !strings.Contains(strings.Join(names, " "), "a:5:a") {
		t.Errorf("names %v lack a:5:a", names[:10])
	}
}

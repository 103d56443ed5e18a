package registry

import (
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
	for _, name := range names {
		for _, slot := range slots {
			claim(OccurrenceID(name, slot), "name "+name+" at "+slot.String())
		}
		for _, req := range requests {
			claim(ManualOccurrenceID(name, req), "name "+name+" manual "+req)
			for _, slot := range slots {
				claim(RerunOccurrenceID(name, slot, req), "name "+name+" rerun of "+slot.String()+" request "+req)
			}
		}
	}
	t.Logf("%d names, %d IDs, all distinct", len(names), len(owner))
	// Names with ':' are accepted at all.
	if !strings.Contains(strings.Join(names, " "), "a:5:a") {
		t.Errorf("names %v lack a:5:a", names[:10])
	}
}

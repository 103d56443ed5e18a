package core

import "testing"

// A buffer_one schedule's last ID carries its waiting slot beside the
// running occurrence, and reads back as it was written; a plain last ID
// (any other schedule's, or one with nothing waiting) reads as itself.
func TestLastIDCarriesTheWaitingSlot(t *testing.T) {
	t.Parallel()
	w := waitingSlot{behind: "cron:ns/sync:1796500000", slot: 1796500001}
	id, got, waiting := parseLastID(encodeLastID(w))
	if !waiting || got != w || id != w.behind {
		t.Errorf("parseLastID(encodeLastID(%+v)) = %q, %+v, %v", w, id, got, waiting)
	}
	for _, v := range []string{"cron:ns/sync:1796500000", "", "cron:ns/sync:1796500000 soon"} {
		id, _, waiting := parseLastID(v)
		if waiting || id != firstField(v) {
			t.Errorf("parseLastID(%q) = %q, waiting %v; want the ID alone, nothing waiting", v, id, waiting)
		}
	}
	if got := slotOfID(w.behind); got.Unix() != 1796500000 {
		t.Errorf("slotOfID(%q) = %d", w.behind, got.Unix())
	}
}

func firstField(v string) string {
	for i := range len(v) {
		if v[i] == ' ' {
			return v[:i]
		}
	}
	return v
}

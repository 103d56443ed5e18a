package runtime

import "testing"

// A lease created anew (a new INCR) that carries the value this replica
// held before is a token counter gone back; resuming the same lease, or
// checking the same acquisition again after a failed recovery, is not.
func TestDataWatchTellsAReissuedTokenFromAResumedLease(t *testing.T) {
	var w dataWatch
	w.accept("e1", "r0|i|4", 4)
	w.acceptCreated(1)
	for _, step := range []struct {
		name    string
		value   string
		token   int64
		created uint64
		want    bool
	}{
		{"resumed after a failed renewal", "r0|i|4", 4, 1, false},
		{"created anew with the same token", "r0|i|4", 4, 2, true},
		{"a newer token", "r0|i|5", 5, 2, false},
	} {
		if got := w.reissued(step.value, step.token, step.created); got != step.want {
			t.Errorf("%s: reissued %v, want %v", step.name, got, step.want)
		}
	}
	w.accept("e1", "r0|i|4", 4)
	w.acceptCreated(2)
	if w.reissued("r0|i|4", 4, 2) {
		t.Error("the accepted recovery is reported again")
	}
}

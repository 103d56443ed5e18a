package redisengine

import (
	"testing"
	"time"

	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/redis/go-redis/v9"
)

func TestDataWatchTellsALossFromAResumedLease(t *testing.T) {
	var w dataWatch
	for _, step := range []struct {
		epoch, value string
		token        int64
		lost         bool
	}{
		{"e1", "r0|4", 4, false}, // first lease this replica sees
		{"e1", "r0|4", 4, false}, // resumed after a failed commit: same value
		{"e1", "r1|5", 5, false}, // a newer lease
		{"e1", "r0|5", 5, true},  // the same token under another value
		{"e1", "r0|3", 3, true},  // the token went back
		{"e2", "r0|9", 9, true},  // the epoch changed
		{"e2", "r0|10", 10, false},
	} {
		if got := w.check(step.epoch, step.value, step.token) != ""; got != step.lost {
			t.Errorf("%+v: lost %v, want %v", step, got, step.lost)
		}
		w.accept(step.epoch, step.value, step.token)
	}
}

// check changes nothing: until the recovery is committed and accepted, the
// loss is found again, so a failure on the way cannot make it forgotten.
func TestDataWatchForgetsNoLossBeforeItIsAccepted(t *testing.T) {
	var w dataWatch
	w.accept("e1", "r0|9", 9)
	for range 2 {
		if w.check("e1", "r1|7", 7) == "" {
			t.Fatal("a token gone back was not reported (again)")
		}
	}
	w.accept("e1", "r1|7", 7) // recovered: 7 is the mark from now on
	if w.check("e1", "r1|7", 7) != "" || w.check("e1", "r1|8", 8) != "" {
		t.Error("after the loss was handled, the tokens that follow it are reported as losses")
	}
}

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

// A follower that knows the store's epoch goes on learning the tokens of
// the leases it sees (it compared the epoch it does not read, took every
// lease for a loss and learned nothing more), and remembers when it last
// saw the store intact, which a loss noticed long after it happened is
// windowed from.
func TestAFollowerKeepsLearningAndRemembersTheStoreIntact(t *testing.T) {
	clk := clock.NewStub(time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:0"}) // never dialled
	t.Cleanup(func() { rdb.Close() })
	e := New(Config{Client: rdb, Namespace: "ns", Replica: "r0", LeaseTTL: 2 * time.Second, Clock: clk})
	e.data.learn("e1")
	e.seeHolder("r1|a|5")
	if got := e.SeenToken(); got != 5 {
		t.Fatalf("a follower that knows the epoch saw token 5 and remembers %d", got)
	}
	intact := clk.Now()
	clk.Advance(time.Minute) // the data went in this minute; only later is it found
	e.seeHolder("r2|b|1")    // a lease after the loss: its token went back
	if got := e.data.intact(); !got.Equal(intact) {
		t.Errorf("the store was last seen intact at %s, remembered %s", intact.Format(time.TimeOnly), got.Format(time.TimeOnly))
	}
}

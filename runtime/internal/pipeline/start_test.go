package pipeline_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/redis/go-redis/v9"
)

// startRig is a task hash of the test's own and the calls on its mark,
// on a single server: the rules, not the WAIT.
type startRig struct {
	t         *testing.T
	ctx       context.Context
	rdb       redis.UniversalClient
	key       string
	acks      pipeline.Acks
	delivered map[string]string // token: its delivery's digest
}

const startTTL = time.Minute

func newStartRig(t *testing.T) *startRig {
	rig := &startRig{t: t, ctx: context.Background(), rdb: redistest.Shared(t),
		key: pipeline.TaskKey("startmark", t.Name()), delivered: map[string]string{}}
	t.Cleanup(func() { rig.rdb.Del(context.Background(), rig.key) })
	rig.rdb.HSet(rig.ctx, rig.key, "state", "active", "msg", "message 1")
	return rig
}

// claim claims attempt for token's delivery, with the digest of its first
// claim after that, and returns the standing mark.
func (rig *startRig) claim(attempt int, token string) pipeline.Start {
	rig.t.Helper()
	s, digest, err := rig.acks.ClaimStart(rig.ctx, rig.rdb, rig.key, attempt, token, rig.delivered[token], startTTL)
	if err != nil {
		rig.t.Fatalf("claim of attempt %d by %s: %v", attempt, token, err)
	}
	rig.delivered[token] = digest
	return s
}

func (rig *startRig) end(attempt int, token, state string) bool {
	rig.t.Helper()
	ours, err := rig.acks.EndStart(rig.ctx, rig.rdb, rig.key, attempt, token, state)
	if err != nil {
		rig.t.Fatalf("end of attempt %d by %s: %v", attempt, token, err)
	}
	return ours
}

func (rig *startRig) want(got pipeline.Start, attempt int, token, state string) {
	rig.t.Helper()
	if got != (pipeline.Start{Attempt: attempt, Token: token, State: state}) {
		rig.t.Errorf("standing mark %+v; want attempt %d by %s, %s", got, attempt, token, state)
	}
}

// The start mark's rules: the first delivery of an attempt takes it; a
// second delivery of it finds the first's, running or ended; a later
// attempt replaces one that failed but not one that succeeded or still
// runs; only the holder ends or removes its mark.
func TestStartMarksLetOneDeliveryRunEachAttempt(t *testing.T) {
	t.Parallel()
	rig := newStartRig(t)
	if _, _, err := rig.acks.ClaimStart(rig.ctx, rig.rdb, pipeline.TaskKey("startmark", "gone"), 0, "a", "", startTTL); !errors.Is(err, pipeline.ErrNoTask) {
		t.Fatalf("a claim on a task that is gone: %v; want ErrNoTask", err)
	}
	if n := rig.rdb.Exists(rig.ctx, pipeline.TaskKey("startmark", "gone")).Val(); n != 0 {
		t.Fatalf("the claim on a task that is gone created its hash")
	}

	rig.want(rig.claim(0, "a"), 0, "a", pipeline.StartRunning)
	rig.want(rig.claim(0, "a"), 0, "a", pipeline.StartRunning) // a retried claim keeps it
	rig.want(rig.claim(0, "b"), 0, "a", pipeline.StartRunning) // the lost dequeue's second delivery
	rig.want(rig.claim(1, "x"), 0, "a", pipeline.StartRunning) // a running mark stands for any attempt

	if rig.end(0, "b", pipeline.StartFailed) {
		t.Error("b ended a's attempt")
	}
	if s, ok, err := pipeline.ReadStart(rig.ctx, rig.rdb, rig.key); err != nil || !ok {
		t.Fatalf("reading the mark: %v %v", ok, err)
	} else {
		rig.want(s, 0, "a", pipeline.StartRunning)
	}
	if !rig.end(0, "a", pipeline.StartFailed) {
		t.Fatal("a could not end its attempt")
	}
	rig.want(rig.claim(0, "b"), 0, "a", pipeline.StartFailed) // b ends as a did
	// asynq's retry rewrites the message: attempt 1 runs.
	rig.rdb.HSet(rig.ctx, rig.key, "msg", "message 2")
	rig.want(rig.claim(1, "c"), 1, "c", pipeline.StartRunning)
	rig.want(rig.claim(0, "b"), 1, "c", pipeline.StartRunning) // a stale delivery of attempt 0
	rig.end(1, "c", "")                                        // c's worker shuts down: asynq puts the task back
	rig.want(rig.claim(1, "d"), 1, "d", pipeline.StartRunning)
	rig.end(1, "d", pipeline.StartFinal)
	rig.want(rig.claim(1, "e"), 1, "d", pipeline.StartFinal)
	// An operator runs the archived task again: asynq rewrote its message
	// when it archived it, and the same attempt runs anew.
	rig.rdb.HSet(rig.ctx, rig.key, "msg", "message 3")
	rig.want(rig.claim(1, "f"), 1, "f", pipeline.StartRunning)
	rig.end(1, "f", pipeline.StartSucceeded)
	rig.want(rig.claim(1, "h"), 1, "f", pipeline.StartSucceeded) // the lost dequeue's second delivery of it
	// asynq retries a task whose "done" a failover lost (its lease
	// expired on the new primary): the attempt succeeded, nothing runs.
	rig.rdb.HSet(rig.ctx, rig.key, "msg", "message 4")
	rig.want(rig.claim(2, "g"), 1, "f", pipeline.StartSucceeded)
	// An operator runs the completed task again: asynq rewrote its message
	// when it completed it, and the same attempt runs anew.
	rig.want(rig.claim(1, "i"), 1, "i", pipeline.StartRunning)
}

// A running mark its holder stopped renewing (its worker died, or shut
// down, and asynq put the task back with the same attempt) gives way to
// the attempt's next delivery once it expires, by Redis's clock; the
// holder's renewals keep it, and a late one does not take it back.
func TestARunningStartMarkLastsWhileRenewed(t *testing.T) {
	t.Parallel()
	rig := newStartRig(t)
	// Long enough that a loaded machine's pause between two renewals
	// does not let the mark lapse: a race-detector run beside the
	// runtime's tests on two cores has stalled this loop past a second.
	const ttl = 3 * time.Second
	if s, _, err := rig.acks.ClaimStart(rig.ctx, rig.rdb, rig.key, 0, "a", "", ttl); err != nil || s.Token != "a" {
		t.Fatalf("first claim: %+v %v", s, err)
	}
	// Renewed until Redis's clock is past the first expiry: a's still.
	first := time.Now()
	for time.Since(first) < 3*ttl/2 {
		if ours, err := pipeline.RenewStart(rig.ctx, rig.rdb, rig.key, 0, "a", ttl); err != nil || !ours {
			t.Fatalf("renewal: %v %v", ours, err)
		}
		if s := rig.claim(0, "b"); s.Token != "a" {
			t.Fatalf("b took a renewed mark: %+v", s)
		}
		time.Sleep(ttl / 10) // the renewals' pace, as keepAlive's ticker
	}
	redistest.WaitFor(t, 3*ttl, "a's mark to expire and b to take the attempt", func() bool {
		return rig.claim(0, "b").Token == "b"
	})
	if ours, err := pipeline.RenewStart(rig.ctx, rig.rdb, rig.key, 0, "a", ttl); err != nil || ours {
		t.Errorf("a's late renewal: ours=%v %v; want false", ours, err)
	}
	if s, _, _ := pipeline.ReadStart(rig.ctx, rig.rdb, rig.key); s.Token != "b" {
		t.Errorf("a's late renewal took the mark back: %+v", s)
	}
}

// What a start mark adds to each attempt with ReplicaAcks, on a primary
// with one replica on the same host: a claim and an end per op, each
// waiting for the replica (acks=1), or neither waiting (acks=0, for
// scale: the runtime marks nothing without ReplicaAcks).
func BenchmarkStartMarkPerAttempt(b *testing.B) {
	ctx := context.Background()
	s := redistest.StartSentinel(b, redistest.SentinelOptions{Sentinels: 1})
	rdb := s.Servers[0].Client(b)
	key := pipeline.TaskKey("bench", "task")
	rdb.HSet(ctx, key, "state", "active", "msg", "message")
	for _, replicas := range []int{0, 1} {
		b.Run("acks="+strconv.Itoa(replicas), func(b *testing.B) {
			acks := pipeline.Acks{Replicas: replicas, Timeout: time.Second}
			attempt := 0
			for b.Loop() {
				attempt++
				if _, _, err := acks.ClaimStart(ctx, rdb, key, attempt, "t", "", time.Minute); err != nil {
					b.Fatal(err)
				}
				if _, err := acks.EndStart(ctx, rdb, key, attempt, "t", pipeline.StartSucceeded); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

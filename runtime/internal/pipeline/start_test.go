package pipeline_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/belfry/belfry/runtime/internal/redistest"
)

// The start mark's rules: the first delivery of an attempt takes it, a
// second delivery of that attempt (or of an earlier one) finds the first's,
// a later attempt replaces one that failed or never ended but not one
// that succeeded, and only the holder records the end or removes it.
func TestStartMarksLetOneDeliveryRunEachAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Shared(t)
	key := pipeline.TaskKey("startmark", t.Name())
	var acks pipeline.Acks // a single server: the rules, not the WAIT
	t.Cleanup(func() { rdb.Del(context.Background(), key) })

	const ttl = time.Minute
	if _, err := acks.ClaimStart(ctx, rdb, key, 0, "a", ttl); !errors.Is(err, pipeline.ErrNoTask) {
		t.Fatalf("a claim on a task that is gone: %v; want ErrNoTask", err)
	}
	if n := rdb.Exists(ctx, key).Val(); n != 0 {
		t.Fatalf("the claim on a task that is gone created its hash")
	}
	rdb.HSet(ctx, key, "state", "active")

	claim := func(attempt int, token string) pipeline.Start {
		t.Helper()
		s, err := acks.ClaimStart(ctx, rdb, key, attempt, token, ttl)
		if err != nil {
			t.Fatalf("claim of attempt %d by %s: %v", attempt, token, err)
		}
		return s
	}
	finish := func(attempt int, token, state string) {
		t.Helper()
		if err := acks.UpdateStart(ctx, rdb, key, attempt, token, state, ttl); err != nil {
			t.Fatalf("finish of attempt %d by %s: %v", attempt, token, err)
		}
	}
	want := func(got pipeline.Start, attempt int, token, state string) {
		t.Helper()
		if got != (pipeline.Start{Attempt: attempt, Token: token, State: state}) {
			t.Errorf("standing mark %+v; want attempt %d by %s, %s", got, attempt, token, state)
		}
	}

	want(claim(0, "a"), 0, "a", pipeline.StartRunning)
	want(claim(0, "a"), 0, "a", pipeline.StartRunning) // a retried claim keeps it
	want(claim(0, "b"), 0, "a", pipeline.StartRunning) // the lost dequeue's second delivery

	finish(0, "b", pipeline.StartFailed) // not b's: no change
	s, ok, err := pipeline.ReadStart(ctx, rdb, key)
	if err != nil || !ok {
		t.Fatalf("reading the mark: %v %v", ok, err)
	}
	want(s, 0, "a", pipeline.StartRunning)

	finish(0, "a", pipeline.StartFailed)
	want(claim(0, "b"), 0, "a", pipeline.StartFailed)
	want(claim(1, "c"), 1, "c", pipeline.StartRunning) // asynq's retry of the failure
	want(claim(0, "a"), 1, "c", pipeline.StartRunning) // a stale delivery of attempt 0
	want(claim(2, "d"), 2, "d", pipeline.StartRunning) // c's worker died: the recoverer's retry
	finish(2, "d", "")                                 // d's worker shuts down: asynq puts the task back
	want(claim(2, "e"), 2, "e", pipeline.StartRunning)
	finish(2, "e", pipeline.StartSucceeded)
	// asynq retries a task whose "done" a failover lost (its lease
	// expired on the new primary): the attempt succeeded, nothing runs.
	want(claim(3, "f"), 2, "e", pipeline.StartSucceeded)
}

// A running mark its holder stopped renewing (its worker died, or shut
// down, and asynq put the task back with the same attempt) gives way to
// the attempt's next delivery once it expires, by Redis's clock.
func TestARunningStartMarkExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Shared(t)
	key := pipeline.TaskKey("startmark", t.Name())
	t.Cleanup(func() { rdb.Del(context.Background(), key) })
	rdb.HSet(ctx, key, "state", "active")
	var acks pipeline.Acks
	if s, err := acks.ClaimStart(ctx, rdb, key, 0, "a", 50*time.Millisecond); err != nil || s.Token != "a" {
		t.Fatalf("first claim: %+v %v", s, err)
	}
	if s, err := acks.ClaimStart(ctx, rdb, key, 0, "b", time.Minute); err != nil || s.Token != "a" {
		t.Fatalf("a claim while a's mark lives: %+v %v; want a's", s, err)
	}
	redistest.WaitFor(t, 5*time.Second, "a's mark to expire and b to take the attempt", func() bool {
		s, err := acks.ClaimStart(ctx, rdb, key, 0, "b", time.Minute)
		return err == nil && s.Token == "b"
	})
	if err := acks.UpdateStart(ctx, rdb, key, 0, "a", pipeline.StartRunning, time.Minute); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := pipeline.ReadStart(ctx, rdb, key); s.Token != "b" {
		t.Errorf("a's late renewal took the mark back: %+v", s)
	}
}

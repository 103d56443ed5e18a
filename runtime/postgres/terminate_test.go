package postgres_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
)

// runs counts a handler's executions by occ.Key().
type runs struct {
	mu    sync.Mutex
	slots map[string][]time.Time
}

func (r *runs) handler(_ context.Context, occ registry.Occurrence) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.slots == nil {
		r.slots = map[string][]time.Time{}
	}
	r.slots[occ.Key()] = append(r.slots[occ.Key()], occ.Slot)
	return nil
}

// after reports whether n slots after at ran.
func (r *runs) after(at time.Time, n int) func() bool {
	return func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		k := 0
		for _, s := range r.slots {
			if s[0].After(at) {
				k++
			}
		}
		return k >= n
	}
}

// Every connection of the database is ended by the server
// (pg_terminate_backend), three times, under two replicas and their
// workers: the pools reconnect, the lease carries on or moves, and every
// per-second slot from the first to the last runs once.
func TestEveryConnectionTerminated(t *testing.T) {
	t.Parallel()
	b := pgHarness{}.NewBackend(t)
	direct := b.(*pgBackend).direct
	exec := &runs{}
	reg, err := registry.New(registry.Schedule{Name: "tick", Expr: "* * * * * *", Handler: exec.handler})
	if err != nil {
		t.Fatal(err)
	}
	var rts []*core.Runtime
	for _, name := range []string{"a", "b"} {
		opts, _ := b.Replica(t)
		opts.Replica, opts.LeaseTTL, opts.Grace, opts.Logger = name, 2*time.Second, time.Minute, quietLogger()
		rt, err := core.New(reg, opts)
		if err != nil {
			t.Fatal(err)
		}
		runRuntime(t, rt)
		rts = append(rts, rt)
	}
	b.StartWorkers(t, rts[1])
	waitUntil(t, 10*time.Second, "two slots to run", exec.after(time.Time{}, 2))
	for range 3 {
		killed := count(t, direct, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`)
		at := time.Now()
		t.Logf("terminated %d connections", killed)
		waitUntil(t, 15*time.Second, "two slots after the connections were ended", exec.after(at, 2))
	}
	last := time.Now()
	waitUntil(t, 10*time.Second, "three more slots", exec.after(last, 3))

	exec.mu.Lock()
	defer exec.mu.Unlock()
	var slots []time.Time
	for key, s := range exec.slots {
		if len(s) != 1 {
			t.Errorf("%s ran %d times, want once", key, len(s))
		}
		slots = append(slots, s[0])
	}
	slices.SortFunc(slots, time.Time.Compare)
	for i := 1; i < len(slots); i++ {
		if gap := slots[i].Sub(slots[i-1]); gap != time.Second {
			t.Errorf("no slot ran between %s and %s", slots[i-1].Format(time.TimeOnly), slots[i].Format(time.TimeOnly))
		}
	}
}

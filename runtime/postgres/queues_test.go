package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/postgres"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// A queue of the registry's that no River client serves is reported:
// one no client has reported, and one whose job waits with none of the
// queue running (its clients gone since they last reported). A job a
// client of the queue bounced for want of its worker is reported as
// misrouted.
func TestUnservedQueuesOnRiver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	handler := func(context.Context, registry.Occurrence) error { return nil }
	reg := registry.MustNew(
		registry.Schedule{Name: "served", Expr: "0 0 1 1 *", Queue: "served", Handler: handler},
		registry.Schedule{Name: "idle", Expr: "0 0 1 1 *", Queue: "idle", Handler: handler},
	)
	eng, err := postgres.New(postgres.Config{Pool: db})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := core.New(reg, core.Options{Engine: eng, Namespace: "ns", Replica: "solo", LeaseTTL: 2 * time.Second, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	runRuntime(t, rt)
	unserved := func(want ...string) func() bool {
		return func() bool {
			got, err := rt.Diagnostics().UnservedQueues()
			return err == nil && slices.Equal(got, want)
		}
	}
	if !unserved("idle", "served")() {
		got, err := rt.Diagnostics().UnservedQueues()
		t.Errorf("with no River client, UnservedQueues = %v, %v; want both queues", got, err)
	}

	// A client serving "served" with belfry's workers, and one serving
	// "idle" with none of them.
	workers := river.NewWorkers()
	if err := postgres.AddWorkers(workers, rt); err != nil {
		t.Fatal(err)
	}
	startClient := func(queue string, workers *river.Workers) {
		client, err := river.NewClient(riverpgxv5.New(db), &river.Config{
			ID: "client-" + queue, Queues: map[string]river.QueueConfig{queue: {MaxWorkers: 2}}, Workers: workers, Logger: quietLogger(),
			FetchCooldown: 10 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond, MaxAttempts: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := client.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			client.Stop(stopCtx)
		})
	}
	startClient("served", workers)
	waitUntil(t, 10*time.Second, "only the queue without a client to be unserved", unserved("idle"))

	// A client that reported "idle" and is gone: its row is fresh, but a
	// job waits available with none of the queue running.
	if _, err := db.Exec(ctx, `INSERT INTO river_queue (name, metadata, created_at, updated_at) VALUES ('idle', '{}', now(), now())`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "a freshly reported queue to count as served", unserved())
	if _, err := db.Exec(ctx, `INSERT INTO river_job (args, kind, max_attempts, queue, state, scheduled_at, metadata)
		VALUES ('{}', 'idle', 1, 'idle', 'available', now() - interval '2 minutes', '{}')`); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the queue whose job waits unworked to be unserved", unserved("idle"))

	// A client of "idle" whose workers lack belfry's: the occurrence it
	// fetches bounces, and is reported.
	other := river.NewWorkers()
	river.AddWorker(other, river.WorkFunc(func(context.Context, *river.Job[riverTick]) error { return nil }))
	startClient("idle", other)
	if _, err := rt.Trigger(ctx, "idle", ""); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 15*time.Second, "the bounced occurrence to be reported", func() bool {
		ms, err := rt.Diagnostics().Misrouted(ctx)
		return err == nil && len(ms) == 1 && ms[0].Schedule == "idle" && ms[0].Queue == "idle" && ms[0].Replica == "client-idle" && ms[0].Namespace == "ns"
	})
}

type riverTick struct{}

func (riverTick) Kind() string { return "river_tick" }

package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/postgres"
)

// 10,000 schedules due at the same second, planned by a runtime on the
// engine: every slot is enqueued once, and the test reports how long after
// the slot the last enqueue committed.
func TestTenThousandSchedulesDueAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := migratedDB(t)
	const n = 10000
	slot := time.Now().Add(6 * time.Second).Truncate(time.Second).UTC()
	expr := fmt.Sprintf("%d %d %d * * *", slot.Second(), slot.Minute(), slot.Hour())
	scheds := make([]registry.Schedule, n)
	for i := range scheds {
		scheds[i] = registry.Schedule{Name: fmt.Sprintf("job-%05d", i), Expr: expr,
			Handler: func(context.Context, registry.Occurrence) error { return nil }}
	}
	reg, err := registry.New(scheds...)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := postgres.New(postgres.Config{Pool: db})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := core.New(reg, core.Options{Engine: eng, Namespace: "spike", Replica: "solo", LeaseTTL: 5 * time.Second, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	runRuntime(t, rt)
	waitUntil(t, 30*time.Second, "every slot to be enqueued", func() bool {
		return count(t, db, "SELECT count(*) FROM belfry_slot WHERE slot = $1", slot) == n
	})
	var lastMS int64
	if err := db.QueryRow(ctx, "SELECT belfry_ms(max(inserted_at)) FROM belfry_slot WHERE slot = $1", slot).Scan(&lastMS); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d schedules due at %s: the last enqueue's transaction began %s after the slot", n, slot.Format(time.TimeOnly),
		time.UnixMilli(lastMS).Sub(slot))
	if jobs := count(t, db, "SELECT count(*) FROM river_job"); jobs != n {
		t.Errorf("%d River jobs for %d slots", jobs, n)
	}
	// A slot row's inserted_at is its transaction's start: the engine's
	// batches (EnqueueBatches) go in a transaction each, a few of them
	// partial where the leader's dispatch steps end.
	size, _ := eng.EnqueueBatches()
	if txs := count(t, db, "SELECT count(DISTINCT inserted_at) FROM belfry_slot WHERE slot = $1", slot); txs > 2*n/size {
		t.Errorf("%d slots went in in %d transactions; want at most %d, batches of up to %d", n, txs, 2*n/size, size)
	}
}

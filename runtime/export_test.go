package runtime

import (
	"context"
	"encoding/json"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/redis/go-redis/v9"
)

// Hooks into the lease and the fenced writes for tests that play a crashed
// or paused holder, which a running Runtime never does on purpose.

func (r *Runtime) AcquireLease(ctx context.Context) (time.Duration, error) {
	return r.lease.acquire(ctx)
}

func (r *Runtime) RenewLease(ctx context.Context) error {
	_, err := r.lease.renew(ctx, r.lease.holding())
	return err
}

func (r *Runtime) LeaseValue() (string, bool) { return r.lease.current() }

func (r *Runtime) ReleaseLease(ctx context.Context) { r.lease.release(ctx) }

// CommitCursor advances one schedule's cursor through the fenced script as
// the holder of leaseValue would.
func (r *Runtime) CommitCursor(ctx context.Context, leaseValue, name string, cursor time.Time) (bool, error) {
	batch, _ := json.Marshal([]commitItem{{Name: name, Cursor: cursor.Unix(), Recs: []commitRec{}, Counts: map[string]int64{}}})
	ok, err := commitScript.Run(ctx, r.rdb, []string{r.keys.lease}, leaseValue, r.keys.prefix,
		r.opts.HistoryLimit, 60, batch).Int()
	return ok == 1, err
}

// Enqueue enqueues a scheduled occurrence as the scheduler does, without
// any lease check: what a zombie that slipped past its check would do.
func (r *Runtime) Enqueue(ctx context.Context, occ registry.Occurrence) error {
	s, _ := r.reg.Lookup(occ.Schedule)
	_, err := r.enqueue(ctx, s, occ, r.retention(s))
	return err
}

func (r *Runtime) CursorsKey() string { return r.keys.cursors }

// CommitScriptHash identifies the fenced commit in a go-redis hook.
func CommitScriptHash() string { return commitScript.Hash() }

// LapseTrust ends the holder's trust window now, as a stall (GC pause,
// SIGSTOP) that outlasts it does, while its key lives on in Redis.
func (r *Runtime) LapseTrust() {
	r.lease.mu.Lock()
	r.lease.trustedUntil = time.Now().Add(-time.Millisecond)
	r.lease.mu.Unlock()
}

// Scheduling reports whether the scheduling loop holds leader state.
func (r *Runtime) Scheduling() bool { return r.scheduling.Load() }

// NewPipeliningClient is the client the runtime's asynq Client enqueues
// through.
func NewPipeliningClient(c redis.UniversalClient) redis.UniversalClient {
	return newPipeliningClient(c)
}

// PipelineWaiting counts the calls waiting for a pipeline slot.
func PipelineWaiting(c redis.UniversalClient) int {
	pc := c.(*pipeliningClient)
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return len(pc.waiting)
}

// RedisClient is the client the runtime uses, shared or its own.
func (r *Runtime) RedisClient() redis.UniversalClient { return r.rdb }

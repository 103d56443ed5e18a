// Package redisengine is belfry's Redis/asynq engine: the lease, the store
// and its scripts, the pipelined fenced enqueue of asynq tasks and asynq's
// Inspector, behind engine.Engine. What compensates for Redis not being a
// durable database is the engine's too: start marks (start.go, behind
// engine.Starts), INFO checks (settings.go, engine.Settings) and namespace
// probing (namespace.go, engine.Namespaces) and lost-write epochs
// (lostwrites.go, engine.Losses).
package redisengine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/lease"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// Engine is the Redis engine of one namespace. Its Store's and Lease's
// methods are its own (Election, Records, Pauses, Members, Counters,
// Health); enqueues, task state and the cluster's heartbeats are below.
type Engine struct {
	*store.Store
	*lease.Lease
	AsynqDeliveries
	// Client is the Redis client every part uses.
	Client redis.UniversalClient
	// Pipeline sends the fenced enqueues.
	Pipeline *pipeline.Client
	// Inspector reads asynq's tasks and servers.
	Inspector *asynq.Inspector

	acks     pipeline.Acks // what a start mark waits for
	leaseTTL time.Duration // how long a mark lasts unless renewed, at most
	log      *slog.Logger
	clock    clock.Clock
	data     dataWatch // what this replica saw of the store (lostwrites.go)

	onCall atomic.Pointer[func(error)] // Watch's

	// reloadedAt is when reloadClusterAfter last reloaded the cluster's
	// slot map (unix ns).
	reloadedAt atomic.Int64

	// layoutDone is set once the namespace's state is known to be in the
	// hash-tagged layout; legacyHolder is the older version's lease last
	// logged as waited for (layout.go).
	layoutDone   atomic.Bool
	legacyHolder atomic.Pointer[string]

	cfg Config // what it was built from, for the queue diagnostics
}

var (
	_ engine.Engine   = (*Engine)(nil)
	_ engine.Canceler = (*Engine)(nil)
)

// Config is what an Engine is built from.
type Config struct {
	Client    redis.UniversalClient
	Namespace string
	// HistoryLimit is the records kept per schedule; Limits the schedules
	// that keep fewer, by name.
	HistoryLimit int
	Limits       map[string]int
	// RecordTTL bounds how long a record outlives its index entry.
	RecordTTL time.Duration
	// Acks, when on, makes fenced writes count only once replicas
	// acknowledge them.
	Acks pipeline.Acks
	// The lease's settings and callbacks (lease.Config).
	Replica  string
	LeaseTTL time.Duration
	Log      *slog.Logger
	Clock    clock.Clock
	MayLead  func(context.Context) error
	// Registry and Service are the runtime's schedules and its registry's
	// identity, for the queue diagnostics (queues.go); nil and "" say
	// nothing of the queues.
	Registry *registry.Registry
	Service  string
	// URL is the Redis URL the client was made from, if any: Redact keeps
	// its secrets out of messages.
	URL string
}

// New builds the engine of cfg.Namespace on cfg.Client. It makes no call
// to Redis.
func New(cfg Config) *Engine {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	s := store.New(cfg.Client, cfg.Namespace, cfg.HistoryLimit, cfg.RecordTTL)
	s.Acks, s.Limits = cfg.Acks, cfg.Limits
	p := pipeline.NewClient(cfg.Client)
	p.Acks = cfg.Acks
	e := &Engine{Store: s, Client: cfg.Client, Pipeline: p, Inspector: asynq.NewInspectorFromRedisClient(cfg.Client),
		acks: cfg.Acks, leaseTTL: cfg.LeaseTTL, log: cmp.Or(cfg.Log, slog.Default()), clock: cfg.Clock, cfg: cfg}
	e.Lease = lease.New(lease.Config{Redis: cfg.Client, Keys: s.Keys, Replica: cfg.Replica, TTL: cfg.LeaseTTL,
		Log: cfg.Log, OnRedis: e.called, Clock: cfg.Clock, MayLead: cfg.MayLead, OnHolder: e.seeHolder,
		OnHeld: e.seeHeld, Acks: cfg.Acks})
	return e
}

// Watch has the lease's calls reported to onCall.
func (e *Engine) Watch(onCall func(error)) { e.onCall.Store(&onCall) }

// called reports a lease call's outcome to Watch's function, if any.
func (e *Engine) called(err error) {
	e.reloadClusterAfter(err)
	if f := e.onCall.Load(); f != nil {
		(*f)(err)
	}
}

// Cluster reports whether the engine's client is a Redis Cluster client,
// whose scripts must each touch one slot.
func (e *Engine) Cluster() bool {
	_, cluster := e.Client.(*redis.ClusterClient)
	return cluster
}

// EnqueueAll inserts the items' tasks as asynq's Client would, pipelined
// with whatever else is sent at the moment (pipeline.Client.EnqueueAll),
// each raising its schedule's cursor mark (and last ID) in the queue's
// slot in the same script (store.QueueKeys), and under fence the queue's
// fence (and on a single Redis the lease key) compared first in that
// script.
func (e *Engine) EnqueueAll(ctx context.Context, fence *engine.Fence, items []engine.Enqueue) []engine.Result {
	sent := make([]pipeline.Item, len(items))
	var marks []pipeline.Mark
	for i := range items {
		it := &items[i]
		sent[i].Task = it.Task
		c := it.Cursor
		if c.Schedule == "" {
			continue
		}
		if marks == nil {
			marks = make([]pipeline.Mark, len(items))
		}
		qk := store.NewQueueKeys(e.cfg.Namespace, it.Task.Queue)
		marks[i] = pipeline.Mark{Hash: qk.Cursors, Field: c.Schedule, Value: c.Slot}
		if c.LastID != "" {
			marks[i].Also, marks[i].AlsoValue = qk.LastID, c.LastID
		}
		sent[i].Mark = &marks[i]
	}
	if fence == nil {
		return e.Pipeline.EnqueueAll(ctx, sent)
	}
	f := &pipeline.Fence{Namespace: e.cfg.Namespace, Value: fence.Term}
	if !e.Cluster() {
		f.Key = e.Keys.Lease
	}
	ctx = pipeline.WithFence(ctx, f)
	results := e.Pipeline.EnqueueAll(ctx, sent)
	for i := range results {
		if results[i].Err != nil {
			e.reloadClusterAfter(results[i].Err)
			break
		}
	}
	// The pipeline sends the tasks of every caller whose fence has the
	// same term together, under the first caller's fence: each item
	// refused is judged here, so that every caller's fence is rejected.
	for i := range results {
		if errors.Is(results[i].Err, pipeline.ErrFenced) {
			fence.Reject()
			results[i].Err = errFencedOut
		}
	}
	return results
}

// errFencedOut is an enqueue refused because the lease moved on: the
// engine's ErrNotLeader, and the pipeline's ErrFenced for its own tests.
var errFencedOut = fmt.Errorf("%w: %w", engine.ErrNotLeader, pipeline.ErrFenced)

// TaskRunning asks asynq's Inspector for the task's state. A task that
// completed by handing a checkpointed run on to a continuation task
// (ContinuationID) runs on as long as its newest continuation does, and
// so does one that asynq has deleted since (its retention over) while a
// continuation runs.
func (e *Engine) TaskRunning(ctx context.Context, queue, id string) (bool, error) {
	info, err := e.taskInfo(ctx, queue, id)
	if err != nil {
		return false, err
	}
	if info != nil && info.State != asynq.TaskStateCompleted {
		return info.State != asynq.TaskStateArchived, nil
	}
	cont, err := e.liveContinuation(ctx, queue, id)
	return cont != nil, err
}

// CancelTask cancels the task for overlap=replace: a running one through
// asynq's CancelProcessing (its handler's ctx ends; asynq then moves it to
// retry, and the core's middleware makes that delivery return at once),
// one waiting (pending, scheduled, retry) by deleting it. A task that
// handed its run on to a continuation has that one cancelled.
func (e *Engine) CancelTask(ctx context.Context, queue, id string) error {
	info, err := e.taskInfo(ctx, queue, id)
	if err != nil {
		return err
	}
	if info == nil || info.State == asynq.TaskStateCompleted {
		if info, err = e.liveContinuation(ctx, queue, id); info == nil || err != nil {
			return err
		}
	}
	_, err = engine.Obey(ctx, func(context.Context) (struct{}, error) {
		if info.State == asynq.TaskStateActive {
			return struct{}{}, e.Inspector.CancelProcessing(info.ID)
		}
		if info.State != asynq.TaskStatePending && info.State != asynq.TaskStateScheduled && info.State != asynq.TaskStateRetry {
			return struct{}{}, nil
		}
		err := e.Inspector.DeleteTask(queue, info.ID)
		if errors.Is(err, asynq.ErrTaskNotFound) {
			return struct{}{}, nil
		}
		if err != nil {
			// A worker may have taken it between the look and the delete.
			if now, ierr := e.Inspector.GetTaskInfo(queue, info.ID); ierr == nil && now.State == asynq.TaskStateActive {
				return struct{}{}, e.Inspector.CancelProcessing(info.ID)
			}
		}
		return struct{}{}, err
	})
	return err
}

// ReplacedBy reads the record's replaced_by field.
func (e *Engine) ReplacedBy(ctx context.Context, id string) (string, error) {
	by, err := e.Client.HGet(ctx, e.Keys.Occurrence(id), "replaced_by").Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return by, err
}

// ContinuationID is the task ID of the nth continuation (from 1) of the
// occurrence whose task ID is id.
func ContinuationID(id string, n int) string { return id + continuationSep + strconv.Itoa(n) }

// continuationSep separates an occurrence's task ID from its
// continuation's number.
const continuationSep = ":continue:"

// BaseTaskID is the occurrence's task ID of a continuation's task ID; any
// other ID is its own.
func BaseTaskID(id string) string {
	base, _, _ := strings.Cut(id, continuationSep)
	return base
}

// liveContinuation is the newest continuation task of the occurrence
// whose task ID is id when that one is not over (completed or archived),
// nil otherwise. Continuations are numbered 1, 2, ... each enqueued as
// the one before it ends, and each kept for continuationRetention after:
// only the oldest may be gone. The search starts at the generation of
// the occurrence's progress (one claim per task at least, so a number
// that far is taken, or was), or at 1 when it has none of its own: with
// resume=next its tasks may be finishing an earlier occurrence's work,
// whose progress they claim. From the newest found there, it goes up
// while the next number exists.
func (e *Engine) liveContinuation(ctx context.Context, queue, id string) (*asynq.TaskInfo, error) {
	cps, ok, err := e.Progresses(ctx, []string{id})
	if err != nil || (ok[0] && cps[0].Done) {
		return nil, err
	}
	from := 1
	if ok[0] {
		from = max(int(cps[0].Gen), 1)
	}
	var newest *asynq.TaskInfo
	n := from
	for ; n >= 1 && newest == nil; n-- {
		if newest, err = e.taskInfo(ctx, queue, ContinuationID(id, n)); err != nil {
			return nil, err
		}
	}
	if newest == nil {
		return nil, nil
	}
	for n += 2; ; n++ {
		next, err := e.taskInfo(ctx, queue, ContinuationID(id, n))
		if err != nil {
			return nil, err
		}
		if next == nil {
			break
		}
		newest = next
	}
	if newest.State == asynq.TaskStateCompleted || newest.State == asynq.TaskStateArchived {
		return nil, nil
	}
	return newest, nil
}

// TaskExists asks asynq's Inspector for the task.
func (e *Engine) TaskExists(ctx context.Context, queue, id string) (bool, error) {
	info, err := e.taskInfo(ctx, queue, id)
	return info != nil, err
}

// taskInfo is the task's asynq info, nil with no error when asynq has
// no such task (or queue). The Inspector takes no context; the leader
// asks on its way to an enqueue, so the answer is waited for only until
// ctx ends.
func (e *Engine) taskInfo(ctx context.Context, queue, id string) (*asynq.TaskInfo, error) {
	info, err := engine.Obey(ctx, func(context.Context) (*asynq.TaskInfo, error) { return e.Inspector.GetTaskInfo(queue, id) })
	if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
		return nil, nil
	}
	return info, err
}

// Holder reads the lease key and the heartbeats in one round trip.
func (e *Engine) Holder(ctx context.Context) (engine.Holder, error) {
	return lease.Observe(ctx, e.Client, e.Keys, e.HeartbeatStale())
}

package redisengine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/lease"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/redis/go-redis/v9"
)

var _ engine.TermStart = (*Engine)(nil)

// Keys in two places: the namespace's own (store.Keys, one slot) and what
// an enqueue writes in its queue's slot beside the task (store.QueueKeys:
// the queue's fence, the cursor marks). The readers below put them
// together.

// queueOf is the queue a schedule's tasks go to, "" for one the registry
// does not have (or a family's: its members carry no mark).
func (e *Engine) queueOf(name string) string {
	if e.cfg.Registry == nil {
		return ""
	}
	s, ok := e.cfg.Registry.Lookup(name)
	if !ok || s.Family() {
		return ""
	}
	return s.Queue
}

// Cursors reads the namespace's cursors and raises each to its mark in its
// queue's slot: an enqueue raises the mark with the task (one script),
// and the namespace's cursor only at the commit after it. A schedule
// with no cursor of its own has none: it was never scheduled, or was
// forgotten (a mark it left starts nothing).
func (e *Engine) Cursors(ctx context.Context, names []string) (cursors []int64, ok []bool, err error) {
	cursors, ok, err = e.Store.Cursors(ctx, names)
	if err != nil {
		return nil, nil, err
	}
	byQueue := map[string][]int{}
	for i, name := range names {
		if q := e.queueOf(name); q != "" && ok[i] {
			byQueue[q] = append(byQueue[q], i)
		}
	}
	if len(byQueue) == 0 {
		return cursors, ok, nil
	}
	type read struct {
		at  []int
		cmd *redis.SliceCmd
	}
	var reads []read
	_, err = e.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for q, at := range byQueue {
			for start := 0; start < len(at); start += store.Chunk {
				part := at[start:min(start+store.Chunk, len(at))]
				fields := make([]string, len(part))
				for k, i := range part {
					fields[k] = names[i]
				}
				reads = append(reads, read{at: part, cmd: p.HMGet(ctx, store.NewQueueKeys(e.cfg.Namespace, q).Cursors, fields...)})
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	for _, r := range reads {
		for k, v := range r.cmd.Val() {
			if s, isStr := v.(string); isStr {
				if mark, perr := strconv.ParseInt(s, 10, 64); perr == nil && mark > cursors[r.at[k]] {
					cursors[r.at[k]] = mark
				}
			}
		}
	}
	return cursors, ok, nil
}

// LastID is the schedule's last enqueued occurrence: its mark's in the
// queue's slot when that mark is not behind the namespace's cursor (the
// commit after the enqueue has not landed, or it wrote the same ID), else
// the namespace's. At the cursor counts: overlap=buffer_one enqueues its
// waiting slot with a mark at the cursor that the buffering commit set,
// whose last ID names the occurrence waited behind.
func (e *Engine) LastID(ctx context.Context, name string) (string, error) {
	q := e.queueOf(name)
	if q == "" {
		return e.Store.LastID(ctx, name)
	}
	qk := store.NewQueueKeys(e.cfg.Namespace, q)
	var cursor, mark, markID, id *redis.StringCmd
	_, err := e.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
		cursor, id = p.HGet(ctx, e.Keys.Cursors, name), p.HGet(ctx, e.Keys.LastID, name)
		mark, markID = p.HGet(ctx, qk.Cursors, name), p.HGet(ctx, qk.LastID, name)
		return nil
	})
	if err != nil && err != redis.Nil {
		return "", err
	}
	ns, _ := strconv.ParseInt(cursor.Val(), 10, 64)
	if m, perr := strconv.ParseInt(mark.Val(), 10, 64); perr == nil && m >= ns && markID.Val() != "" {
		return markID.Val(), nil
	}
	return id.Val(), nil
}

// StartTerm moves the namespace's state from the key layout before hash
// tags, if it is there (migrateLegacyLayout), then raises the queues'
// fences (raiseFences).
func (e *Engine) StartTerm(ctx context.Context, term string) error {
	if err := e.migrateLegacyLayout(ctx, term); err != nil {
		return err
	}
	return e.raiseFences(ctx, term)
}

// raiseFences raises the fence of every queue of the registry to term
// before the holder reads its cursors (pipeline.Fence): an older term's
// enqueue in a queue lands before, its mark read with the cursors, or is
// refused. A newer term found in a queue means term is over
// (engine.ErrNotLeader).
func (e *Engine) raiseFences(ctx context.Context, term string) error {
	qs := e.queues()
	if len(qs) == 0 {
		return nil
	}
	newer, err := pipeline.RaiseFences(ctx, e.Client, e.cfg.Namespace, term, qs)
	if err != nil || len(newer) == 0 {
		return err
	}
	// While term holds the lease, a newer term in a queue is one whose
	// token Redis handed out before it lost the token counter (a failover
	// that lost writes, which the core reports as a loss): the counter
	// goes past it, so that the next term is the newest everywhere, and
	// this term takes each such fence over, if it still holds the newer
	// value it was read with.
	seen := make([]string, len(newer))
	var highest int64
	for i, q := range newer {
		v, err := e.Client.Get(ctx, pipeline.QueueFenceKey(e.cfg.Namespace, q)).Result()
		if err != nil && err != redis.Nil {
			return err
		}
		seen[i] = v
		if _, token := lease.ParseValue(v); token > highest {
			highest = token
		}
	}
	held, err := raiseTokenScript.Run(ctx, e.Client, []string{e.Keys.Lease, e.Keys.Token}, term, highest).Int()
	if err != nil {
		return err
	}
	if held == 0 {
		return fmt.Errorf("%w: a newer term enqueued in queue %q", engine.ErrNotLeader, newer[0])
	}
	for i, q := range newer {
		took, err := takeFenceScript.Run(ctx, e.Client, []string{pipeline.QueueFenceKey(e.cfg.Namespace, q)}, seen[i], term).Int()
		if err != nil {
			return err
		}
		if took == 0 {
			return fmt.Errorf("%w: a newer term enqueued in queue %q", engine.ErrNotLeader, q)
		}
	}
	e.log.Warn("queues' fences held a newer term than this lease's: the fencing token went back (Redis lost writes); taken over",
		"queues", newer, "fence_token", highest, "lease", term)
	return nil
}

// raiseTokenScript raises the fencing token counter to at least a token
// found in a queue's fence, while the lease holds the term that found it.
//
//	KEYS[1] lease, KEYS[2] token counter
//	ARGV[1] lease value, ARGV[2] token
//	returns 1 if the lease holds the term, 0 if not.
var raiseTokenScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if (tonumber(redis.call('GET', KEYS[2])) or 0) < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2])
end
return 1
`)

// takeFenceScript sets a queue's fence to a term if it still holds the
// value read before (compare-and-set).
//
//	KEYS[1] the fence
//	ARGV[1] the value read, ARGV[2] the term
//	returns 1 if set.
var takeFenceScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1]) or ''
if cur ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
return 1
`)

// reloadEvery bounds how often reloadClusterAfter reloads the slot map.
const reloadEvery = 500 * time.Millisecond

// reloadClusterAfter has a cluster client reload its map of slots to
// masters after a call failed without a reply from Redis (a refused or
// broken connection, a timeout). go-redis reloads it on a MOVED or ASK,
// or once a minute: a master that died answers neither, and until the
// reload every call for its slots goes on to the dead address, long after
// its replica took over. The asynq workers sharing the client find the
// new master with it.
func (e *Engine) reloadClusterAfter(err error) {
	cc, ok := e.Client.(*redis.ClusterClient)
	var reply redis.Error
	if !ok || err == nil || errors.As(err, &reply) || errors.Is(err, context.Canceled) {
		return
	}
	now := time.Now().UnixNano()
	last := e.reloadedAt.Load()
	if now-last < int64(reloadEvery) || !e.reloadedAt.CompareAndSwap(last, now) {
		return
	}
	cc.ReloadState(context.Background()) // in the background; a failure leaves the old map, and the next error tries again
}

// Acknowledged waits for the replicas to have every write before it
// (store.Acknowledged). On Redis Cluster those writes may be on any master
// (a manual run's task in its queue's slot, its record in the
// namespace's): each master WAITs too. Redis 7 counts its replicas up to
// the master's offset at the WAIT, every connection's writes included.
func (e *Engine) Acknowledged(ctx context.Context) error {
	if err := e.Store.Acknowledged(ctx); err != nil || !e.acks.On() {
		return err
	}
	cc, ok := e.Client.(*redis.ClusterClient)
	if !ok {
		return nil
	}
	return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		conn := node.Conn()
		defer conn.Close()
		return e.acks.Wait(ctx, conn)
	})
}

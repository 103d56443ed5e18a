package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/redis/go-redis/v9"
)

// ErrNotAcked is the error of a write that Redis ran but not enough
// replicas acknowledged in time (engine.ErrNotAcked).
var ErrNotAcked = engine.ErrNotAcked

// Acks is how many replicas must acknowledge a write before it counts.
// The zero value waits for none.
type Acks struct {
	Replicas int
	Timeout  time.Duration
}

// On reports whether writes wait for replicas.
func (a Acks) On() bool { return a.Replicas > 0 }

// Wait sends WAIT on c, which must be the connection the write went
// through: Redis counts the replicas that have this connection's last
// write. A server that is not a primary (a demoted one) answers with an
// error, which fails the write too.
func (a Acks) Wait(ctx context.Context, c waiter) error {
	if !a.On() {
		return nil
	}
	return a.check(c.Wait(ctx, a.Replicas, a.Timeout).Result())
}

// check is Wait's verdict on a WAIT's reply.
func (a Acks) check(n int64, err error) error {
	if err != nil {
		return fmt.Errorf("%w: WAIT: %w", ErrNotAcked, err)
	}
	if n < int64(a.Replicas) {
		return fmt.Errorf("%w: %d of %d replicas within %s", ErrNotAcked, n, a.Replicas, a.Timeout)
	}
	return nil
}

// Barrier writes key (for life) and WAITs on the same connection, so the
// acknowledgement covers every write Redis ran before it, on any
// connection (replication is in order): for writes that cannot carry a
// WAIT of their own, such as asynq's enqueues. The write gives Redis 6.2,
// which waits for the connection's last write, something to count. At
// once when a is off; ErrNotAcked when too few replicas answer.
func (a Acks) Barrier(ctx context.Context, rdb redis.UniversalClient, key string, life time.Duration) error {
	if !a.On() {
		return nil
	}
	ran := false
	err := rdb.Watch(ctx, func(tx *redis.Tx) error {
		ran = true
		if err := tx.Set(ctx, key, "1", life).Err(); err != nil {
			return err
		}
		return a.Wait(ctx, tx)
	}, Pin(rdb, []string{key})...)
	if !ran {
		return unpinned(rdb, err)
	}
	return err
}

// waiter is a single connection: a *redis.Tx or *redis.Conn.
type waiter interface {
	Wait(ctx context.Context, numReplicas int, timeout time.Duration) *redis.IntCmd
}

// Run runs script on one connection of rdb and then, if a is on, WAIT on
// that connection, so the acknowledgement covers exactly this write (and,
// replication being in order, every write before it). A reply that is not
// acknowledged comes back as the command's error, ErrNotAcked.
//
// On Redis Cluster the script and its WAIT go together to the master of
// the first key's slot (onKeysNode). Elsewhere the connection is taken
// with a WATCH of no keys, the one way to hold a single connection
// through any UniversalClient; it sends no WATCH.
func (a Acks) Run(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	if !a.On() {
		return script.Run(ctx, rdb, keys, args...)
	}
	cmd, notAcked := a.exec(ctx, rdb, keys, func(c redis.Cmdable, pipelined bool) *redis.Cmd {
		if pipelined {
			return script.EvalSha(ctx, c, keys, args...) // a NOSCRIPT is sent again pinned, which loads it
		}
		return script.Run(ctx, c, keys, args...)
	})
	if notAcked != nil {
		cmd.SetErr(notAcked)
	}
	return cmd
}

// exec sends a write over keys on one connection of rdb and WAITs on that
// connection: on Redis Cluster the write and its WAIT in one round trip
// to the master of the first key's slot (onKeysNode; pipelined is true),
// else, or when that node ran nothing, on a connection pinned by a WATCH
// (Pin). cmd is never nil: a write that never ran carries why (unpinned).
// notAcked is the WAIT's verdict, nil when the write failed (cmd's error).
func (a Acks) exec(ctx context.Context, rdb redis.UniversalClient, keys []string, send func(c redis.Cmdable, pipelined bool) *redis.Cmd) (cmd *redis.Cmd, notAcked error) {
	cmd, notAcked, sent := a.onKeysNode(ctx, rdb, keys, func(p redis.Pipeliner) *redis.Cmd { return send(p, true) })
	if sent {
		return cmd, notAcked
	}
	pinned := rdb.Watch(ctx, func(tx *redis.Tx) error {
		if cmd = send(tx, false); cmd.Err() == nil {
			notAcked = a.Wait(ctx, tx)
		}
		return nil
	}, Pin(rdb, keys)...)
	if cmd == nil {
		// Watch never ran the function: no connection, or on Redis
		// Cluster no node would take the pinning WATCH.
		cmd = redis.NewCmd(ctx)
		cmd.SetErr(unpinned(rdb, pinned))
	}
	return cmd, notAcked
}

// ErrSlotMoving is a write on Redis Cluster that never ran: the nodes
// sent the client from one to another (MOVED, ASK) until it gave up, as
// they do while the key's slot moves between masters (a resharding) or
// its master changes (a failover). It is retried like an outage, and is
// not one: the cluster answers.
var ErrSlotMoving = errors.New("redis cluster: the slot is moving between masters (redirected at each try)")

// unpinned is the error of a write whose pinned connection (Pin) never
// ran it: Watch's own error, or, when Watch gave none, ErrSlotMoving on a
// cluster client (go-redis's gives up following redirects without an
// error) and errNoReply otherwise. Never nil: nothing was written.
func unpinned(rdb redis.UniversalClient, err error) error {
	if err != nil {
		return err
	}
	if _, cluster := rdb.(*redis.ClusterClient); cluster {
		return ErrSlotMoving
	}
	return errNoReply
}

// onKeysNode sends the script fill queues and a WAIT in one pipeline to the
// master that serves keys[0] on Redis Cluster: one round trip, where a
// WATCH to pin the connection (Pin) costs a WATCH and an UNWATCH besides.
// The WAIT is read on the script's connection, so it counts the replicas
// that have the script's writes; notAcked is its verdict (nil when the
// script failed, which is cmd's error).
//
// ok is false when rdb is not a cluster client, when the WAIT's timeout
// does not fit the client's read timeout, or when the node ran nothing:
// the slot moved (MOVED, ASK), is being migrated with keys on both sides
// (TRYAGAIN) or is not served (CLUSTERDOWN), the node is a replica now
// (READONLY) or still loading its data (LOADING), it lacks the script
// (NOSCRIPT, for an EVALSHA), or the client closed its client of the node
// (a reloaded slot map dropped it). The caller then sends the script as it would
// without this, through the client, which follows redirects, loads
// scripts and retries; a MOVED or READONLY reloads the client's slot map
// first, so that later calls go to the slot's master.
func (a Acks) onKeysNode(ctx context.Context, rdb redis.UniversalClient, keys []string, fill func(redis.Pipeliner) *redis.Cmd) (cmd *redis.Cmd, notAcked error, ok bool) {
	cc, cluster := rdb.(*redis.ClusterClient)
	if !cluster || len(keys) == 0 {
		return nil, nil, false
	}
	node, err := cc.MasterForKey(ctx, keys[0])
	if err != nil {
		return nil, nil, false
	}
	// A pipeline's replies are read within the client's read timeout,
	// where a lone WAIT's is read within its own: the WAIT may take all
	// of its timeout, and the script and the trip as long again.
	if rt := node.Options().ReadTimeout; rt > 0 && 2*a.Timeout > rt {
		return nil, nil, false
	}
	// The pipeline goes on one connection of the node's, not through its
	// pool: a pooled pipeline that fails while its replies are read is
	// sent again in full (the client's MaxRetries), the script with it,
	// and a write must run once. A connection gone bad is not used again,
	// so nothing is sent twice.
	conn := node.Conn()
	defer conn.Close()
	wait := redis.NewIntCmd(ctx, "wait", a.Replicas, a.Timeout.Milliseconds())
	_, _ = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
		cmd = fill(p)
		return p.Process(ctx, wait)
	})
	if err := cmd.Err(); err != nil {
		var reply redis.Error
		if cmd.Val() != nil && !errors.As(err, &reply) {
			// The script's reply was read, then the connection failed on
			// the WAIT's (go-redis sets that error on every command of
			// the pipeline): the write ran, and no replica is known to
			// have it, as when the WAIT fails on the pinned path.
			cmd.SetErr(nil)
			return cmd, a.check(0, wait.Err()), true
		}
		if errors.Is(err, redis.ErrClosed) { // a node client the slot map dropped: nothing was sent
			return nil, nil, false
		}
		if redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "READONLY") {
			cc.ReloadState(ctx)
		}
		for _, nothingRan := range []string{"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "LOADING", "NOSCRIPT"} {
			if redis.HasErrorPrefix(err, nothingRan) {
				return nil, nil, false
			}
		}
		return cmd, nil, true
	}
	return cmd, a.check(wait.Result()), true
}

// Pin is what to WATCH to hold one connection of rdb for a command on
// keys: nothing on a single Redis (a WATCH of no keys sends none), the
// first key on Redis Cluster, whose client holds a connection only to the
// master of a key's slot.
func Pin(rdb redis.UniversalClient, keys []string) []string {
	if _, cluster := rdb.(*redis.ClusterClient); cluster && len(keys) > 0 {
		return keys[:1]
	}
	return nil
}

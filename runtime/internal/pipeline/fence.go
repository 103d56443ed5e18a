package pipeline

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrFenced is the error of a fenced command that Redis did not run: the
// lease key no longer held the fence's value.
var ErrFenced = errors.New("fenced out: the lease is no longer this replica's")

// Fence makes the scripts sent with its context conditional on a key (the
// scheduler lease) holding a value (this holder's), checked by Redis in
// the same transaction that runs them: WATCH key, GET key, and only if it
// matches MULTI, the scripts, EXEC. A write that reaches Redis after its
// sender lost the lease (a connection held by a middlebox, a pause between
// the sender's own check and the write) is refused however late it arrives,
// and a change of the key between the GET and the EXEC (a takeover, or a
// renewal's PEXPIRE) aborts the EXEC, which is then tried again.
type Fence struct {
	Key, Value string
	rejected   atomic.Bool
}

// Rejected reports whether Redis refused a command of this fence because
// the key held another value.
func (f *Fence) Rejected() bool { return f.rejected.Load() }

type fenceKey struct{}

// WithFence returns a context whose scripts the Client sends under f.
func WithFence(ctx context.Context, f *Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

func fenceOf(ctx context.Context) *Fence {
	f, _ := ctx.Value(fenceKey{}).(*Fence)
	return f
}

// fencedTries bounds the EXECs aborted by a change of the key: a renewal
// lands between the GET and the EXEC once in a while (a holder renews every
// TTL/3), and a takeover makes the next GET fail the fence. Behind a slow
// link the window between the two is one round trip, and a renewal every
// two round trips aborts about half the tries.
const fencedTries = 20

// sendFenced runs calls in one transaction under f, each call's command
// getting its own reply or error. WATCH and GET go in one round trip, so
// the window in which the holder's own renewal (a PEXPIRE of the watched
// key) aborts the EXEC is one round trip, not two: behind a link with
// second-long replies, two round trips outlast the renewal period and
// every try would abort. An aborted try waits a random part of its own
// duration before the next: both the tries and the renewals are paced by
// the link's round trip, and without the jitter they lock in phase, each
// try aborted by the renewal one round trip after its WATCH.
func (c *Client) sendFenced(ctx context.Context, f *Fence, calls []*pipelinedCall) error {
	var err error
	var took time.Duration
	for try := range fencedTries {
		if try > 0 && !jitter(ctx, took) {
			return ctx.Err()
		}
		began := time.Now()
		err = c.UniversalClient.Watch(ctx, func(tx *redis.Tx) error {
			var get *redis.StringCmd
			if _, err := tx.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.Do(ctx, "WATCH", f.Key)
				get = p.Get(ctx, f.Key)
				return nil
			}); err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			if v := get.Val(); v != f.Value {
				// No EXEC will end this WATCH: end it, or it stays armed
				// on the pooled connection and aborts a stranger's EXEC.
				tx.Unwatch(ctx)
				f.rejected.Store(true)
				for _, call := range calls {
					call.cmd = call.fail(ErrFenced)
				}
				return nil
			}
			_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				for _, call := range calls {
					if call.body != "" {
						call.cmd = p.Eval(ctx, call.body, call.keys, call.args...)
					} else {
						call.cmd = p.EvalSha(ctx, call.sha, call.keys, call.args...)
					}
				}
				queueMarks(ctx, p, calls)
				if c.Acks.On() {
					// Redis 7 WAITs for the primary's offset at the time
					// of the WAIT; Redis 6.2 for the connection's last
					// write only, so a script that writes nothing (a task
					// ID conflict: the task an earlier, unacknowledged
					// attempt inserted through another connection) would
					// be "acknowledged" at once. This write makes the
					// acknowledgement cover what is already there on both.
					p.Set(ctx, f.Key+ackedSuffix, f.Value, ackedLife)
				}
				return nil
			})
			if errors.Is(err, redis.TxFailedErr) {
				return err
			}
			c.waitAcked(ctx, tx, calls)
			return nil // a command's own error (NOSCRIPT) stays in its reply
		})
		if !errors.Is(err, redis.TxFailedErr) {
			return err
		}
		took = time.Since(began)
	}
	return err
}

// jitter waits a random duration up to d, and reports false if ctx ended
// first.
func jitter(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(rand.N(d))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Eval sends a script by its body. asynq falls back to it when Redis does
// not know a script's SHA (after a restart or SCRIPT FLUSH); a fenced call
// stays fenced, so the fallback cannot slip past the lease.
func (c *Client) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	f := fenceOf(ctx)
	if f == nil {
		return c.UniversalClient.Eval(ctx, script, keys, args...)
	}
	call := &pipelinedCall{ctx: ctx, body: script, keys: keys, args: args, fence: f, mark: markOf(ctx)}
	if err := c.sendFenced(context.WithoutCancel(ctx), f, []*pipelinedCall{call}); err != nil && call.cmd == nil {
		return call.fail(err)
	}
	if call.cmd == nil {
		return call.fail(errNoReply)
	}
	return call.cmd
}

// ackedSuffix names the key (beside the lease) that a fenced transaction
// writes when it must be acknowledged; it lives ackedLife.
const (
	ackedSuffix = ":acked"
	ackedLife   = time.Minute
)

// waitAcked fails every call that succeeded unless replicas acknowledge the
// transaction: its task is then in Redis but may be lost to a failover, and
// the scheduler tries it again (a conflict then, acknowledged in turn).
func (c *Client) waitAcked(ctx context.Context, tx *redis.Tx, calls []*pipelinedCall) {
	if !c.Acks.On() || !slices.ContainsFunc(calls, func(call *pipelinedCall) bool { return call.cmd != nil && call.cmd.Err() == nil }) {
		return
	}
	err := c.Acks.Wait(ctx, tx)
	if err == nil {
		return
	}
	for _, call := range calls {
		if call.cmd != nil && call.cmd.Err() == nil {
			call.cmd.SetErr(err)
			markUnacked(call.ctx)
		}
	}
}

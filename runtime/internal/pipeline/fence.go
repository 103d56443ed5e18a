package pipeline

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrFenced is the error of a fenced command that Redis did not run: the
// lease key no longer held the fence's value.
var ErrFenced = errors.New("fenced out: the lease is no longer this replica's")

// Fence makes the tasks sent with its context conditional on the term
// of their sender (Value, a scheduler lease value "<replica>|<instance>|
// <token>") not being over, checked by Redis in the script that writes
// them (task.go). A write that reaches Redis after a newer term wrote (a
// connection held by a middlebox, a pause between the sender's own check
// and the write) is refused however late it arrives.
//
// The check runs in the tasks' queue's slot, so that it holds on Redis
// Cluster: each queue has a fence key (QueueFenceKey) holding the newest
// term that wrote there, raised only to a higher token, and a term older
// than the one found is refused. A new holder raises every queue's fence
// (RaiseFences) before it reads the cursors, so that an older term's
// late write either lands before that read, and its cursor mark with it,
// or is refused. When Key is set (a single Redis, where a script may touch
// any key), the lease key itself must also hold Value: a late write is
// then refused as soon as the lease is gone, before any newer term.
type Fence struct {
	// Namespace names the queues' fence keys.
	Namespace string
	// Key is the lease key, or "" where it is in another slot than the
	// tasks (a Redis Cluster).
	Key, Value string
	rejected   atomic.Bool
}

// Rejected reports whether Redis refused a command of this fence because
// a newer term wrote, or the lease key held another value.
func (f *Fence) Rejected() bool { return f.rejected.Load() }

// QueueFenceKey is namespace ns's fence in queue's slot: the lease value
// of the newest term that wrote there. It carries the queue's hash tag,
// as asynq's keys do.
func QueueFenceKey(ns, queue string) string { return "asynq:{" + queue + "}:belfry:" + ns + ":fence" }

// raiseFenceLua raises a queue's fence to a term, or reports the newer
// term found there. Tokens are compared as numbers; a value of the same
// token and another holder (a token handed out twice after Redis lost
// writes) counts as newer.
//
//	KEYS[1] the fence
//	ARGV[1] the term (a lease value)
//	returns 1 when the fence holds the term, 0 when a newer one is there.
const raiseFenceLua = `
local function raiseFence(key, term)
  local cur = redis.call('GET', key)
  if cur == term then return 1 end
  local mine = tonumber(string.match(term, '(%d+)$'))
  local held = cur and tonumber(string.match(cur, '(%d+)$'))
  if held and (not mine or held >= mine) then return 0 end
  redis.call('SET', key, term)
  return 1
end
`

var raiseFenceScript = redis.NewScript(raiseFenceLua + `return raiseFence(KEYS[1], ARGV[1])`)

// RaiseFences raises namespace ns's fence of each queue to term (see
// Fence), each in its own slot. It returns the queues where a newer term
// is found.
func RaiseFences(ctx context.Context, rdb redis.UniversalClient, ns, term string, queues []string) (newer []string, err error) {
	cmds := make([]*redis.Cmd, len(queues))
	// Each command's own error is read below.
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, q := range queues {
			cmds[i] = raiseFenceScript.Eval(ctx, p, []string{QueueFenceKey(ns, q)}, term)
		}
		return nil
	})
	for i, cmd := range cmds {
		n, cerr := cmd.Int()
		if cerr != nil {
			return nil, cerr
		}
		if n == 0 {
			newer = append(newer, queues[i])
		}
	}
	return newer, nil
}

type fenceKey struct{}

// WithFence returns a context whose tasks the Client sends under f.
func WithFence(ctx context.Context, f *Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

func fenceOf(ctx context.Context) *Fence {
	f, _ := ctx.Value(fenceKey{}).(*Fence)
	return f
}

// ackedSuffix names the key (beside the queue's fence) that a fenced write
// writes when it must be acknowledged; it lives ackedLife. Redis 7 WAITs
// for the primary's offset at the time of the WAIT; Redis 6.2 for the
// connection's last write only, so a script that writes nothing (a task
// ID conflict: the task an earlier, unacknowledged attempt inserted
// through another connection) would be "acknowledged" at once. This write
// makes the acknowledgement cover what is already there on both.
const (
	ackedSuffix = ":acked"
	ackedLife   = time.Minute
)

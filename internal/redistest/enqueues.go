package redistest

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Enqueue is one reply of asynq's enqueue script, as a client saw it.
type Enqueue struct {
	TaskID string
	// Inserted is true when the script put the task in (it returned 1),
	// false when the ID was taken already (0: asynq.ErrTaskIDConflict).
	Inserted bool
	// At is when the reply came back: the task was in Redis by then.
	At time.Time
}

// Ack is the reply of a WAIT the client sent: how many Redis replicas had
// its connection's writes in time, or the error (a demoted primary's).
type Ack struct {
	Replicas int64
	Err      error
	At       time.Time
}

// EnqueueHook returns a go-redis hook that calls onEnqueue with every reply
// of an enqueue script for queue's tasks that the client it is added to
// receives, alone, in a pipeline or in a MULTI/EXEC. An enqueue script
// takes its tasks' keys "asynq:{queue}:t:<id>" as its first keys and the
// queue's pending list "asynq:{queue}:pending" right after them, and
// returns, for each task, 1 when it inserted the task, 0 on an ID
// conflict: asynq's own takes one task and returns an integer, belfry's
// batch (pipeline.Task) takes several and returns an array. Other scripts
// take a task's key first too and answer 0 or 1 (the worker's start mark,
// pipeline.RenewStart and EndStart, asynq's schedule script), but none of
// them takes the pending list after it, and none of them is counted. The
// reply is the one Redis gave: a caller may still fail the command
// afterwards (a write no replica acknowledged), but the task was in
// Redis. onAck, unless nil, gets every WAIT's reply, which says whether a
// replica had the writes.
func EnqueueHook(queue string, onEnqueue func(Enqueue), onAck func(Ack)) redis.Hook {
	return enqueueHook{prefix: "asynq:{" + queue + "}:t:", pending: "asynq:{" + queue + "}:pending",
		onEnqueue: onEnqueue, onAck: onAck}
}

type enqueueHook struct {
	prefix    string
	pending   string
	onEnqueue func(Enqueue)
	onAck     func(Ack)
}

func (h enqueueHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h enqueueHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.inspect(cmd)
		return err
	}
}

func (h enqueueHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.inspect(cmd)
		}
		return err
	}
}

func (h enqueueHook) inspect(cmd redis.Cmder) {
	if w, ok := cmd.(*redis.IntCmd); ok && h.onAck != nil && cmd.Name() == "wait" {
		h.onAck(Ack{Replicas: w.Val(), Err: w.Err(), At: time.Now()})
		return
	}
	if cmd.Err() != nil {
		return
	}
	args := cmd.Args()
	if len(args) < 4 {
		return
	}
	if name, _ := args[0].(string); !strings.EqualFold(name, "evalsha") && !strings.EqualFold(name, "eval") {
		return
	}
	c, ok := cmd.(*redis.Cmd)
	if !ok {
		return
	}
	at := time.Now()
	replies := []any{c.Val()}
	if many, ok := c.Val().([]any); ok {
		replies = many
	}
	// EVAL(SHA) script numkeys key... arg...: the tasks' keys, one per
	// reply, then the pending list.
	numKeys, ok := args[2].(int)
	if !ok || numKeys <= len(replies) || len(args) < 3+numKeys {
		return
	}
	if key, _ := args[3+len(replies)].(string); key != h.pending {
		return
	}
	ids := make([]string, len(replies))
	for i := range replies {
		key, _ := args[3+i].(string)
		id, ok := strings.CutPrefix(key, h.prefix)
		if !ok {
			return
		}
		ids[i] = id
	}
	for i, reply := range replies {
		if n, ok := reply.(int64); ok && (n == 0 || n == 1) {
			h.onEnqueue(Enqueue{TaskID: ids[i], Inserted: n == 1, At: at})
		}
	}
}

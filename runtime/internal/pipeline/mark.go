package pipeline

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Mark is a high-water mark written in the same transaction as the fenced
// call it rides with, and only if that call left the key Exists in Redis:
// for the scheduler, the schedule's cursor raised to the slot whose task
// was just enqueued (or found already there), and the slot's ID as the
// schedule's last. Redis applies the call and its mark together or not at
// all, so a holder that crashes after its enqueue never leaves a slot in
// asynq that its cursor does not cover, and the next holder starts after
// it rather than enqueueing it again.
type Mark struct {
	Exists string // a key the call creates, or finds, when it succeeds
	// Hash's Field is set to Value. The marks of one field must come in
	// rising order (a holder enqueues a schedule's slots one after
	// another, in order), as the mark does not compare: it costs Redis two
	// commands per enqueue, on the spike's critical path.
	Hash  string
	Field string
	Value int64
	// Also, when not "", is a hash whose Field is set to AlsoValue
	// whenever Hash's is raised.
	Also, AlsoValue string
}

type markKey struct{}

// WithMark returns a context whose fenced scripts carry m.
func WithMark(ctx context.Context, m *Mark) context.Context {
	return context.WithValue(ctx, markKey{}, m)
}

func markOf(ctx context.Context) *Mark {
	m, _ := ctx.Value(markKey{}).(*Mark)
	return m
}

// markLua writes a transaction's marks: KEYS and ARGV in threes, one three
// per mark (hash, also, exists; field, value, also value). The task key
// comes last so that the script does not look like an enqueue of that task
// to anything watching for asynq's enqueues by their first key.
const markLua = `
for i = 1, #KEYS, 3 do
  if redis.call('EXISTS', KEYS[i+2]) == 1 then
    redis.call('HSET', KEYS[i], ARGV[i], ARGV[i+1])
    if ARGV[i+2] ~= '' then redis.call('HSET', KEYS[i+1], ARGV[i], ARGV[i+2]) end
  end
end
return 1`

// queueMarks adds one script to a transaction that writes the marks of its
// calls, after them. It is sent by its body, not its SHA: inside MULTI a
// NOSCRIPT could not be retried, and the mark would silently be lost.
func queueMarks(ctx context.Context, p redis.Pipeliner, calls []*pipelinedCall) {
	var keys []string
	var args []any
	for _, call := range calls {
		m := call.mark
		if m == nil {
			continue
		}
		also := m.Also
		if also == "" {
			also = m.Hash
		}
		keys = append(keys, m.Hash, also, m.Exists)
		args = append(args, m.Field, m.Value, m.AlsoValue)
	}
	if len(keys) > 0 {
		p.Eval(ctx, markLua, keys, args...)
	}
}

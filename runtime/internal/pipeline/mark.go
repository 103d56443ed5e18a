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
	Hash   string // the hash whose Field is raised to Value, never lowered
	Field  string
	Value  int64
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
// per mark (exists, hash, also; field, value, also value).
const markLua = `
for i = 1, #KEYS, 3 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    local cur = tonumber(redis.call('HGET', KEYS[i+1], ARGV[i]))
    if cur == nil or tonumber(ARGV[i+1]) > cur then
      redis.call('HSET', KEYS[i+1], ARGV[i], ARGV[i+1])
      if ARGV[i+2] ~= '' then redis.call('HSET', KEYS[i+2], ARGV[i], ARGV[i+2]) end
    end
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
		keys = append(keys, m.Exists, m.Hash, also)
		args = append(args, m.Field, m.Value, m.AlsoValue)
	}
	if len(keys) > 0 {
		p.Eval(ctx, markLua, keys, args...)
	}
}

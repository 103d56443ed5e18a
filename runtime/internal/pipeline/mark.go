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
	// another, in order), as the mark does not compare: a comparison
	// would cost Redis a read per enqueue, on the spike's critical path.
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

// markLua writes a transaction's marks with one EXISTS and one HSET per
// hash, where an EXISTS and an HSET or two a mark cost Redis 0.18 s of the
// 100k spike's 1.14 s (5.4 µs a mark on a busy machine, 3.9 µs now: the
// rest is the script's share of its arguments). When every task key
// exists (the spike: every enqueue went in or was there) the one EXISTS of
// them all says so; otherwise each mark asks about its own key.
// The marks of one field come in rising order, and HSET sets repeated
// fields left to right, so the last, highest, stays.
//
//	KEYS   the hashes, then each mark's task key, in the marks' order. The
//	       task keys come last so that the script does not look like an
//	       enqueue of a task to anything watching for asynq's enqueues by
//	       their first key.
//	ARGV[1] the number of hashes; then five per mark: field, value, the
//	       index in KEYS of its hash, of its Also hash (0 if none), and the
//	       Also value.
//	returns the number of marks written.
const markLua = `
local hashes = tonumber(ARGV[1])
local marks = #KEYS - hashes
local all = redis.call('EXISTS', unpack(KEYS, hashes + 1)) == marks
local fields = {}
for h = 1, hashes do fields[h] = {} end
local written = 0
for m = 1, marks do
  if all or redis.call('EXISTS', KEYS[hashes + m]) == 1 then
    local a = 2 + (m - 1) * 5
    local f = fields[tonumber(ARGV[a + 2])]
    f[#f + 1] = ARGV[a]
    f[#f + 1] = ARGV[a + 1]
    local also = tonumber(ARGV[a + 3])
    if also > 0 then
      f = fields[also]
      f[#f + 1] = ARGV[a]
      f[#f + 1] = ARGV[a + 4]
    end
    written = written + 1
  end
end
for h = 1, hashes do
  if #fields[h] > 0 then redis.call('HSET', KEYS[h], unpack(fields[h])) end
end
return written`

// queueMarks adds one script to a transaction that writes the marks of its
// calls, after them. It is sent by its body, not its SHA: inside MULTI a
// NOSCRIPT could not be retried, and the mark would silently be lost.
func queueMarks(ctx context.Context, p redis.Pipeliner, calls []*pipelinedCall) {
	var hashes, tasks []string
	hashIndex := func(h string) int {
		for i, known := range hashes {
			if known == h {
				return i + 1
			}
		}
		hashes = append(hashes, h)
		return len(hashes)
	}
	args := []any{0}
	for _, call := range calls {
		m := call.mark
		if m == nil {
			continue
		}
		also := 0
		if m.Also != "" && m.AlsoValue != "" {
			also = hashIndex(m.Also)
		}
		args = append(args, m.Field, m.Value, hashIndex(m.Hash), also, m.AlsoValue)
		tasks = append(tasks, m.Exists)
	}
	if len(tasks) == 0 {
		return
	}
	args[0] = len(hashes)
	p.Eval(ctx, markLua, append(hashes, tasks...), args...)
}

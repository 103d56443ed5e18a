package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"
)

// Task is one asynq task, inserted as asynq v0.26's Client.EnqueueContext
// inserts it with the options TaskID, Queue, MaxRetry, Timeout and
// Retention: the same hash, the same protobuf message, the same pending
// list, the same ID-conflict rule.
//
// asynq has no batch enqueue, and its Client costs a script call in Redis
// and a client call's CPU in the caller per task; when thousands of
// schedules are due in one second (3,000 per-second schedules, the 100k
// spike) those are the window between the slot and its last enqueue. The
// Client's Enqueue and EnqueueAll send the tasks of one queue in one
// script per taskChunk instead, each task costing its encoding and its
// two commands. TestTasksAreStoredAsAsynqsClientStoresThem compares
// the stored result with asynq's own, byte for byte, so an asynq upgrade
// that changes its layout fails the tests rather than the workers.
type Task = engine.Task

// asynq's defaults and key layout (v0.26: internal/base).
const (
	asynqDefaultTimeout = 30 * time.Minute
	asynqAllQueues      = "asynq:queues"
)

// TaskKey is asynq's hash for a task: it exists once the task is in,
// whatever became of it since, until asynq deletes it.
func TaskKey(queue, id string) string { return "asynq:{" + queue + "}:t:" + id }

func pendingKey(queue string) string { return "asynq:{" + queue + "}:pending" }

// ErrBadTask is the error of a task asynq's Client would refuse.
var ErrBadTask = errors.New("invalid task")

func validate(t *Task) error {
	switch {
	case strings.TrimSpace(t.Type) == "":
		return errors.Join(ErrBadTask, errors.New("task typename cannot be empty"))
	case strings.TrimSpace(t.Queue) == "":
		return errors.Join(ErrBadTask, errors.New("queue name must contain one or more characters"))
	case strings.TrimSpace(t.ID) == "":
		return errors.Join(ErrBadTask, errors.New("task ID cannot be empty"))
	}
	for k, v := range t.Headers {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return errors.Join(ErrBadTask, fmt.Errorf("task header %q: %q is not valid UTF-8, which asynq's headers must be", k, v))
		}
	}
	return nil
}

// message is the task's asynq TaskMessage in protobuf's wire format, the
// fields in number order as proto.Marshal writes them, zero values left
// out (proto3).
func message(t *Task) []byte {
	timeout := t.Timeout
	if timeout == 0 {
		timeout = asynqDefaultTimeout
	}
	size := 32 + len(t.Type) + len(t.Payload) + len(t.ID) + len(t.Queue)
	for k, v := range t.Headers {
		size += 8 + len(k) + len(v)
	}
	b := make([]byte, 0, size)
	b = appendBytesField(b, 1, t.Type)
	b = appendBytesField(b, 2, t.Payload)
	b = appendBytesField(b, 3, t.ID)
	b = appendBytesField(b, 4, t.Queue)
	b = appendVarintField(b, 5, uint64(int32(max(t.MaxRetry, 0))))
	b = appendVarintField(b, 8, uint64(int64(timeout.Seconds())))
	// 9, the deadline: asynq's "none" is the Unix time 0, left out.
	b = appendVarintField(b, 12, uint64(int64(t.Retention.Seconds())))
	// 13, completed_at, and 14, the group key: never set at enqueue.
	if len(t.Headers) > 0 {
		b = appendHeaders(b, 15, t.Headers)
	}
	return b
}

// appendHeaders appends a map<string, string> field: one entry message
// per key, key (1) and value (2) both written even when empty, as
// proto.Marshal writes map entries. The keys go in sorted order, as
// proto.Marshal's deterministic option writes them; its default order is
// the map's, which varies, and a decoder takes any order.
func appendHeaders(b []byte, num protowire.Number, headers map[string]string) []byte {
	for _, k := range slices.Sorted(maps.Keys(headers)) {
		v := headers[k]
		b = protowire.AppendTag(b, num, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(protowire.SizeTag(1)+protowire.SizeBytes(len(k))+protowire.SizeTag(2)+protowire.SizeBytes(len(v))))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, v)
	}
	return b
}

// appendBytesField appends a string or bytes field; generic so that the
// payload is not copied into a string first.
func appendBytesField[T string | []byte](b []byte, num protowire.Number, v T) []byte {
	if len(v) == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// taskChunk bounds the tasks of one enqueue script: Redis runs a script as
// one step, and taskChunk tasks with their marks keep it well under the
// 5 ms any one call may block Redis for (BENCHMARKS.md, "Limits in the
// code").
const taskChunk = 128

// enqueueLua inserts tasks of one queue as asynq's enqueue script inserts
// one: a task whose key exists is an ID conflict (0) and is left alone,
// any other is written pending and pushed on the queue's list (1). Every
// key it touches is in the queue's slot, so that it runs on Redis Cluster
// (asynq's set of queues, which asynq's Client adds the queue to before
// its first enqueue, is in another: sendTaskChunk adds it on its own).
//
// A fenced script first raises the queue's fence to the sender's term, or
// writes nothing if a newer term is there (Fence); on a single Redis it
// also checks that the lease key holds the fence's value. The check and
// the writes are one step in Redis, as a WATCH and a MULTI/EXEC would
// make them, in one round trip and without a renewal's PEXPIRE aborting
// anything. Each task's mark (mark.go) is written with it: every task's
// key exists once the loop is done, inserted or found.
//
// Redis's time per task is most of the cost of a spike, and a good part
// of it is reading the arguments, so a task carries five and what the
// tasks of a chunk share (the time, the marks' hashes) is sent once. For
// the same reason the chunk's tasks are looked for with one EXISTS, and
// each on its own only when some of them are in.
//
//	KEYS   the tasks' keys, then the queue's pending list; fenced, the
//	       queue's fence and its acknowledgement key (ackedSuffix), and
//	       the lease key if checked; then the marks' hash and Also hash.
//	       The task keys come first, as in asynq's script, so that
//	       anything watching for enqueues by their first key (a test's
//	       hook) finds them.
//	ARGV   the number of tasks, the queue's name, the fence's value ('' for
//	       none), the acknowledgement key's life in ms (0: not written),
//	       when the tasks became pending (Unix ns), the index in KEYS of
//	       the marks' hash (0: no marks), of their Also hash (0: none) and
//	       of the lease key (0: not checked); then five per task: its
//	       message, its ID, its mark's field ('' for none) and value, and
//	       its Also value ('' for none).
//	returns one integer per task, 1 inserted or 0 conflict; fenced out,
//	       the error FENCED.
const enqueueLua = raiseFenceLua + `
local n = tonumber(ARGV[1])
if ARGV[3] ~= '' then
  local lease = tonumber(ARGV[8])
  if lease > 0 and redis.call('GET', KEYS[lease]) ~= ARGV[3] then
    return redis.error_reply('FENCED the lease key holds another value')
  end
  if raiseFence(KEYS[n + 2], ARGV[3]) == 0 then
    return redis.error_reply('FENCED a newer term enqueued in this queue')
  end
  if tonumber(ARGV[4]) > 0 then
    redis.call('SET', KEYS[n + 3], ARGV[3], 'PX', ARGV[4])
  end
end
local since, hash, also = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
local out, ids, marks, alsos = {}, {}, {}, {}
-- One EXISTS for the chunk: when none of its tasks is in, the usual case,
-- no task needs one of its own. A task whose ID came earlier in the chunk
-- is a conflict, as it is when each task has its own script.
local existing = redis.call('EXISTS', unpack(KEYS, 1, n)) > 0
local seen = {}
for i = 1, n do
  local a = 9 + (i - 1) * 5
  local key = KEYS[i]
  if seen[key] or (existing and redis.call('EXISTS', key) == 1) then
    out[i] = 0
  else
    seen[key] = true
    redis.call('HSET', key, 'msg', ARGV[a], 'state', 'pending', 'pending_since', since)
    ids[#ids + 1] = ARGV[a + 1]
    out[i] = 1
  end
  if ARGV[a + 2] ~= '' then
    marks[#marks + 1] = ARGV[a + 2]
    marks[#marks + 1] = ARGV[a + 3]
    if ARGV[a + 4] ~= '' then
      alsos[#alsos + 1] = ARGV[a + 2]
      alsos[#alsos + 1] = ARGV[a + 4]
    end
  end
end
-- One LPUSH of them all leaves the list as one LPUSH each would.
if #ids > 0 then redis.call('LPUSH', KEYS[n + 1], unpack(ids)) end
if #marks > 0 then redis.call('HSET', KEYS[hash], unpack(marks)) end
if #alsos > 0 then redis.call('HSET', KEYS[also], unpack(alsos)) end
return out`

// Enqueue inserts t as asynq's Client would, sending it with the tasks of
// other callers of the moment, under ctx's fence, with no mark. It reports
// whether it inserted the task; false with no error is an ID conflict, the
// task already in.
func (c *Client) Enqueue(ctx context.Context, t Task) (inserted bool, err error) {
	r := c.EnqueueAll(ctx, []Item{{Task: t}})[0]
	return r.Inserted, r.Err
}

// Item is one task of EnqueueAll, with its mark (nil: none).
type Item struct {
	Task Task
	Mark *Mark
}

// Result is what became of an Item (engine.Result).
type Result = engine.Result

// EnqueueAll inserts the items' tasks under ctx's fence, together with
// whatever other callers send at the moment: one script per queue and
// taskChunk tasks (sendTasks). A scheduler with thousands of tasks due at
// once hands them over in a few calls rather than from thousands of
// goroutines. Tasks asynq's Client would refuse fail with ErrBadTask and
// are not sent.
func (c *Client) EnqueueAll(ctx context.Context, items []Item) []Result {
	results := make([]Result, len(items))
	calls := make([]*pipelinedCall, 0, len(items))
	index := make([]int, 0, len(items))
	fence := fenceOf(ctx)
	for i := range items {
		t := &items[i].Task
		if err := validate(t); err != nil {
			results[i].Err = err
			continue
		}
		calls = append(calls, &pipelinedCall{ctx: ctx, task: t, fence: fence, mark: items[i].Mark,
			done: make(chan struct{})})
		index = append(index, i)
	}
	c.runAll(ctx, calls)
	for k, call := range calls {
		r := &results[index[k]]
		*r = Result{Inserted: call.inserted, Err: call.err, Unacked: call.unacked}
	}
	return results
}

// sendTasks sends tasks under f (nil: unfenced), a script per queue and
// chunk, up to tasksInFlight chunks at once on their own connections: a
// chunk's arguments are built while Redis runs the one before, and each
// chunk's tasks hear their reply as soon as it is in, not when the last
// chunk's is. When replicas must acknowledge fenced writes, each chunk's
// WAIT follows it on its connection.
func (c *Client) sendTasks(ctx context.Context, f *Fence, calls []*pipelinedCall) error {
	// A chunk's tasks share their queue and their marks' hashes.
	type shared struct{ queue, hash, also string }
	var groups []shared
	byGroup := map[shared][]*pipelinedCall{}
	for _, call := range calls {
		g := shared{queue: call.task.Queue}
		if m := call.mark; m != nil && f != nil { // a mark rides only with a fence
			g.hash = m.Hash
			if m.Also != "" && m.AlsoValue != "" {
				g.also = m.Also
			}
		}
		if byGroup[g] == nil {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], call)
	}
	var chunks [][]*pipelinedCall
	for _, g := range groups {
		for all := byGroup[g]; len(all) > 0; {
			part := all[:min(taskChunk, len(all))]
			all = all[len(part):]
			chunks = append(chunks, part)
		}
	}
	errs := make([]error, len(chunks))
	if len(chunks) == 1 {
		errs[0] = c.sendTaskChunk(ctx, f, chunks[0])
		return errs[0]
	}
	var wg sync.WaitGroup
	inFlight := make(chan struct{}, tasksInFlight)
	for i, chunk := range chunks {
		inFlight <- struct{}{}
		wg.Go(func() {
			defer func() {
				<-inFlight
				// A panicking hook here would take the whole service down,
				// where in the caller's own goroutine its caller (net/http)
				// may recover: the chunk's tasks fail instead (send).
				if p := recover(); p != nil {
					errs[i] = fmt.Errorf("enqueue script: panic: %v", p)
				}
			}()
			errs[i] = c.sendTaskChunk(ctx, f, chunk)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// tasksInFlight bounds the chunks of one batch that Redis has at once: two
// keep it busy while the next is built; more only queue inside Redis.
const tasksInFlight = 3

// listAgain is how often a queue is added again to asynq's set of queues
// (an operator's DeleteQueue removes it, and asynq's Client adds it back at
// its next enqueue).
const listAgain = time.Minute

// listQueue adds queue to asynq's set of queues, as asynq's Client does
// before each enqueue, at most once per listAgain: the set is in another
// slot than the queue's keys on Redis Cluster, so not in enqueueLua.
func (c *Client) listQueue(ctx context.Context, queue string) error {
	c.listedMu.Lock()
	at, ok := c.listed[queue]
	c.listedMu.Unlock()
	if ok && time.Since(at) < listAgain {
		return nil
	}
	if err := c.rdb.SAdd(ctx, asynqAllQueues, queue).Err(); err != nil {
		return err
	}
	c.listedMu.Lock()
	if c.listed == nil {
		c.listed = map[string]time.Time{}
	}
	c.listed[queue] = time.Now()
	c.listedMu.Unlock()
	return nil
}

// sendTaskChunk runs one chunk's script and hands each call its reply.
func (c *Client) sendTaskChunk(ctx context.Context, f *Fence, calls []*pipelinedCall) error {
	queue := calls[0].task.Queue
	if err := c.listQueue(ctx, queue); err != nil {
		for _, call := range calls {
			call.fail(err)
		}
		return err
	}
	acks := f != nil && c.Acks.On()
	keys, args := enqueueArgs(queue, f, acks, strconv.FormatInt(time.Now().UnixNano(), 10), calls)
	var cmd *redis.Cmd
	var notAcked error
	if !acks {
		cmd = c.rdb.Eval(ctx, enqueueLua, keys, args...)
	} else {
		// The WAIT goes on the connection the script went through: on
		// Redis Cluster, one to the queue's master.
		cmd, notAcked = c.Acks.exec(ctx, c.rdb, keys, func(rc redis.Cmdable, _ bool) *redis.Cmd {
			return rc.Eval(ctx, enqueueLua, keys, args...)
		})
	}
	replies, err := cmd.Int64Slice()
	if err != nil && f != nil && strings.HasPrefix(err.Error(), "FENCED") {
		f.rejected.Store(true)
		err = ErrFenced
	}
	for i, call := range calls {
		switch {
		case err != nil:
			call.fail(err)
		case i >= len(replies):
			call.fail(errNoReply)
		case notAcked != nil:
			call.fail(notAcked)
			call.unacked = true
		default:
			call.answered, call.inserted = true, replies[i] == 1
		}
	}
	return err
}

// enqueueArgs lays out one chunk's keys and arguments for enqueueLua. The
// chunk's tasks share their queue and their marks' hashes (sendTasks).
func enqueueArgs(queue string, f *Fence, acks bool, now string, calls []*pipelinedCall) (keys []string, args []any) {
	keys = make([]string, 0, len(calls)+6)
	for _, call := range calls {
		keys = append(keys, TaskKey(queue, call.task.ID))
	}
	keys = append(keys, pendingKey(queue))
	fenceValue, ackedMS, lease := "", int64(0), 0
	if f != nil {
		fence := QueueFenceKey(f.Namespace, queue)
		keys = append(keys, fence, fence+ackedSuffix)
		fenceValue = f.Value
		if acks {
			ackedMS = ackedLife.Milliseconds()
		}
		if f.Key != "" {
			keys = append(keys, f.Key)
			lease = len(keys)
		}
	}
	hash, also := 0, 0
	if m := calls[0].mark; m != nil && f != nil {
		keys = append(keys, m.Hash)
		hash = len(keys)
		if m.Also != "" && m.AlsoValue != "" {
			keys = append(keys, m.Also)
			also = len(keys)
		}
	}
	args = make([]any, 0, 8+5*len(calls))
	args = append(args, len(calls), queue, fenceValue, ackedMS, now, hash, also, lease)
	for _, call := range calls {
		args = append(args, message(call.task), call.task.ID)
		switch m := call.mark; {
		case also > 0:
			args = append(args, m.Field, m.Value, m.AlsoValue)
		case hash > 0:
			args = append(args, m.Field, m.Value, "")
		default:
			args = append(args, "", "", "")
		}
	}
	return keys, args
}

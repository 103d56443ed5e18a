package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"
)

// stored is what one enqueue left in Redis: the task's hash (its
// pending_since checked for a time and left out), the queue's pending list
// and whether asynq knows the queue.
type stored struct {
	hash    map[string]string
	pending []string
	known   bool
}

func readStored(t *testing.T, rdb redis.UniversalClient, queue, id string) stored {
	t.Helper()
	ctx := context.Background()
	hash, err := rdb.HGetAll(ctx, pipeline.TaskKey(queue, id)).Result()
	if err != nil {
		t.Fatal(err)
	}
	since, err := strconv.ParseInt(hash["pending_since"], 10, 64)
	if err != nil || time.Since(time.Unix(0, since)).Abs() > time.Minute {
		t.Errorf("%s: pending_since %q, want the Unix nanoseconds of about now", id, hash["pending_since"])
	}
	delete(hash, "pending_since")
	pending, err := rdb.LRange(ctx, "asynq:{"+queue+"}:pending", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	known, err := rdb.SIsMember(ctx, "asynq:queues", queue).Result()
	if err != nil {
		t.Fatal(err)
	}
	return stored{hash: hash, pending: pending, known: known}
}

func forget(t *testing.T, rdb redis.UniversalClient, queue string) {
	t.Helper()
	ctx := context.Background()
	keys, err := redistest.Keys(ctx, rdb, "asynq:{"+queue+"}:*")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		rdb.Del(ctx, keys...)
	}
	rdb.SRem(ctx, "asynq:queues", queue)
}

// The tasks the Client writes are the tasks asynq's Client writes with the
// same options, byte for byte: the message a worker decodes, the state,
// the list it pops, the set of queues its inspector reads. An asynq
// upgrade that changes any of it fails here.
func TestTasksAreStoredAsAsynqsClientStoresThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Shared(t)
	theirs := asynq.NewClientFromRedisClient(rdb)
	ours := pipeline.NewClient(rdb)
	cases := []pipeline.Task{
		{Type: "prune", Payload: []byte(`{"schedule":"prune","slot":"2026-11-01T05:59:59Z"}`), MaxRetry: 3, Timeout: 20 * time.Minute, Retention: 6 * time.Minute},
		{Type: "defaults", Payload: nil},                                                       // no retry, asynq's default timeout, no retention
		{Type: "negative retry", MaxRetry: -1, Timeout: 1500 * time.Millisecond},               // asynq takes -1 as 0, and whole seconds
		{Type: "big", Payload: make([]byte, 300), MaxRetry: 25, Retention: 7 * 24 * time.Hour}, // a two-byte length
		{Type: "täsk ✓", Payload: []byte("\x00\xff"), MaxRetry: 1 << 20, Timeout: 90 * 24 * time.Hour},
		// Headers: none written for an empty map, as for nil; an empty
		// key or value still written; several in any order.
		{Type: "empty headers", Payload: []byte("p"), Headers: map[string]string{}},
		{Type: "a header", Payload: []byte("p"), Retention: time.Minute,
			Headers: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}},
		{Type: "empty key and value", Headers: map[string]string{"": ""}},
		{Type: "headers", Payload: make([]byte, 200), MaxRetry: 2,
			Headers: map[string]string{"tracestate": "vendor=a,other=b", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
				"baggage": "k=" + strings.Repeat("v", 150), "é✓": "\x00\x7f"}},
	}
	for i, task := range cases {
		task.Queue = redistest.Uniq("task-format")
		task.ID = fmt.Sprintf("cron:ns/sched-%d:%d", i, 1793512860+i)
		t.Cleanup(func() { forget(t, rdb, task.Queue) })

		_, err := theirs.EnqueueContext(ctx, asynq.NewTaskWithHeaders(task.Type, task.Payload, task.Headers), asynq.TaskID(task.ID), asynq.Queue(task.Queue),
			asynq.MaxRetry(task.MaxRetry), asynq.Timeout(task.Timeout), asynq.Retention(task.Retention))
		if err != nil {
			t.Fatalf("%s: asynq: %v", task.Type, err)
		}
		want := readStored(t, rdb, task.Queue, task.ID)
		forget(t, rdb, task.Queue)

		inserted, err := ours.Enqueue(ctx, task)
		if err != nil || !inserted {
			t.Fatalf("%s: Enqueue = %v, %v; want inserted", task.Type, inserted, err)
		}
		got := readStored(t, rdb, task.Queue, task.ID)
		if len(task.Headers) > 1 { // asynq writes map entries in the map's order
			want.hash["msg"] = headersSorted(t, want.hash["msg"])
		}
		if !maps.Equal(got.hash, want.hash) {
			t.Errorf("%s: task hash\n got %q\nwant %q", task.Type, got.hash, want.hash)
		}
		if !slices.Equal(got.pending, want.pending) || got.known != want.known {
			t.Errorf("%s: pending %q, known %v; want %q, %v", task.Type, got.pending, got.known, want.pending, want.known)
		}

		// A second enqueue of the ID is a conflict, as asynq's is, and
		// changes nothing.
		again := task
		again.Payload = []byte("other")
		if inserted, err := ours.Enqueue(ctx, again); err != nil || inserted {
			t.Errorf("%s: second Enqueue = %v, %v; want a conflict", task.Type, inserted, err)
		}
		if after := readStored(t, rdb, task.Queue, task.ID); !maps.Equal(after.hash, got.hash) || len(after.pending) != 1 {
			t.Errorf("%s: a conflict changed the task: %q, pending %q", task.Type, after.hash, after.pending)
		}
		if _, err := theirs.EnqueueContext(ctx, asynq.NewTask(task.Type, nil), asynq.TaskID(task.ID), asynq.Queue(task.Queue)); !errors.Is(err, asynq.ErrTaskIDConflict) {
			t.Errorf("%s: asynq's enqueue of the same ID: %v, want its conflict", task.Type, err)
		}
	}
}

// headersSorted returns msg, an asynq TaskMessage, with its headers'
// entries (field 15, the last field asynq writes at enqueue) in the order
// of their keys, as pipeline writes them.
func headersSorted(t *testing.T, msg string) string {
	t.Helper()
	b := []byte(msg)
	var fields, entries [][]byte
	keyOf := map[string]string{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("asynq's message: %v", protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			t.Fatalf("asynq's message: %v", protowire.ParseError(m))
		}
		field := b[:n+m]
		b = b[n+m:]
		if num != 15 {
			fields = append(fields, field)
			continue
		}
		entry, _ := protowire.ConsumeBytes(field[n:])
		_, _, kn := protowire.ConsumeTag(entry)
		key, _ := protowire.ConsumeString(entry[kn:])
		keyOf[string(field)] = key
		entries = append(entries, field)
	}
	slices.SortFunc(entries, func(a, b []byte) int { return strings.Compare(keyOf[string(a)], keyOf[string(b)]) })
	return string(bytes.Join(append(fields, entries...), nil))
}

// Tasks asynq's Client would refuse are refused before anything is sent.
func TestTasksAsynqWouldRefuseAreRefused(t *testing.T) {
	t.Parallel()
	ours := pipeline.NewClient(redistest.Shared(t))
	for _, task := range []pipeline.Task{
		{Type: " ", ID: "a", Queue: "q"},
		{Type: "t", ID: "a", Queue: ""},
		{Type: "t", ID: " ", Queue: "q"},
		// Headers are protobuf strings: asynq cannot encode, nor its
		// workers decode, one that is not UTF-8.
		{Type: "t", ID: "a", Queue: "q", Headers: map[string]string{"traceparent": "\xff"}},
		{Type: "t", ID: "a", Queue: "q", Headers: map[string]string{"\xfe": "v"}},
	} {
		if _, err := ours.Enqueue(context.Background(), task); !errors.Is(err, pipeline.ErrBadTask) {
			t.Errorf("Enqueue(%+v) = %v, want ErrBadTask", task, err)
		}
	}
}

// A chunk's script looks for all its tasks with one EXISTS and for each
// only when some are in; either way a task already in Redis, and a task
// whose ID came earlier in the same chunk, is a conflict, and every ID is
// pushed once.
func TestAChunkFindsItsConflictsWhetherOrNotAnyTaskIsIn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Shared(t)
	ours := pipeline.NewClient(rdb)
	for _, tc := range []struct {
		name   string
		before []string // enqueued on their own first
		ids    []string // then in one EnqueueAll, one chunk
		want   []bool
	}{
		{name: "none in", ids: []string{"d", "e", "d", "f", "e"}, want: []bool{true, true, false, true, false}},
		{name: "one in", before: []string{"b"}, ids: []string{"a", "b", "c", "a", "c"}, want: []bool{true, false, true, false, false}},
	} {
		queue := redistest.Uniq("task-chunk-conflicts")
		t.Cleanup(func() { forget(t, rdb, queue) })
		task := func(id, payload string) pipeline.Task {
			return pipeline.Task{Type: "chunked", ID: id, Queue: queue, Payload: []byte("payload-" + payload)}
		}
		for _, id := range tc.before {
			if inserted, err := ours.Enqueue(ctx, task(id, "before")); err != nil || !inserted {
				t.Fatalf("%s: enqueue %s first: %v, %v", tc.name, id, inserted, err)
			}
		}
		items := make([]pipeline.Item, len(tc.ids))
		for i, id := range tc.ids {
			items[i] = pipeline.Item{Task: task(id, strconv.Itoa(i))}
		}
		var got []bool
		for i, r := range ours.EnqueueAll(ctx, items) {
			if r.Err != nil {
				t.Fatalf("%s: item %d (%s): %v", tc.name, i, tc.ids[i], r.Err)
			}
			got = append(got, r.Inserted)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: inserted %v, want %v", tc.name, got, tc.want)
		}
		pending, err := rdb.LRange(ctx, "asynq:{"+queue+"}:pending", 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(pending)
		want := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(tc.before), tc.ids...))))
		if !slices.Equal(pending, want) {
			t.Errorf("%s: pending %v, want each ID once: %v", tc.name, pending, want)
		}
		// The first of each ID is the one stored: a conflict writes nothing.
		for i, id := range tc.ids {
			if slices.Index(tc.ids, id) != i || slices.Contains(tc.before, id) {
				continue
			}
			msg, err := rdb.HGet(ctx, pipeline.TaskKey(queue, id), "msg").Bytes()
			if err != nil || !bytes.Contains(msg, []byte("payload-"+strconv.Itoa(i))) {
				t.Errorf("%s: task %s holds %q (%v), want the payload of its first enqueue, %d", tc.name, id, msg, err, i)
			}
		}
		for _, id := range tc.before {
			msg, err := rdb.HGet(ctx, pipeline.TaskKey(queue, id), "msg").Bytes()
			if err != nil || !bytes.Contains(msg, []byte("payload-before")) {
				t.Errorf("%s: task %s holds %q (%v), want the payload it was first enqueued with", tc.name, id, msg, err)
			}
		}
	}
}

// Concurrent enqueues of several queues, some of them conflicts, each get
// their own answer, and a worker runs every inserted task once.
func TestConcurrentEnqueuesOfSeveralQueuesEachGetTheirOwnReply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Shared(t)
	ours := pipeline.NewClient(rdb)
	queues := []string{redistest.Uniq("task-batch-a"), redistest.Uniq("task-batch-b")}
	for _, q := range queues {
		t.Cleanup(func() { forget(t, rdb, q) })
	}
	const n = 600 // several chunks of a transaction, several batches
	var wg sync.WaitGroup
	inserted := make([]bool, 2*n)
	errs := make([]error, 2*n)
	for i := range 2 * n {
		wg.Go(func() {
			// Every task twice: the second of each pair is a conflict,
			// whichever of the two comes first.
			task := pipeline.Task{Type: "batched", ID: fmt.Sprintf("t-%d", i%n), Queue: queues[i%n%2], Payload: []byte(strconv.Itoa(i % n))}
			inserted[i], errs[i] = ours.Enqueue(ctx, task)
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || errs[i+n] != nil {
			t.Fatalf("task %d: %v, %v", i, errs[i], errs[i+n])
		}
		if inserted[i] == inserted[i+n] {
			t.Errorf("task %d: inserted %v and %v, want exactly one of its two enqueues", i, inserted[i], inserted[i+n])
		}
	}
	for qi, q := range queues {
		pending, err := rdb.LRange(ctx, "asynq:{"+q+"}:pending", 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) != n/2 {
			t.Errorf("queue %d: %d pending, want %d", qi, len(pending), n/2)
		}
	}

	// asynq's own server takes the tasks as it takes its Client's.
	var ran sync.Map
	var count sync.WaitGroup
	count.Add(n)
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Queues: map[string]int{queues[0]: 1, queues[1]: 1}, Concurrency: 8,
		LogLevel: asynq.FatalLevel})
	if err := srv.Start(asynq.HandlerFunc(func(_ context.Context, task *asynq.Task) error {
		if _, again := ran.LoadOrStore(string(task.Payload()), true); !again {
			count.Done()
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	done := make(chan struct{})
	go func() { count.Wait(); close(done) }()
	within(t, 30*time.Second, "asynq's server running every task", done)
}

// Redis's own time per task of a spike's enqueue: fenced chunks of
// taskChunk tasks, each with its mark, all new, on a private Redis. The
// redis-µs/task metric is INFO commandstats' time in the script over the
// tasks; ns/op is the client's wall time per chunk of 128. The AOF is
// off, as in make bench's Redis: its writes would be counted as the
// script's.
func BenchmarkEnqueueChunkRedisTime(b *testing.B) {
	ctx := context.Background()
	rdb := redistest.StartPrivate(b).Client(b)
	if err := rdb.ConfigSet(ctx, "appendonly", "no").Err(); err != nil {
		b.Fatal(err)
	}
	rdb.Set(ctx, "lease", "holder|1", 0)
	fenced := pipeline.WithFence(ctx, &pipeline.Fence{Key: "lease", Value: "holder|1"})
	pc := pipeline.NewClient(rdb)
	payload := make([]byte, 120) // an occurrence's JSON is about this long
	const chunk = 128
	items := make([]pipeline.Item, chunk)
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	sent := 0
	for b.Loop() {
		for i := range items {
			name := fmt.Sprintf("daily-%06d", sent)
			items[i] = pipeline.Item{
				Task: pipeline.Task{Type: "belfry:daily", Queue: "bench", ID: "belfry:bench:" + name + ":1764806400", Payload: payload,
					MaxRetry: 3, Timeout: 20 * time.Minute, Retention: 6 * time.Minute},
				Mark: &pipeline.Mark{Hash: "cursors", Field: name, Value: 1764806400, Also: "lastid", AlsoValue: "belfry:bench:" + name + ":1764806400"},
			}
			sent++
		}
		for _, r := range pc.EnqueueAll(fenced, items) {
			if r.Err != nil || !r.Inserted {
				b.Fatalf("%v, inserted %v", r.Err, r.Inserted)
			}
		}
	}
	stats, err := redistest.CommandStats(ctx, rdb)
	if err != nil {
		b.Fatal(err)
	}
	usec := stats["eval"].Usec
	if usec == 0 {
		b.Fatalf("no script time in INFO commandstats: %v", stats)
	}
	b.ReportMetric(float64(usec)/float64(sent), "redis-µs/task")
}

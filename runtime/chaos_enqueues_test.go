package runtime_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/redistest"
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/internal/chaoskit"
	"github.com/redis/go-redis/v9"
)

// What went into asynq. Each replica appends a line to its own enq-*.log
// for every reply of asynq's enqueue script its client received (the task
// inserted, or its ID taken already) and for every WAIT (how many Redis
// replicas had the writes), one write(2) per line, so a SIGKILL loses
// nothing written. The harness reads them to tell a slot never enqueued
// from one whose task Redis lost, and to explain every missed slot.

// envEnqueues is the replica's enqueue log.
const envEnqueues = "BELFRY_CHAOS_ENQUEUES"

// recordEnqueues adds to rdb the hook that writes the replica's enqueue log.
func recordEnqueues(rdb redis.UniversalClient, path string, onErr func(error)) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	write := func(line string) {
		if _, err := f.WriteString(line); err != nil {
			onErr(err)
		}
	}
	hook := redistest.EnqueueHook(chaosQueue, func(e redistest.Enqueue) {
		outcome := "conflict"
		if e.Inserted {
			outcome = "inserted"
		}
		write(fmt.Sprintf("%d %s %s\n", e.At.UnixNano(), outcome, e.TaskID))
	}, func(a redistest.Ack) {
		result := "ok"
		if a.Err != nil {
			result = strings.ReplaceAll(a.Err.Error(), "\n", " ")
		}
		write(fmt.Sprintf("%d wait %d %s\n", a.At.UnixNano(), a.Replicas, result))
	})
	// On a cluster client the hook goes on each node's client: a
	// transaction (an enqueue that waits for a replica's acknowledgement)
	// runs on the node's client, past the cluster client's own hooks.
	if c, ok := rdb.(*redis.ClusterClient); ok {
		c.OnNewNode(func(node *redis.Client) { node.AddHook(hook) })
	} else {
		rdb.AddHook(hook)
	}
	return f, nil
}

// enqueueRecord is one line of a replica's enqueue log.
type enqueueRecord struct {
	at      time.Time
	replica string
	kind    string // "inserted", "conflict" or "wait"
	taskID  string // for inserted and conflict
	// acks and ackErr are a WAIT's reply.
	acks   int64
	ackErr string
}

// enqueueLogs are every replica's enqueue records: per task ID, and each
// replica's WAITs in order.
type enqueueLogs struct {
	byTask map[string][]enqueueRecord
	waits  map[string][]enqueueRecord
}

func (h *chaosHarness) readEnqueueLogs() enqueueLogs {
	logs := enqueueLogs{byTask: map[string][]enqueueRecord{}, waits: map[string][]enqueueRecord{}}
	files, _ := filepath.Glob(filepath.Join(h.dir, "enq-*.log"))
	for _, name := range files {
		replica := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(name), "enq-"), ".log")
		f, err := os.Open(name)
		if err != nil {
			h.t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.SplitN(sc.Text(), " ", 4)
			if len(fields) < 3 {
				continue // a line cut short by a SIGKILL mid-write
			}
			ns, err := strconv.ParseInt(fields[0], 10, 64)
			if err != nil {
				continue
			}
			rec := enqueueRecord{at: time.Unix(0, ns), replica: replica, kind: fields[1]}
			switch rec.kind {
			case "inserted", "conflict":
				rec.taskID = fields[2]
				logs.byTask[rec.taskID] = append(logs.byTask[rec.taskID], rec)
			case "wait":
				if len(fields) < 4 {
					continue
				}
				if rec.acks, err = strconv.ParseInt(fields[2], 10, 64); err != nil {
					continue
				}
				if fields[3] != "ok" {
					rec.ackErr = fields[3]
				}
				logs.waits[replica] = append(logs.waits[replica], rec)
			}
		}
		f.Close()
	}
	for _, recs := range logs.byTask {
		slices.SortFunc(recs, func(a, b enqueueRecord) int { return a.at.Compare(b.at) })
	}
	return logs
}

// ackAfter describes the first WAIT reply rec's replica got at or after
// rec: whether a Redis replica had the enqueue (with ReplicaAcks the
// runtime sends one right after each fenced transaction).
func (l enqueueLogs) ackAfter(rec enqueueRecord) string {
	for _, w := range l.waits[rec.replica] {
		if w.at.Before(rec.at) {
			continue
		}
		if w.ackErr != "" {
			return fmt.Sprintf("next WAIT failed at %s: %s", clockOf(w.at), w.ackErr)
		}
		return fmt.Sprintf("next WAIT at %s: %d replica(s) acknowledged", clockOf(w.at), w.acks)
	}
	return "no WAIT after it"
}

// firstEnqueue is when the task of a slot of a schedule, or of a family
// member ("family/<member>"), was first inserted, as its leader's client
// saw the reply; the slot itself if no replica recorded an insert.
func (l enqueueLogs) firstEnqueue(name string, slot int64) time.Time {
	for _, r := range l.byTask[chaosTaskID(name, slot)] {
		if r.kind == "inserted" {
			return r.at
		}
	}
	return time.Unix(slot, 0)
}

// reached is when a leader first enqueued (inserted or found) the task of
// slot of any of the schedules names; zero if none did.
func (l enqueueLogs) reached(names []string, slot int64) time.Time {
	var first time.Time
	for _, name := range names {
		if recs := l.byTask[chaosTaskID(name, slot)]; len(recs) > 0 && (first.IsZero() || recs[0].at.Before(first)) {
			first = recs[0].at
		}
	}
	return first
}

// quietGap is the longest a per-second schedule's leader goes between two
// enqueues while it keeps up.
const quietGap = 3 * time.Second

// quietStretches are the stretches longer than quietGap between two
// enqueues (inserted or found) of tasks whose IDs start with one of
// prefixes: an outage of the leader, after which it catches up on the
// slots that came due in it. A stretch still under way at now runs on
// into the future. Only a leader whose fence held enqueues, so a zombie's
// worker or asynq re-delivering an orphaned task, which run tasks in the
// middle of an outage, do not end one as they end a stretch of no
// executions.
func (l enqueueLogs) quietStretches(prefixes []string, now time.Time) [][2]time.Time {
	var times []time.Time
	for id, recs := range l.byTask {
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(id, p) }) {
			continue
		}
		for _, r := range recs {
			times = append(times, r.at)
		}
	}
	slices.SortFunc(times, time.Time.Compare)
	var out [][2]time.Time
	for i := 1; i < len(times); i++ {
		if times[i].Sub(times[i-1]) > quietGap {
			out = append(out, [2]time.Time{times[i-1], times[i]})
		}
	}
	if n := len(times); n > 0 && now.Sub(times[n-1]) > quietGap {
		out = append(out, [2]time.Time{times[n-1], now.Add(time.Hour)})
	}
	return out
}

// quietBefore says whether slot came due in, or just before, one of the
// quiet stretches that had not ended by margin before at: the leader may
// not have got to the slot by then (it was catching up).
func quietBefore(stretches [][2]time.Time, slot, at time.Time, margin time.Duration) bool {
	for _, q := range stretches {
		if slot.After(q[0].Add(-margin)) && at.Before(q[1].Add(margin)) {
			return true
		}
	}
	return false
}

func clockOf(t time.Time) string { return t.UTC().Format("15:04:05.000") }

// chaosFlush is one FLUSHALL the harness made, and the tasks Redis held
// just before it.
type chaosFlush struct {
	// snapshotAt is when the harness began listing the tasks; sentAt when
	// it sent the FLUSHALL that succeeded, doneAt when that returned.
	snapshotAt, sentAt, doneAt time.Time
	// queued maps the ID of every task of the queue in Redis at
	// snapshotAt to its state (pending, active, retry, ...).
	queued map[string]string
}

// queuedTasks lists the chaos queue's tasks in Redis and their states.
func (h *chaosHarness) queuedTasks() (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	prefix := "asynq:{" + chaosQueue + "}:t:"
	var keys []string
	iter := h.rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return nil, err
	}
	states := make([]*redis.StringCmd, len(keys))
	if _, err := h.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			states[i] = p.HGet(ctx, k, "state")
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make(map[string]string, len(keys))
	for i, k := range keys {
		out[strings.TrimPrefix(k, prefix)] = states[i].Val()
	}
	return out, nil
}

// noteLost adds the losses the replicas recorded so far to those the
// harness has seen: a later FLUSHALL (or a failover) takes the record of
// an earlier loss with it, and its slots are no less in a loss.
func (h *chaosHarness) noteLost() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	lost, err := h.operator.Redis().LostWrites(ctx)
	if err != nil {
		return // Redis down or refusing: the next look finds them
	}
	h.lostMu.Lock()
	defer h.lostMu.Unlock()
	for _, l := range lost {
		if !slices.ContainsFunc(h.lostSeen, func(seen runtime.LostWrites) bool {
			return seen.At.Equal(l.At) && seen.Replica == l.Replica && seen.From.Equal(l.From) && seen.To.Equal(l.To)
		}) {
			h.lostSeen = append(h.lostSeen, l)
		}
	}
}

// chaosTaskID is the task ID of a slot of a schedule, or of a family
// member ("family/<member>").
func chaosTaskID(name string, slot int64) string {
	sched, member, _ := strings.Cut(name, "/")
	return registry.Scope{Namespace: chaosNamespace, Schedule: sched, Member: member}.ID(time.Unix(slot, 0))
}

// unran says what became of a slot that never ran. queuedAtFlush is true
// when its task was in Redis when the harness flushed it: listed just
// before a FLUSHALL, or inserted after that listing and before the
// FLUSHALL was sent, and neither inserted nor found (a conflict) after
// it. Redis losing asynq's queued tasks is the data-loss event itself,
// which no scheduler can undo. Otherwise why tells everything known about
// the slot's task, to diagnose the miss.
func (h *chaosHarness) unran(logs enqueueLogs, name string, slot int64) (queuedAtFlush bool, why string) {
	id := chaosTaskID(name, slot)
	recs := logs.byTask[id]
	for _, f := range h.flushLog {
		state, listed := f.queued[id]
		inserted := slices.ContainsFunc(recs, func(r enqueueRecord) bool {
			return r.kind == "inserted" && !r.at.Before(f.snapshotAt) && r.at.Before(f.sentAt)
		})
		seenAfter := slices.ContainsFunc(recs, func(r enqueueRecord) bool { return !r.at.Before(f.sentAt) })
		if (listed || inserted) && !seenAfter {
			if !listed {
				state = "inserted after the listing"
			}
			return true, fmt.Sprintf("task %s was in Redis (%s) when the FLUSHALL at %s took it", id, state, clockOf(f.sentAt))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "task %s", id)
	if len(recs) == 0 {
		b.WriteString(": never enqueued (no replica's enqueue script answered for it)")
	}
	for _, r := range recs {
		fmt.Fprintf(&b, "; %s at %s by %s", r.kind, clockOf(r.at), r.replica)
		if r.kind == "inserted" {
			fmt.Fprintf(&b, " (%s)", logs.ackAfter(r))
		}
	}
	for _, f := range h.flushLog {
		if state, ok := f.queued[id]; ok {
			fmt.Fprintf(&b, "; in Redis (%s) before the FLUSHALL at %s", state, clockOf(f.sentAt))
		}
	}
	for _, line := range h.logLinesWith(id, 4) {
		b.WriteString("\n\t" + line)
	}
	return false, b.String()
}

// logLinesWith returns up to n of the replicas' log lines that contain
// text, each prefixed with its replica.
func (h *chaosHarness) logLinesWith(text string, n int) []string {
	var out []string
	files, _ := filepath.Glob(filepath.Join(h.dir, "replica-*.log"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		replica := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(name), "replica-"), ".log")
		for line := range strings.Lines(string(b)) {
			if strings.Contains(line, text) && len(out) < n {
				out = append(out, replica+": "+strings.TrimSpace(line))
			}
		}
	}
	return out
}

// A task run again after a change of primary is judged by when it went
// into Redis: a slot long past, enqueued by a leader catching up just
// before the switch, may be delivered again from the new primary; a slot
// just before the switch whose task went in only after it may not.
func TestChaosJudgesAFailoverRerunByItsEnqueue(t *testing.T) {
	switchAt := time.Date(2026, 12, 4, 20, 44, 32, 0, time.UTC)
	h := &chaosHarness{switches: []time.Time{switchAt}}
	logs := enqueueLogs{byTask: map[string][]enqueueRecord{}}
	enqueue := func(slot, when time.Time) int64 {
		id := chaosTaskID("every-1s", slot.Unix())
		logs.byTask[id] = append(logs.byTask[id], enqueueRecord{at: when, kind: "inserted", taskID: id})
		return slot.Unix()
	}
	caughtUp := enqueue(switchAt.Add(-20*time.Second), switchAt.Add(-2*time.Second))
	if !h.nearSwitch(logs.firstEnqueue("every-1s", caughtUp)) {
		t.Error("a slot enqueued 2s before the switch, 18s late, is not judged near it")
	}
	after := enqueue(switchAt.Add(-2*time.Second), switchAt.Add(3*time.Second))
	if h.nearSwitch(logs.firstEnqueue("every-1s", after)) {
		t.Error("a slot enqueued 3s after the switch is judged near it")
	}
	if !h.nearSwitch(logs.firstEnqueue("every-1s", switchAt.Add(-time.Second).Unix())) {
		t.Error("a slot with no recorded enqueue is not judged by its own time")
	}
}

// A slot of the paused schedule that came due before the pause but that
// no leader reached until the pause had landed (it was catching up after
// an outage) is recorded paused by the runtime, and may go either way; one
// a leader reached before the pause must run.
func TestChaosJudgesAPauseReachedLateByTheEnqueues(t *testing.T) {
	at := func(sec float64) time.Time {
		return time.Date(2026, 12, 4, 20, 59, 0, 0, time.UTC).Add(time.Duration(sec * float64(time.Second)))
	}
	h := &chaosHarness{cfg: chaoskit.Config{Skew: 3 * time.Second}, schedules: []string{"every-1s", chaosPaused}}
	h.operatorPause.fromFirst, h.operatorPause.from = at(58.16), at(58.17)
	h.operatorPause.toFirst, h.operatorPause.to = at(133), at(134)
	logs := enqueueLogs{byTask: map[string][]enqueueRecord{}}
	enqueue := func(name string, slot, when float64) {
		id := chaosTaskID(name, at(slot).Unix())
		logs.byTask[id] = append(logs.byTask[id], enqueueRecord{at: at(when), kind: "inserted", taskID: id})
	}
	enqueue("every-1s", 50, 54.449)
	enqueue(chaosPaused, 50, 54.437)
	enqueue("every-1s", 52, 54.453)
	enqueue("every-1s", 54, 58.448) // the outage's catch-up, after the pause
	for _, c := range []struct {
		slot float64
		want pausedState
	}{{50, slotRuns}, {52, slotRuns}, {54, slotMaybePaused}, {100, slotPaused}} {
		if got := h.pausedState(at(c.slot), logs.reached(h.schedules, at(c.slot).Unix())); got != c.want {
			t.Errorf("slot at %vs: paused state %d, want %d", c.slot, got, c.want)
		}
	}
}

package store

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/redis/go-redis/v9"
)

// Chunk bounds the schedules one script call or one read carries, so that no
// single call blocks Redis for long however many schedules there are: an
// HMGET of Chunk fields stays under the 5 ms any one call may block Redis
// for, on a busy host too, where twice as many did not
// (BENCHMARKS.md, "Limits in the code").
const Chunk = 250

// InitChunk bounds the schedules of one first-takeover script: each costs
// an HSETNX and an HSET, and InitChunk of them keep the script under the
// 5 ms that any one call may block Redis for, where 250 went past it on
// a busy host (BENCHMARKS.md, "Limits in the code").
const InitChunk = 100

// CommitChunk bounds the schedules one commit script carries: each costs
// Redis a record (HSET, EXPIRE, ZADD, and a ZCARD for its index) and its
// part of the batch's reads and writes of the cursors and counters, and
// CommitChunk of them keep one script well under the 5 ms that any one
// call may block Redis for, where twice as many went past it on a busy
// host (BENCHMARKS.md, "Limits in the code").
const CommitChunk = 50

// commitBytesGuess is a little more than the JSON of a typical schedule's
// commit with one record, so that the first chunk's buffer rarely grows.
const commitBytesGuess = 384

// Store reads and writes one namespace's state.
type Store struct {
	rdb  redis.UniversalClient
	Keys Keys
	// HistoryLimit is the number of records kept per schedule.
	HistoryLimit int
	// Limits are the schedules that keep fewer records than HistoryLimit,
	// by name; set before the store is used, read-only after.
	Limits map[string]int
	// RecordTTL bounds how long a record outlives its index entry.
	RecordTTL time.Duration
	// Acks, when on, makes the leader's fenced writes (cursors, ledger,
	// epoch) count only once replicas acknowledge them.
	Acks pipeline.Acks

	pauses pauseCache
}

// New returns the store of namespace ns on rdb.
func New(rdb redis.UniversalClient, ns string, historyLimit int, recordTTL time.Duration) *Store {
	return &Store{rdb: rdb, Keys: NewKeys(ns), HistoryLimit: historyLimit, RecordTTL: recordTTL}
}

// limitOf is the number of records the schedule name keeps.
func (s *Store) limitOf(name string) int {
	if n, ok := s.Limits[name]; ok {
		return n
	}
	return s.HistoryLimit
}

// Commit writes the items in fenced script calls of at most CommitChunk each. It
// returns ErrNotLeader if the lease is not held with leaseValue; chunks
// before the failing one stay written, which is safe because each item is
// a schedule's complete step.
func (s *Store) Commit(ctx context.Context, leaseValue string, items []Commit) error {
	for i := range items {
		items[i].Limit = s.limitOf(items[i].Name)
	}
	var batch []byte
	for start := 0; start < len(items); start += CommitChunk {
		// A buffer of its own for each chunk (a hook may keep a command's
		// arguments), sized by the one before or, the first time, for a
		// record a schedule.
		part := items[start:min(start+CommitChunk, len(items))]
		batch = appendCommits(make([]byte, 0, max(len(batch), commitBytesGuess*len(part))), part)
		ok, err := s.Acks.Run(ctx, s.rdb, commitScript, []string{s.Keys.Lease}, leaseValue, s.Keys.Prefix,
			s.HistoryLimit, int(s.RecordTTL.Seconds()), batch).Int()
		if err != nil {
			return err
		}
		if ok != 1 {
			return ErrNotLeader
		}
	}
	return nil
}

// CommitScriptHash identifies the fenced commit among a client's commands,
// for tests that fail it on purpose.
func CommitScriptHash() string { return commitScript.Hash() }

// FamilyCommitScriptHash identifies a family's fenced commit, for tests
// that make it fail.
func FamilyCommitScriptHash() string { return familyCommitScript.Hash() }

// InitCursorsScriptHash identifies the first takeover's script, for the
// bench's slow log.
func InitCursorsScriptHash() string { return initCursorsScript.Hash() }

// RecordManual records a manual occurrence (not fenced: any replica may).
func (s *Store) RecordManual(ctx context.Context, item Commit) error {
	item.Limit = s.limitOf(item.Name)
	batch := appendCommitJSON(&item, nil)
	return manualRecordScript.Run(ctx, s.rdb, []string{s.Keys.Counters()}, s.Keys.Prefix, s.HistoryLimit,
		int(s.RecordTTL.Seconds()), batch).Err()
}

// Cursors reads the cursors of names, in chunks. A schedule with no cursor
// yet (never scheduled) has ok false.
func (s *Store) Cursors(ctx context.Context, names []string) (cursors []int64, ok []bool, err error) {
	cursors, ok = make([]int64, len(names)), make([]bool, len(names))
	for start := 0; start < len(names); start += Chunk {
		part := names[start:min(start+Chunk, len(names))]
		vals, err := s.rdb.HMGet(ctx, s.Keys.Cursors, part...).Result()
		if err != nil {
			return nil, nil, err
		}
		for i, v := range vals {
			if str, isStr := v.(string); isStr {
				if sec, err := strconv.ParseInt(str, 10, 64); err == nil {
					cursors[start+i], ok[start+i] = sec, true
				}
			}
		}
	}
	return cursors, ok, nil
}

// InitCursors sets the cursor of each of names that has none to now and
// records when each was first seen; fenced, in chunks.
func (s *Store) InitCursors(ctx context.Context, leaseValue string, now int64, names []string) error {
	for start := 0; start < len(names); start += InitChunk {
		args := []any{leaseValue, s.Keys.Cursors, now, s.Keys.Counters()}
		for _, n := range names[start:min(start+InitChunk, len(names))] {
			args = append(args, n)
		}
		ok, err := s.Acks.Run(ctx, s.rdb, initCursorsScript, []string{s.Keys.Lease}, args...).Int()
		if err != nil {
			return err
		}
		if ok != 1 {
			return ErrNotLeader
		}
	}
	return nil
}

// LastID returns the last enqueued occurrence of name, or "".
func (s *Store) LastID(ctx context.Context, name string) (string, error) {
	id, err := s.rdb.HGet(ctx, s.Keys.LastID, name).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return id, err
}

// RecordExecution writes an execution step; see executionScript.
func (s *Store) RecordExecution(ctx context.Context, e Execution) error {
	args := append([]any{int(s.RecordTTL.Seconds()), s.limitOf(e.Schedule), s.Keys.Prefix, e.Slot.UnixMilli(), e.ID,
		e.Count, e.Last, e.AlsoLast, e.At.UnixMilli(), e.Attempt, e.Schedule,
		"id", e.ID, "schedule", e.Schedule, "slot", e.Slot.Unix()}, e.Fields...)
	return executionScript.Run(ctx, s.rdb, []string{s.Keys.Occurrence(e.ID), s.Keys.Counters(), s.Keys.History(e.Schedule)}, args...).Err()
}

func parseRecord(h map[string]string) Record {
	num := func(k string) int64 {
		n, _ := strconv.ParseInt(h[k], 10, 64)
		return n
	}
	return Record{ID: h["id"], Schedule: h["schedule"], Outcome: h["outcome"], Error: h["error"], Replica: h["replica"],
		Slot: num("slot"), Manual: h["manual"] == "1", EnqueuedAt: num("enqueued_at"), RecordedAt: num("recorded_at"), StartedAt: num("started_at"),
		FinishedAt: num("finished_at"), DurationMS: num("duration_ms"), Attempt: int(num("attempt")),
		MaxRetry: int(num("max_retry")), Actor: h["actor"], Member: h["member"]}
}

// History returns the newest n record IDs of a schedule, newest first.
func (s *Store) History(ctx context.Context, name string, n int) ([]string, error) {
	return s.rdb.ZRevRange(ctx, s.Keys.History(name), 0, int64(n)-1).Result()
}

// RecentIDs returns each schedule's newest n record IDs in one pipelined
// round trip.
func (s *Store) RecentIDs(ctx context.Context, names []string, n int) ([][]string, error) {
	cmds := make([]*redis.StringSliceCmd, len(names))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, name := range names {
			cmds[i] = p.ZRevRange(ctx, s.Keys.History(name), 0, int64(n)-1)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([][]string, len(names))
	for i, c := range cmds {
		out[i] = c.Val()
	}
	return out, nil
}

// Records reads records in one pipelined round trip, skipping any that
// expired meanwhile.
func (s *Store) Records(ctx context.Context, ids []string) ([]Record, error) {
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, s.Keys.Occurrence(id))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	recs := make([]Record, 0, len(cmds))
	for _, c := range cmds {
		if h := c.Val(); len(h) > 0 {
			recs = append(recs, parseRecord(h))
		}
	}
	return recs, nil
}

// Stats returns every schedule's counters: schedule -> counter -> value,
// those at 0 left out. It reads the counters hash in HSCAN steps, each of
// which holds Redis for a moment whatever the number of schedules. So it
// is not a read of one moment: counters written while it runs may or may
// not be in it.
func (s *Store) Stats(ctx context.Context) (map[string]map[string]int64, error) {
	if err := s.settleCounters(ctx); err != nil {
		return nil, err
	}
	out := map[string]map[string]int64{}
	err := s.scanHash(ctx, s.Keys.Counters(), func(name, v string) { out[name] = ParseCounters(v) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Forget removes every trace of a schedule and reports how many keys and
// fields it removed. Its counters in the old layout, if not yet folded,
// are deleted by the names of CounterLayout, which holds every counter a
// schedule can have.
func (s *Store) Forget(ctx context.Context, name string) (int64, error) {
	args := make([]any, 0, 2+len(CounterLayout))
	args = append(args, s.Keys.Prefix, name)
	for _, c := range CounterLayout {
		args = append(args, c)
	}
	n, err := forgetScript.Run(ctx, s.rdb, []string{s.Keys.Cursors}, args...).Int64()
	if err != nil {
		return n, err
	}
	m, err := s.forgetFamily(ctx, name)
	return n + m, err
}

// SetPause pauses a schedule, replacing an earlier pause's reason and
// actor; a pause already in place keeps its start.
func (s *Store) SetPause(ctx context.Context, name string, p Pause) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return s.Acks.Run(ctx, s.rdb, pauseScript, []string{s.Keys.Paused, s.Keys.PauseVersion}, name, b).Err()
}

// ClearPause resumes a schedule and notes when, so that slots paused before
// it are never reported late. It reports whether the schedule was paused.
func (s *Store) ClearPause(ctx context.Context, name string, at int64) (bool, error) {
	n, err := s.Acks.Run(ctx, s.rdb, resumeScript, []string{s.Keys.Paused, s.Keys.Counters(), s.Keys.Resumed, s.Keys.Cursors, s.Keys.PauseVersion},
		name, at, MaxPauseWindows).Int()
	return n == 1, err
}

// Acknowledged returns once replicas acknowledge every write Redis ran
// before it (Acks; at once when off), or ErrNotAcked: a write and a WAIT on
// one connection, whose acknowledgement covers the earlier writes of every
// connection, replication being in order. It is for the writes that go
// through asynq's client (a manual run's enqueue), which cannot carry a
// WAIT of their own.
func (s *Store) Acknowledged(ctx context.Context) error {
	return s.Acks.Barrier(ctx, s.rdb, s.Keys.Acked, ackBarrierLife)
}

// ackBarrierLife is how long the write Acknowledged makes stays.
const ackBarrierLife = time.Minute

// MaxPauseWindows bounds the pause windows kept per schedule that its
// cursor has not passed yet.
const MaxPauseWindows = 16

// AllPauses returns every pause the namespace holds, by schedule. It reads
// the paused hash in HSCAN steps, so its cost is the number of schedules
// paused, whatever the number declared: reading the pauses of 100,000
// names by HMGET walked a 500-field listpack once a name, 400 calls each
// long enough to be among those past the 5 ms budget on a busy host
// (BENCHMARKS.md, "Limits in the code").
func (s *Store) AllPauses(ctx context.Context) (map[string]*Pause, error) {
	out := map[string]*Pause{}
	err := s.scanHash(ctx, s.Keys.Paused, func(name, v string) {
		if p := ParsePause(v); p != nil {
			out[name] = p
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// parseWindow reads one field of the resumed hash: "<from> <to> <from>
// <to> ..." (unix ms).
func parseWindow(str string) []PauseWindow {
	var out []PauseWindow
	nums := strings.Fields(str)
	for j := 0; j+1 < len(nums); j += 2 {
		f, err1 := strconv.ParseInt(nums[j], 10, 64)
		t, err2 := strconv.ParseInt(nums[j+1], 10, 64)
		if err1 == nil && err2 == nil {
			out = append(out, PauseWindow{From: f, To: t})
		}
	}
	return out
}

// Epoch returns the store's epoch, creating it with candidate if there is
// none; created says it did.
func (s *Store) Epoch(ctx context.Context, leaseValue, candidate string) (epoch string, created bool, err error) {
	res, err := s.Acks.Run(ctx, s.rdb, epochScript, []string{s.Keys.Lease, s.Keys.Epoch}, leaseValue, candidate).Result()
	if err != nil {
		return "", false, err
	}
	pair, ok := res.([]any)
	if !ok || len(pair) != 2 {
		return "", false, ErrNotLeader
	}
	epoch, _ = pair[0].(string)
	n, _ := pair[1].(int64)
	return epoch, n == 1, nil
}

// CurrentEpoch returns the store's epoch, or "" if none has been made yet.
func (s *Store) CurrentEpoch(ctx context.Context) (string, error) {
	epoch, err := s.rdb.Get(ctx, s.Keys.Epoch).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return epoch, err
}

// Time is Redis's clock: the one clock every replica shares.
func (s *Store) Time(ctx context.Context) (time.Time, error) {
	return s.rdb.Time(ctx).Result()
}

// lostKept bounds the loss events kept.
const lostKept = 20

// RecordLost keeps a loss event, newest first.
func (s *Store) RecordLost(ctx context.Context, l LostWrites) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.LPush(ctx, s.Keys.Lost, b)
		p.LTrim(ctx, s.Keys.Lost, 0, lostKept-1)
		return nil
	})
	return err
}

// Lost returns the kept loss events, newest first.
func (s *Store) Lost(ctx context.Context) ([]LostWrites, error) {
	raw, err := s.rdb.LRange(ctx, s.Keys.Lost, 0, -1).Result()
	if err != nil {
		return nil, err
	}
	out := make([]LostWrites, 0, len(raw))
	for _, r := range raw {
		var l LostWrites
		if json.Unmarshal([]byte(r), &l) == nil {
			out = append(out, l)
		}
	}
	return out, nil
}

package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// Outcomes recorded in the ledger.
const (
	OutcomeEnqueued  = "enqueued"
	OutcomeRunning   = "running"
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
	OutcomeMissed    = "missed"
	OutcomeSkipped   = "skipped"
)

// maxErrorLen bounds a recorded error message.
const maxErrorLen = 2000

// Record is one occurrence in the ledger.
type Record struct {
	ID         string        `json:"task_id"`
	Schedule   string        `json:"schedule"`
	Slot       time.Time     `json:"slot"`
	Manual     bool          `json:"manual"`
	Outcome    string        `json:"outcome"`
	EnqueuedAt time.Time     `json:"enqueued_at,omitzero"`
	StartedAt  time.Time     `json:"started_at,omitzero"`
	FinishedAt time.Time     `json:"finished_at,omitzero"`
	Duration   time.Duration `json:"-"`
	DurationMS int64         `json:"duration_ms,omitempty"`
	Error      string        `json:"error,omitempty"`
	Attempt    int           `json:"attempt,omitempty"`
	Replica    string        `json:"replica,omitempty"`
}

// Middleware returns the worker-side recorder: it marks the occurrence
// running, then succeeded or failed with duration and error. Ledger writes
// that fail are logged and never fail the handler.
func (r *Runtime) Middleware() registry.Middleware {
	return func(s *registry.Schedule, next registry.HandlerFunc) registry.HandlerFunc {
		return func(ctx context.Context, occ registry.Occurrence) error {
			start := time.Now()
			attempt, _ := asynq.GetRetryCount(ctx)
			r.recordExecution(ctx, occ, OutcomeRunning, "started_at", start.UnixMilli(),
				"attempt", attempt, "replica", r.opts.Replica)
			err := next(ctx, occ)
			end := time.Now()
			if err != nil {
				msg := err.Error()
				if len(msg) > maxErrorLen {
					msg = msg[:maxErrorLen] + "…"
				}
				r.recordExecution(ctx, occ, OutcomeFailed, "finished_at", end.UnixMilli(),
					"duration_ms", end.Sub(start).Milliseconds(), "error", msg)
				return err
			}
			r.recordExecution(ctx, occ, OutcomeSucceeded, "finished_at", end.UnixMilli(),
				"duration_ms", end.Sub(start).Milliseconds(), "error", "")
			return nil
		}
	}
}

func (r *Runtime) recordExecution(ctx context.Context, occ registry.Occurrence, outcome string, fields ...any) {
	if r.disabled != "" {
		return
	}
	key := r.keys.occurrence(occ.Key())
	ctx = context.WithoutCancel(ctx) // record the failure of a timed-out handler too
	_, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, key, append([]any{"outcome", outcome}, fields...)...)
		p.Expire(ctx, key, r.ledgerTTL())
		switch outcome {
		case OutcomeSucceeded:
			p.HSet(ctx, r.keys.stats, occ.Schedule+":last_success", time.Now().UnixMilli())
			p.HIncrBy(ctx, r.keys.stats, occ.Schedule+":succeeded", 1)
		case OutcomeFailed:
			p.HSet(ctx, r.keys.stats, occ.Schedule+":last_failure", time.Now().UnixMilli())
			p.HIncrBy(ctx, r.keys.stats, occ.Schedule+":failed", 1)
		}
		return nil
	})
	if err != nil {
		r.log.Warn("could not record execution in the ledger", "id", occ.Key(), "outcome", outcome, "err", err)
	}
}

// History returns the schedule's most recent occurrences, newest first.
func (r *Runtime) History(ctx context.Context, name string, limit int) ([]Record, error) {
	if _, ok := r.reg.Lookup(name); !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownSchedule, name)
	}
	if r.disabled != "" {
		return nil, nil
	}
	ids, err := r.rdb.ZRevRange(ctx, r.keys.history(name), 0, int64(limit)-1).Result()
	if err != nil {
		return nil, err
	}
	return r.readRecords(ctx, ids)
}

// readRecords reads occurrence records in one pipelined round trip,
// skipping any that expired meanwhile.
func (r *Runtime) readRecords(ctx context.Context, ids []string) ([]Record, error) {
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, r.keys.occurrence(id))
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

func parseRecord(h map[string]string) Record {
	ms := func(k string) time.Time {
		if n, err := strconv.ParseInt(h[k], 10, 64); err == nil && n > 0 {
			return time.UnixMilli(n).UTC()
		}
		return time.Time{}
	}
	rec := Record{ID: h["id"], Schedule: h["schedule"], Manual: h["manual"] == "1", Outcome: h["outcome"],
		EnqueuedAt: ms("enqueued_at"), StartedAt: ms("started_at"), FinishedAt: ms("finished_at"),
		Error: h["error"], Replica: h["replica"]}
	if sec, err := strconv.ParseInt(h["slot"], 10, 64); err == nil {
		rec.Slot = time.Unix(sec, 0).UTC()
	}
	if d, err := strconv.ParseInt(h["duration_ms"], 10, 64); err == nil {
		rec.Duration, rec.DurationMS = time.Duration(d)*time.Millisecond, d
	}
	rec.Attempt, _ = strconv.Atoi(h["attempt"])
	return rec
}

// Counters are a schedule's totals across the cluster since the ledger
// began, and the times of its last enqueue, success and failure.
type Counters struct {
	Enqueued, Manual, Missed, Skipped, Succeeded, Failed int64
	LastEnqueue, LastSuccess, LastFailure                time.Time
	// FirstSeen is when the scheduler first saw the schedule; slots
	// before it were never meant to run.
	FirstSeen time.Time
}

// Counters returns every schedule's counters in one round trip.
func (r *Runtime) Counters(ctx context.Context) (map[string]Counters, error) {
	out := make(map[string]Counters, r.reg.Len())
	if r.disabled != "" {
		return out, nil
	}
	all, err := r.rdb.HGetAll(ctx, r.keys.stats).Result()
	if err != nil {
		return nil, err
	}
	for field, v := range all {
		i := strings.LastIndexByte(field, ':')
		if i < 0 {
			continue
		}
		name, counter := field[:i], field[i+1:]
		n, _ := strconv.ParseInt(v, 10, 64)
		c := out[name]
		switch counter {
		case "enqueued":
			c.Enqueued = n
		case "manual":
			c.Manual = n
		case "missed":
			c.Missed = n
		case "skipped":
			c.Skipped = n
		case "succeeded":
			c.Succeeded = n
		case "failed":
			c.Failed = n
		case "last_enqueue":
			c.LastEnqueue = time.UnixMilli(n).UTC()
		case "last_success":
			c.LastSuccess = time.UnixMilli(n).UTC()
		case "last_failure":
			c.LastFailure = time.UnixMilli(n).UTC()
		case "first_seen":
			c.FirstSeen = time.UnixMilli(n).UTC()
		}
		out[name] = c
	}
	return out, nil
}

// Cluster is the replicas' view: who holds the lease and who is alive.
type Cluster struct {
	Leader   string   `json:"leader"` // replica name, "" if none
	Token    int64    `json:"lease_token,omitempty"`
	Replicas []string `json:"replicas"`
}

// Cluster reads the lease holder and the replicas with a fresh heartbeat.
func (r *Runtime) Cluster(ctx context.Context) (Cluster, error) {
	var c Cluster
	if r.disabled != "" {
		return c, nil
	}
	var leaseCmd *redis.StringCmd
	var replicasCmd *redis.Cmd
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		leaseCmd = p.Get(ctx, r.keys.lease)
		// Eval, not Run: inside a pipeline a NOSCRIPT error cannot fall back.
		replicasCmd = liveReplicasScript.Eval(ctx, p, []string{r.keys.replicas}, r.lease.heartbeatStale().Milliseconds())
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return c, err
	}
	if v, err := leaseCmd.Result(); err == nil {
		if i := strings.LastIndexByte(v, '|'); i > 0 {
			c.Leader = v[:i]
			c.Token, _ = strconv.ParseInt(v[i+1:], 10, 64)
		}
	}
	c.Replicas, _ = replicasCmd.StringSlice()
	return c, nil
}

// recentRecords returns each schedule's newest n records, newest first, in
// two pipelined round trips whatever the number of schedules.
func (r *Runtime) recentRecords(ctx context.Context, n int) (map[string][]Record, error) {
	out := map[string][]Record{}
	if r.disabled != "" {
		return out, nil
	}
	scheds := r.reg.Schedules()
	idCmds := make([]*redis.StringSliceCmd, len(scheds))
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, s := range scheds {
			idCmds[i] = p.ZRevRange(ctx, r.keys.history(s.Name), 0, int64(n)-1)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	var ids []string
	for _, c := range idCmds {
		ids = append(ids, c.Val()...)
	}
	recs, err := r.readRecords(ctx, ids)
	for _, rec := range recs {
		out[rec.Schedule] = append(out[rec.Schedule], rec)
	}
	return out, err
}

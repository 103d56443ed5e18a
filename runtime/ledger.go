package runtime

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/internal/lease"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/hibiken/asynq"
)

// Counter names in the ledger's stats, beside one per Outcome.
const (
	counterManual      = "manual"
	counterLastEnqueue = "last_enqueue"
	counterLastSuccess = "last_success"
	counterLastFailure = "last_failure"
	counterFirstSeen   = "first_seen"
)

// maxErrorLen bounds a recorded error message.
const maxErrorLen = 2000

// Record is one occurrence in the ledger.
type Record struct {
	ID         string        `json:"task_id"`
	Schedule   string        `json:"schedule"`
	Slot       time.Time     `json:"slot"`
	Manual     bool          `json:"manual"`
	Outcome    Outcome       `json:"outcome"`
	EnqueuedAt time.Time     `json:"enqueued_at,omitzero"`
	StartedAt  time.Time     `json:"started_at,omitzero"`
	FinishedAt time.Time     `json:"finished_at,omitzero"`
	Duration   time.Duration `json:"-"`
	DurationMS int64         `json:"duration_ms,omitempty"`
	Error      string        `json:"error,omitempty"`
	Attempt    int           `json:"attempt,omitempty"`
	Replica    string        `json:"replica,omitempty"`
}

func unixMilli(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func recordOf(s store.Record) Record {
	return Record{ID: s.ID, Schedule: s.Schedule, Slot: time.Unix(s.Slot, 0).UTC(), Manual: s.Manual,
		Outcome: Outcome(s.Outcome), EnqueuedAt: unixMilli(s.EnqueuedAt), StartedAt: unixMilli(s.StartedAt),
		FinishedAt: unixMilli(s.FinishedAt), Duration: time.Duration(s.DurationMS) * time.Millisecond,
		DurationMS: s.DurationMS, Error: s.Error, Attempt: s.Attempt, Replica: s.Replica}
}

// Middleware returns the worker-side recorder: it marks the occurrence
// running, then succeeded or failed with duration and error. Ledger writes
// that fail are logged and never fail the handler.
func (r *Runtime) Middleware() registry.Middleware {
	return func(s *registry.Schedule, next registry.HandlerFunc) registry.HandlerFunc {
		return func(ctx context.Context, occ registry.Occurrence) error {
			start := r.clock.Now()
			attempt, _ := asynq.GetRetryCount(ctx)
			r.recordExecution(ctx, occ, OutcomeRunning, start, "started_at", start.UnixMilli(),
				"attempt", attempt, "replica", r.opts.Replica)
			err := next(ctx, occ)
			end := r.clock.Now()
			if err != nil {
				msg := err.Error()
				if len(msg) > maxErrorLen {
					msg = msg[:maxErrorLen] + "…"
				}
				r.recordExecution(ctx, occ, OutcomeFailed, end, "finished_at", end.UnixMilli(),
					"duration_ms", end.Sub(start).Milliseconds(), "error", msg)
				return err
			}
			r.recordExecution(ctx, occ, OutcomeSucceeded, end, "finished_at", end.UnixMilli(),
				"duration_ms", end.Sub(start).Milliseconds(), "error", "")
			return nil
		}
	}
}

func (r *Runtime) recordExecution(ctx context.Context, occ registry.Occurrence, outcome Outcome, at time.Time, fields ...any) {
	if r.disabled != "" {
		return
	}
	e := store.Execution{ID: occ.Key(), Schedule: occ.Schedule, Slot: occ.Slot, At: at,
		Fields: append([]any{"outcome", string(outcome)}, fields...)}
	if occ.Manual {
		e.Fields = append(e.Fields, "manual", "1")
	}
	switch outcome {
	case OutcomeSucceeded:
		e.Count, e.Last = string(OutcomeSucceeded), counterLastSuccess
	case OutcomeFailed:
		e.Count, e.Last = string(OutcomeFailed), counterLastFailure
	}
	// Record the failure of a timed-out handler too.
	if err := r.store.RecordExecution(context.WithoutCancel(ctx), e); err != nil {
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
	ids, err := r.store.History(ctx, name, limit)
	if err != nil {
		return nil, err
	}
	return r.records(ctx, ids)
}

func (r *Runtime) records(ctx context.Context, ids []string) ([]Record, error) {
	stored, err := r.store.Records(ctx, ids)
	recs := make([]Record, len(stored))
	for i, s := range stored {
		recs[i] = recordOf(s)
	}
	return recs, err
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

func countersOf(m map[string]int64) Counters {
	return Counters{
		Enqueued: m[string(OutcomeEnqueued)], Manual: m[counterManual], Missed: m[string(OutcomeMissed)],
		Skipped: m[string(OutcomeSkipped)], Succeeded: m[string(OutcomeSucceeded)], Failed: m[string(OutcomeFailed)],
		LastEnqueue: unixMilli(m[counterLastEnqueue]), LastSuccess: unixMilli(m[counterLastSuccess]),
		LastFailure: unixMilli(m[counterLastFailure]), FirstSeen: unixMilli(m[counterFirstSeen]),
	}
}

// Counters returns every schedule's counters in one round trip.
func (r *Runtime) Counters(ctx context.Context) (map[string]Counters, error) {
	out := make(map[string]Counters, r.reg.Len())
	if r.disabled != "" {
		return out, nil
	}
	stats, err := r.store.Stats(ctx)
	if err != nil {
		return nil, err
	}
	for name, m := range stats {
		out[name] = countersOf(m)
	}
	return out, nil
}

// Orphans returns the schedules that have state in Redis (cursor, counters
// or history) but are no longer in the registry: removed from the code, or
// renamed. Their state stays until Forget removes it; nothing expires it,
// because a schedule removed by mistake and restored must find its cursor.
func (r *Runtime) Orphans(ctx context.Context) ([]string, error) {
	if r.disabled != "" {
		return nil, nil
	}
	known, err := r.store.Known(ctx)
	if err != nil {
		return nil, err
	}
	var orphans []string
	for _, name := range known {
		if _, ok := r.reg.Lookup(name); !ok {
			orphans = append(orphans, name)
		}
	}
	slices.Sort(orphans)
	return orphans, nil
}

// Forget removes every trace of a schedule that is no longer in the
// registry (see Orphans). It refuses with ErrScheduleInUse for a schedule
// the registry declares, and is a no-op for a name with no state.
func (r *Runtime) Forget(ctx context.Context, name string) error {
	if _, ok := r.reg.Lookup(name); ok {
		return fmt.Errorf("%w: %q", ErrScheduleInUse, name)
	}
	if r.disabled != "" {
		return ErrDisabled
	}
	n, err := r.store.Forget(ctx, name)
	if err == nil && n > 0 {
		r.log.Info("forgot a schedule removed from the registry", "schedule", name, "removed", n)
	}
	return err
}

// Cluster is the replicas' view: who holds the lease and who is alive.
type Cluster struct {
	Leader   string   `json:"leader"` // replica name, "" if none
	Token    int64    `json:"lease_token,omitempty"`
	Replicas []string `json:"replicas"`
}

// Cluster reads the lease holder and the replicas with a fresh heartbeat.
func (r *Runtime) Cluster(ctx context.Context) (Cluster, error) {
	if r.disabled != "" {
		return Cluster{}, nil
	}
	h, err := lease.Observe(ctx, r.rdb, r.store.Keys, r.lease.HeartbeatStale())
	return Cluster{Leader: h.Replica, Token: h.Token, Replicas: h.Replicas}, err
}

// recentRecords returns each schedule's newest n records, newest first, in
// two pipelined round trips whatever the number of schedules.
func (r *Runtime) recentRecords(ctx context.Context, n int) (map[string][]Record, error) {
	out := map[string][]Record{}
	if r.disabled != "" {
		return out, nil
	}
	scheds := r.reg.Schedules()
	names := make([]string, len(scheds))
	for i, s := range scheds {
		names[i] = s.Name
	}
	perSchedule, err := r.store.RecentIDs(ctx, names, n)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, p := range perSchedule {
		ids = append(ids, p...)
	}
	recs, err := r.records(ctx, ids)
	for _, rec := range recs {
		out[rec.Schedule] = append(out[rec.Schedule], rec)
	}
	return out, err
}

package core

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/checkpoint"
	"github.com/belfry/belfry/runtime/engine"
)

// Counter names in the ledger's stats, beside one per Outcome.
const (
	counterManual      = "manual"
	counterLastEnqueue = "last_enqueue"
	counterLastSuccess = "last_success"
	counterLastFailure = "last_failure"
	counterFirstSeen   = "first_seen"
	counterLastResume  = "last_resume"
	// counterLastSlotSuccess is the last success of a slot's own work: a
	// scheduled occurrence or a re-run of one, not a "run now".
	counterLastSlotSuccess = "last_slot_success"
)

// frequentHistory is the history a schedule keeps whose slots come less
// than a minute apart, when HistoryLimit is larger. Its records cover a few
// seconds either way, and at 50 a per-second schedule's records alone
// would take most of the 30 kB of Redis a per-second schedule may cost
// (redis_kb_per_1s in BENCHMARKS.md). Kubernetes keeps 3 successful jobs
// of a CronJob by default; the counters keep the totals.
const frequentHistory = 20

// historyLimits returns the schedules that keep fewer records than limit.
func historyLimits(reg *registry.Registry, limit int) map[string]int {
	out := map[string]int{}
	if limit <= frequentHistory {
		return out
	}
	// Frequent: from three arbitrary instants of the year, the next two
	// slots are less than a minute away each time (a burst once a day and
	// a seconds field once a minute are not).
	from := []time.Time{time.Date(2026, 1, 7, 0, 0, 0, 0, time.UTC), time.Date(2026, 5, 13, 9, 17, 0, 0, time.UTC),
		time.Date(2026, 9, 17, 15, 41, 0, 0, time.UTC)}
	for _, s := range reg.Schedules() {
		if f := strings.Fields(s.Expr); len(f) < 6 && !strings.HasPrefix(s.Expr, "@every") {
			continue // five fields fire at most once a minute
		}
		frequent := true
		for _, t := range from {
			next := s.Next(t)
			if after := s.Next(next); next.IsZero() || after.IsZero() || next.Sub(t) >= time.Minute || after.Sub(next) >= time.Minute {
				frequent = false
				break
			}
		}
		if frequent {
			out[s.Name] = frequentHistory
		}
	}
	return out
}

// maxErrorLen bounds a recorded error message.
const maxErrorLen = 2000

// Record is one occurrence in the ledger.
//
// In JSON, "occurrence_id" is ID and "task_id" is TaskID: null for a
// missed, skipped or paused slot, which was never enqueued and has no
// task, as it has no "enqueued_at" ("recorded_at" says when it was
// recorded).
type Record struct {
	// ID is the occurrence's ID, which is its asynq task ID once it is
	// enqueued (see TaskID).
	ID         string    `json:"task_id"`
	Schedule   string    `json:"schedule"`
	Slot       time.Time `json:"slot"`
	Manual     bool      `json:"manual"`
	Outcome    Outcome   `json:"outcome"`
	EnqueuedAt time.Time `json:"enqueued_at,omitzero"`
	// RecordedAt is when a slot that was never enqueued (missed, skipped,
	// paused) was recorded; zero for the others.
	RecordedAt time.Time     `json:"recorded_at,omitzero"`
	StartedAt  time.Time     `json:"started_at,omitzero"`
	FinishedAt time.Time     `json:"finished_at,omitzero"`
	Duration   time.Duration `json:"-"`
	DurationMS int64         `json:"duration_ms,omitempty"`
	Error      string        `json:"error,omitempty"`
	// Attempt is asynq's retry count of the newest attempt: 0 for the
	// first; MaxRetry is how many retries it has in all.
	Attempt  int    `json:"attempt,omitempty"`
	MaxRetry int    `json:"max_retry,omitempty"`
	Replica  string `json:"replica,omitempty"`
	// Actor is who asked for a manual occurrence, if the admin knew.
	Actor string `json:"actor,omitempty"`
	// Member is, for a family, the member the occurrence was for.
	Member string `json:"member,omitempty"`
	// Progress is a checkpointed handler's saved progress; nil for a
	// handler that keeps none.
	Progress *Progress `json:"progress,omitempty"`
}

func unixMilli(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func recordOf(s engine.Record) Record {
	rec := Record{ID: s.ID, Schedule: s.Schedule, Slot: time.Unix(s.Slot, 0).UTC(), Manual: s.Manual,
		Outcome: Outcome(s.Outcome), EnqueuedAt: unixMilli(s.EnqueuedAt), RecordedAt: unixMilli(s.RecordedAt),
		StartedAt: unixMilli(s.StartedAt), FinishedAt: unixMilli(s.FinishedAt),
		Duration: time.Duration(s.DurationMS) * time.Millisecond, DurationMS: s.DurationMS, Error: s.Error,
		Attempt: s.Attempt, MaxRetry: s.MaxRetry, Replica: s.Replica, Actor: s.Actor, Member: s.Member}
	if !rec.Outcome.enqueued() && rec.RecordedAt.IsZero() {
		// Written before such records said when they were recorded: the
		// time they gave as enqueued is that.
		rec.RecordedAt, rec.EnqueuedAt = rec.EnqueuedAt, time.Time{}
	}
	return rec
}

// TaskID is the occurrence's asynq task ID, "" for a slot that was never
// enqueued (missed, skipped, paused) or not yet (buffered).
func (r Record) TaskID() string {
	if !r.Outcome.enqueued() {
		return ""
	}
	return r.ID
}

// MarshalJSON writes the record as its struct tags say, with "task_id"
// null for a slot that was never enqueued and "occurrence_id" beside it.
func (r Record) MarshalJSON() ([]byte, error) {
	type fields Record
	return json.Marshal(struct {
		TaskID       *string `json:"task_id"`
		OccurrenceID string  `json:"occurrence_id"`
		fields
	}{taskIDOrNil(r.ID, r.Outcome), r.ID, fields(r)})
}

// UnmarshalJSON reads what MarshalJSON writes, and a record without
// "occurrence_id".
func (r *Record) UnmarshalJSON(b []byte) error {
	type fields Record
	var v struct {
		OccurrenceID string `json:"occurrence_id"`
		fields
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = Record(v.fields)
	r.ID = cmp.Or(v.OccurrenceID, r.ID)
	return nil
}

// taskIDOrNil is id for an occurrence that was enqueued, nil for one
// that never was.
func taskIDOrNil(id string, o Outcome) *string {
	if !o.enqueued() {
		return nil
	}
	return &id
}

// Middleware returns the worker-side recorder. Every execution ends in a
// recorded outcome, whichever way it ends:
//
//   - the handler returns nil: succeeded;
//   - it returns an error: retrying (asynq will run it again) or failed (the
//     last attempt; asynq archives it), with the error text;
//   - it panics: the same, with the panic value and a short stack excerpt;
//     the panic is turned into an error, so the worker keeps running and
//     retry= applies;
//   - it runs past its timeout: recorded failed or retrying ("timeout after
//     2s") the moment the deadline passes, whether the handler ever returns
//     or not, as asynq itself gives up on it then;
//   - overlap=replace cancels it: the leader recorded it replaced before
//     the cancel, and the record stays so; a later delivery of it (asynq
//     retries a cancelled task) returns at once without running.
//
// Each attempt is counted. Ledger writes that fail are logged and never
// fail the handler.
func (r *Runtime) Middleware() registry.Middleware {
	return func(s *registry.Schedule, next registry.HandlerFunc) registry.HandlerFunc {
		return func(ctx context.Context, occ registry.Occurrence) (err error) {
			if r.replacedBy(ctx, s, occ) != "" {
				// overlap=replace cancelled it; asynq delivers a cancelled
				// task again as a retry, which has nothing to do.
				return nil
			}
			attempt, maxRetry := r.attemptOf(ctx, s)
			start := r.clock.Now()
			hold, started, err := r.startAttempt(ctx, attempt)
			switch {
			case started.Elsewhere:
				// The ledger has the other delivery's record of the attempt.
				r.log.Warn("not running an attempt that another delivery of its task ran (a failover delivered it twice)",
					"id", occ.Key(), "attempt", attempt, "failed", started.Verdict != nil)
				return started.Verdict
			case err != nil:
				// Nothing ran, and the ledger's record of the attempt, if
				// any, is the other delivery's: leave it as it is.
				r.log.Warn("attempt not started", "id", occ.Key(), "attempt", attempt, "err", err)
				return err
			}
			stop := hold.keepAlive(ctx) // from now: the ledger's writes may take a while
			r.recordExecution(ctx, occ, attempt, OutcomeRunning, start, "started_at", start.UnixMilli(),
				"max_retry", maxRetry, "replica", r.opts.Replica, "finished_at", 0, "duration_ms", 0, "error", "")
			ctx, bound := r.bindCheckpoint(ctx, s, occ)
			if bound != nil {
				r.checkpoints.Add(1)
				defer r.checkpoints.Add(-1)
			}
			err = runHandler(ctx, next, occ, bound)
			stop()
			hold.finish(ctx, err)
			end := r.clock.Now()
			if err != nil && errors.Is(ctx.Err(), context.Canceled) {
				if by := r.replacedBy(ctx, s, occ); by != "" {
					// Not a failure, and not to be retried. The leader
					// recorded it replaced before the cancel; this
					// attempt's "running" may have landed after that.
					r.recordExecution(ctx, occ, attempt, OutcomeReplaced, end, "finished_at", end.UnixMilli(),
						"duration_ms", end.Sub(start).Milliseconds(), "error", replacedError(by))
					return err
				}
			}
			outcome := OutcomeSucceeded
			var interrupted *checkpoint.Interrupted
			var superseded *checkpoint.Superseded
			switch {
			case errors.As(err, &superseded) && superseded.By == progressKey(occ):
				// A newer attempt of this occurrence runs it and writes its
				// record: this one leaves the record to it.
				r.log.Warn("a stale attempt stopped: a newer attempt of its occurrence took its progress over",
					"id", occ.Key(), "attempt", attempt)
				return nil
			case errors.As(err, &superseded):
				// The next occurrence took the work over (resume=next): this
				// one's queue must not retry it.
				outcome = OutcomeContinued
				defer func() { err = nil }()
			case errors.As(err, &interrupted):
				outcome = OutcomeContinued
			case err != nil:
				err = explain(ctx, s, err)
				outcome = OutcomeFailed
				if attempt < maxRetry && !r.skipsRetry(err) {
					outcome = OutcomeRetrying
				}
			}
			msg := ""
			if err != nil {
				msg = err.Error()
				if len(msg) > maxErrorLen {
					msg = msg[:maxErrorLen] + "…"
				}
			}
			r.recordExecution(ctx, occ, attempt, outcome, end, "finished_at", end.UnixMilli(),
				"duration_ms", end.Sub(start).Milliseconds(), "error", msg)
			r.emit(Event{Schedule: s.Name, Outcome: outcome, Manual: occ.Manual, Duration: end.Sub(start)})
			return err
		}
	}
}

// runHandler runs the handler until it returns or its deadline passes. A
// checkpointed handler (bound not nil) whose context ended is given
// checkpointGrace to save its place and return.
func runHandler(ctx context.Context, next registry.HandlerFunc, occ registry.Occurrence, bound *checkpoint.Binding) error {
	done := make(chan error, 1)
	go func() { done <- callRecovering(ctx, next, occ) }()
	select {
	case err := <-done:
		// A handler that returned nil after its deadline still overran
		// it: asynq has already failed the attempt.
		if err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		return err
	case <-ctx.Done():
		if bound == nil || !bound.Started() {
			return ctx.Err()
		}
	}
	grace := time.NewTimer(checkpointGrace)
	defer grace.Stop()
	select {
	case err := <-done:
		if err == nil {
			err = ctx.Err()
		}
		return err
	case <-grace.C:
		return ctx.Err()
	}
}

// panicError is a handler's panic, as an error asynq can retry.
type panicError struct {
	value any
	stack string
}

func (p *panicError) Error() string { return fmt.Sprintf("panic: %v\n%s", p.value, p.stack) }

// callRecovering runs the handler and turns a panic into an error.
func callRecovering(ctx context.Context, h registry.HandlerFunc, occ registry.Occurrence) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: stackExcerpt(debug.Stack())}
		}
	}()
	return h(ctx, occ)
}

// stackExcerpt keeps the frames of a panic's stack that locate it: those
// after the runtime's own panic frames, at most eight lines. A middleware
// that recovers a panic and panics again (a tracer noting it) leaves its
// frames and a second panic call above the first: the excerpt starts
// after the deepest panic call, where the handler panicked.
func stackExcerpt(stack []byte) string {
	lines := strings.Split(strings.TrimSpace(string(stack)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "panic(") {
			lines = lines[min(i+2, len(lines)):] // the panic call and its file line
			break
		}
	}
	return strings.Join(lines[:min(len(lines), 8)], "\n")
}

// explain says why a context error ended an attempt.
func explain(ctx context.Context, s *registry.Schedule, err error) error {
	switch {
	case !errors.Is(err, ctx.Err()) || ctx.Err() == nil:
		return err
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("timeout after %s: %w", s.Timeout, err)
	}
	return fmt.Errorf("interrupted (the worker stopped or the task was cancelled): %w", err)
}

func (r *Runtime) recordExecution(ctx context.Context, occ registry.Occurrence, attempt int, outcome Outcome, at time.Time, fields ...any) {
	if r.disabled != "" {
		return
	}
	e := engine.Execution{ID: occ.ID, Schedule: occ.Schedule, Slot: occ.Slot, At: at, Attempt: attempt,
		Fields: append([]any{"outcome", string(outcome)}, fields...)}
	if e.ID == "" {
		e.ID = occ.Key()
	}
	if occ.Manual {
		e.Fields = append(e.Fields, "manual", "1")
	}
	if occ.Member != "" {
		e.Fields = append(e.Fields, "member", occ.Member)
	}
	switch outcome {
	case OutcomeSucceeded:
		e.Count, e.Last = string(OutcomeSucceeded), counterLastSuccess
		if !occ.Manual || occ.RerunOf != "" {
			e.AlsoLast = counterLastSlotSuccess
		}
	case OutcomeFailed, OutcomeRetrying:
		e.Count, e.Last = string(OutcomeFailed), counterLastFailure
	}
	// Record the failure of a timed-out handler too.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.eng.RecordExecution(ctx, e); err != nil {
		r.log.Warn("could not record execution in the ledger", "id", e.ID, "outcome", outcome, "err", err)
	}
	if occ.Member != "" {
		r.noteMemberRun(ctx, occ, outcome, at)
	}
	// The execution state lets Statuses find failing and running schedules
	// without reading every schedule's history.
	if err := r.eng.NoteExecution(ctx, occ.Schedule, string(outcome), at.UnixMilli()); err != nil {
		r.log.Warn("could not record the schedule's execution state", "schedule", occ.Schedule, "outcome", outcome, "err", err)
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
	// bounded: the request's deadline bounds the read whatever the client's
	// own timeouts, so a slow Redis makes a page say so in time.
	return bounded(ctx, func(ctx context.Context) ([]Record, error) {
		ids, err := r.eng.History(ctx, name, limit)
		if err != nil {
			return nil, err
		}
		return r.records(ctx, ids)
	})
}

func (r *Runtime) records(ctx context.Context, ids []string) ([]Record, error) {
	stored, err := r.eng.Records(ctx, ids)
	recs := make([]Record, len(stored))
	for i, s := range stored {
		recs[i] = recordOf(s)
	}
	if err == nil {
		err = r.attachProgress(ctx, recs)
	}
	return recs, err
}

// Counters are a schedule's totals across the cluster since the ledger
// began, and the times of its last enqueue, success and failure.
//
// Enqueued counts the occurrences enqueued for their slots, Manual those
// enqueued by hand (Run now, Re-run): each enqueue is in exactly one of
// the two. Succeeded and Failed count attempts of both kinds (Failed each
// failed attempt, retried or not); Missed, Skipped and Paused the slots
// that were never enqueued.
type Counters struct {
	Enqueued, Manual, Missed, Skipped, Paused, Succeeded, Failed int64
	// Buffered counts the slots overlap=buffer_one kept waiting (each is
	// counted in Enqueued too once it is enqueued), Replaced the
	// occurrences overlap=replace cancelled.
	Buffered, Replaced                    int64
	LastEnqueue, LastSuccess, LastFailure time.Time
	// FirstSeen is when the scheduler first saw the schedule; slots
	// before it were never meant to run.
	FirstSeen time.Time
	// LastResume is when the schedule was last resumed; slots before it
	// may have been paused, and are never late.
	LastResume time.Time
	// LastSlotSuccess is the last success of a slot's own work (a
	// scheduled occurrence, or a re-run of one): what makes a slot not
	// late. A "run now" does not.
	LastSlotSuccess time.Time
}

// countersOf reads the counters of m, by their names (counterFields).
func countersOf(m map[string]int64) Counters {
	vals := make([]int64, len(counterFields))
	for i, f := range counterFields {
		vals[i] = m[f]
	}
	return countersFrom(vals)
}

// Counters returns every schedule's counters, the removed schedules'
// included, read in steps that each hold Redis for a moment (a step per
// thousand or so schedules). Counters written meanwhile may or may
// not be in it. It returns by ctx's deadline whatever the client (see
// bounded).
func (mon *Monitor) Counters(ctx context.Context) (map[string]Counters, error) {
	r := mon.rt
	out := make(map[string]Counters, r.reg.Len())
	if r.disabled != "" {
		return out, nil
	}
	stats, err := bounded(ctx, r.eng.Stats)
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
	known, err := bounded(ctx, r.eng.Known)
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
	n, err := r.eng.Forget(ctx, name)
	if err == nil {
		var m int64
		m, err = r.eng.ForgetExecution(ctx, name)
		n += m
	}
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
	// Processes are the live replicas' processes by replica name, as
	// their heartbeats recorded them: what an operator stops or inspects.
	// A replica of a version that does not record one has none.
	Processes map[string]ReplicaProcess `json:"processes,omitempty"`
}

// ReplicaProcess is the operating-system process behind a replica name.
type ReplicaProcess struct {
	PID  int    `json:"pid"`
	Host string `json:"host"`
}

// Cluster reads the lease holder and the replicas with a fresh heartbeat.
func (mon *Monitor) Cluster(ctx context.Context) (Cluster, error) {
	r := mon.rt
	if r.disabled != "" {
		return Cluster{}, nil
	}
	h, err := bounded(ctx, r.eng.Holder)
	c := Cluster{Leader: h.Replica, Token: h.Token, Replicas: h.Replicas}
	for name, p := range h.Processes {
		if c.Processes == nil {
			c.Processes = map[string]ReplicaProcess{}
		}
		c.Processes[name] = ReplicaProcess{PID: p.PID, Host: p.Host}
	}
	return c, err
}

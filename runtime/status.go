package runtime

import (
	"context"
	"time"

	"github.com/belfry/belfry/registry"
)

// Schedule statuses shown on the admin page and exported as metrics.
const (
	StatusOK       = "ok"
	StatusLate     = "late"     // the newest due slot has no success within grace + timeout
	StatusFailing  = "failing"  // the newest finished occurrence failed
	StatusRunning  = "running"  // the newest occurrence is running
	StatusDisabled = "disabled" // no Redis configured: nothing is scheduled
)

// ScheduleState is one schedule as the admin page, the JSON API, metrics
// and the health check see it, computed once per request by Snapshot.
type ScheduleState struct {
	Schedule *registry.Schedule
	Next     time.Time // in the schedule's zone; zero if it never fires again
	Status   string
	Recent   []Record // newest first
	Counters Counters
}

// LastRun returns the newest recorded occurrence, or nil.
func (s ScheduleState) LastRun() *Record {
	if len(s.Recent) == 0 {
		return nil
	}
	return &s.Recent[0]
}

// Snapshot is the state of every schedule and of the cluster at one moment.
type Snapshot struct {
	At         time.Time
	Schedules  []ScheduleState
	Cluster    Cluster
	Replica    string
	Redis      string // "up", "down", "unknown" or "disabled"
	RedisError string
	Disabled   string
}

// recentPerSchedule is how many occurrences the index page shows per row.
const recentPerSchedule = 5

// Snapshot reads the ledger and the lease in a few round trips. When Redis
// is unreachable it still returns every schedule with its next run; the
// error says what is missing.
func (r *Runtime) Snapshot(ctx context.Context) (Snapshot, error) {
	now := r.now()
	snap := Snapshot{At: now, Replica: r.opts.Replica, Disabled: r.disabled}
	var err error
	recent, counters := map[string][]Record{}, map[string]Counters{}
	if r.disabled == "" {
		if recent, err = r.recentRecords(ctx, recentPerSchedule); err == nil {
			if counters, err = r.Counters(ctx); err == nil {
				snap.Cluster, err = r.Cluster(ctx)
			}
		}
		r.noteRedis(err)
	}
	state, lastErr := r.RedisState()
	snap.Redis = state
	if lastErr != nil {
		snap.RedisError = redactURLError(lastErr)
	}
	for _, s := range r.reg.Schedules() {
		st := ScheduleState{Schedule: s, Next: s.Next(now), Recent: recent[s.Name], Counters: counters[s.Name]}
		st.Status = r.status(st, now)
		snap.Schedules = append(snap.Schedules, st)
	}
	return snap, err
}

func (r *Runtime) status(st ScheduleState, now time.Time) string {
	if r.disabled != "" {
		return StatusDisabled
	}
	last := st.LastRun()
	if last != nil && last.Outcome == OutcomeFailed {
		return StatusFailing
	}
	s, c := st.Schedule, st.Counters
	due := s.Prev(now.Add(-r.grace(s) - s.Timeout))
	if !due.IsZero() && !c.FirstSeen.IsZero() && due.After(c.FirstSeen) && c.LastSuccess.Before(due) {
		return StatusLate
	}
	if last != nil && last.Outcome == OutcomeRunning {
		return StatusRunning
	}
	return StatusOK
}

package runtime

import (
	"context"
	"time"

	"github.com/belfry/belfry/registry"
)

// ScheduleState is one schedule as the admin page, the JSON API, metrics
// and the health check see it, computed once per request by Snapshot.
type ScheduleState struct {
	Schedule *registry.Schedule
	Next     time.Time // in the schedule's zone; zero if it never fires again
	Status   Status
	Recent   []Record // newest first
	Counters Counters
	// Paused is the schedule's pause, nil when it runs.
	Paused *Pause
}

// LastRun returns the newest recorded occurrence, or nil.
func (s ScheduleState) LastRun() *Record {
	if len(s.Recent) == 0 {
		return nil
	}
	return &s.Recent[0]
}

// lastFinished is the newest occurrence that ran to an end (succeeded or
// failed): an enqueued, running, retrying, missed, skipped or paused one
// says nothing of whether the schedule's work fails.
func (s ScheduleState) lastFinished() *Record {
	for i := range s.Recent {
		if o := s.Recent[i].Outcome; o == OutcomeSucceeded || o == OutcomeFailed {
			return &s.Recent[i]
		}
	}
	return nil
}

// Snapshot is the state of every schedule and of the cluster at one moment.
type Snapshot struct {
	At         time.Time
	Schedules  []ScheduleState
	Cluster    Cluster
	Replica    string
	Redis      RedisState
	RedisError string
	// RedisUnsafe says why this replica will not lead on its Redis (it
	// evicts keys, or is too old), "" when it may.
	RedisUnsafe string
	Disabled    string
	// Unserved are the schedules' queues no asynq server listens to (see
	// Runtime.UnservedQueues).
	Unserved []string
	// LostWrites are the losses of Redis data detected, newest first.
	LostWrites []LostWrites
	// DuplicateReplica says another process uses this replica's name.
	DuplicateReplica string
	// NamespaceContention says a replica of another registry beats in this
	// namespace (see Runtime.NamespaceContention).
	NamespaceContention string
	// Misrouted are recent reports of this service's occurrences bounced
	// by workers of their queue (see Runtime.MisroutedOccurrences).
	Misrouted []Misrouted
	// LegacyNamespace says an earlier deployment still schedules this
	// registry in the old default namespace (see Runtime.LegacyNamespace).
	LegacyNamespace string
}

// recentPerSchedule is how many occurrences the index page shows per row.
const recentPerSchedule = 5

// Snapshot reads the ledger and the lease in a few round trips, and
// returns by ctx's deadline whatever the client (see bounded). When Redis
// is unreachable or slow it still returns every schedule with its next
// run; the error says what is missing.
func (r *Runtime) Snapshot(ctx context.Context) (Snapshot, error) {
	now := r.clock.Now()
	snap := Snapshot{At: now, Replica: r.opts.Replica, Disabled: r.disabled}
	var err error
	var rd snapshotReads
	if r.disabled == "" {
		rd, err = bounded(ctx, r.readSnapshot)
		r.noteRedis(err)
	}
	recent, counters, paused := rd.recent, rd.counters, rd.paused
	snap.Cluster, snap.Unserved, snap.LostWrites, snap.Misrouted = rd.cluster, rd.unserved, rd.lost, rd.misrouted
	state, lastErr := r.RedisState()
	snap.Redis = state
	snap.RedisUnsafe = r.RedisUnsafe()
	snap.DuplicateReplica = r.DuplicateReplica()
	snap.NamespaceContention, snap.LegacyNamespace = r.NamespaceContention(), r.LegacyNamespace()
	if lastErr != nil {
		snap.RedisError = redactSecrets(lastErr.Error(), r.redisURL)
	}
	for _, s := range r.reg.Schedules() {
		st := ScheduleState{Schedule: s, Next: s.Next(now), Recent: recent[s.Name], Counters: counters[s.Name]}
		if p, ok := paused[s.Name]; ok {
			st.Paused = &p
		}
		st.Status = r.status(st, now)
		snap.Schedules = append(snap.Schedules, st)
	}
	return snap, err
}

func (r *Runtime) status(st ScheduleState, now time.Time) Status {
	if r.disabled != "" {
		return StatusDisabled
	}
	return scheduleStatus(st, now, r.Grace(st.Schedule))
}

// scheduleStatus judges a schedule from its ledger at now. A pause wins
// (an operator said so); failing wins over late (the newest run failed:
// that is the thing to look at); a schedule is late when the newest slot
// that should have finished by now (due grace + timeout ago) has no success
// since it, counting only slots after the scheduler first saw the schedule
// and after its last resume.
func scheduleStatus(st ScheduleState, now time.Time, grace time.Duration) Status {
	if st.Paused != nil {
		return StatusPaused
	}
	last := st.LastRun()
	if finished := st.lastFinished(); finished != nil && finished.Outcome == OutcomeFailed {
		return StatusFailing
	}
	s, c := st.Schedule, st.Counters
	due := s.Prev(now.Add(-grace - s.Timeout))
	if !due.IsZero() && !c.FirstSeen.IsZero() && due.After(c.FirstSeen) && due.After(c.LastResume) && c.LastSlotSuccess.Before(due) {
		return StatusLate
	}
	if last != nil && (last.Outcome == OutcomeRunning || last.Outcome == OutcomeRetrying) {
		return StatusRunning // retrying: an attempt failed, the occurrence is not over
	}
	return StatusOK
}

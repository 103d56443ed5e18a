package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
)

// ScheduleState is one schedule as the admin page and the JSON API show
// it, read by Monitor.Snapshot or Monitor.SnapshotOf.
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

// Monitor reads what the admin page, the metrics and a health check show:
// the schedules' state and status, their counters, the replicas, and the
// settings that explain them. It only reads.
type Monitor struct{ rt *Runtime }

// Monitor returns the runtime's read side for dashboards and metrics.
func (r *Runtime) Monitor() *Monitor { return &Monitor{rt: r} }

// HistoryLimit is the number of occurrences the ledger keeps per schedule.
func (mon *Monitor) HistoryLimit() int { return mon.rt.opts.HistoryLimit }

// Grace returns how late a slot of s may still be enqueued: Options.Grace
// when set, else the schedule's own.
func (mon *Monitor) Grace(s *registry.Schedule) time.Duration { return mon.rt.grace(s) }

// Snapshot is the state of schedules and of the cluster at one moment.
type Snapshot struct {
	At        time.Time
	Schedules []ScheduleState
	Cluster   Cluster
	Replica   string
	Redis     RedisState
	// RedisError says why Redis is down or slow ("no answer for 12 s"),
	// not which of the two: Redis says that.
	RedisError string
	// redisDownName is how health names Redis down (Runtime.downName),
	// read with Redis and RedisError.
	redisDownName string
	// RedisUnsafe says why this replica will not lead on its Redis (it
	// evicts keys, or is too old), "" when it may.
	RedisUnsafe string
	Disabled    string
	// Unserved are the schedules' queues no worker listens to (see
	// Diagnostics.UnservedQueues).
	Unserved []string
	// LostWrites are the losses of Redis data detected, newest first.
	LostWrites []LostWrites
	// DuplicateReplica says another process uses this replica's name.
	DuplicateReplica string
	// Missing are the parts that could not be read, and why: what they
	// would show is unknown, not empty. Empty when everything was read.
	Missing []Missing
	// NamespaceContention says a replica of another registry beats in this
	// namespace (see Diagnostics.NamespaceContention).
	NamespaceContention string
	// Misrouted are recent reports of this service's occurrences bounced
	// by workers of their queue (see Diagnostics.Misrouted).
	Misrouted []Misrouted
	// LegacyNamespace says an earlier deployment still schedules this
	// registry in the old default namespace (see Diagnostics.LegacyNamespace).
	LegacyNamespace string
}

// Missing is a part of a read that did not complete, and why.
type Missing struct {
	Part   string `json:"part"`   // one of the Part constants
	Reason string `json:"reason"` // "Redis slow: no answer within 1s", "Redis unreachable: ..."
}

// The parts of a Snapshot or Statuses read, as Missing names them.
const (
	// PartSchedules: the schedules' recent runs, counters and pauses.
	PartSchedules = "schedules"
	// PartStatuses: which schedules are failing, late, paused or running.
	PartStatuses = "statuses"
	// PartCluster: the lease holder and the live replicas.
	PartCluster = "cluster"
	// PartQueues: which queues no worker listens to.
	PartQueues = "queues"
	// PartLostWrites: the losses of Redis data detected.
	PartLostWrites = "lost_writes"
	// PartMisrouted: the occurrences workers of their queue bounced.
	PartMisrouted = "misrouted"
)

// recentPerSchedule is how many occurrences the index page shows per row.
const recentPerSchedule = 5

// Snapshot reads every schedule's state and the cluster's, and returns by
// ctx's deadline whatever the client (see bounded). Its cost grows with the
// number of schedules (their recent runs are read); to show a few
// schedules use SnapshotOf, for every schedule's status Statuses. When
// Redis is unreachable or slow it still returns every schedule with its
// next run; Missing and the error say what is missing.
func (mon *Monitor) Snapshot(ctx context.Context) (Snapshot, error) {
	r := mon.rt
	return mon.SnapshotOf(ctx, r.names(), recentPerSchedule)
}

// counterFields are the stats counters Counters holds, in the order
// countersFrom reads them.
var counterFields = []string{string(OutcomeEnqueued), counterManual, string(OutcomeMissed), string(OutcomeSkipped),
	string(OutcomePaused), string(OutcomeSucceeded), string(OutcomeFailed), counterLastEnqueue, counterLastSuccess,
	counterLastFailure, counterFirstSeen, counterLastResume, counterLastSlotSuccess, string(OutcomeBuffered),
	string(OutcomeReplaced)}

// countersFrom reads the values of counterFields, in its order, without a
// map: a snapshot of every schedule makes 100,000 of them.
func countersFrom(vals []int64) Counters {
	return Counters{Enqueued: vals[0], Manual: vals[1], Missed: vals[2], Skipped: vals[3], Paused: vals[4],
		Succeeded: vals[5], Failed: vals[6], LastEnqueue: unixMilli(vals[7]), LastSuccess: unixMilli(vals[8]),
		LastFailure: unixMilli(vals[9]), FirstSeen: unixMilli(vals[10]), LastResume: unixMilli(vals[11]),
		LastSlotSuccess: unixMilli(vals[12]), Buffered: vals[13], Replaced: vals[14]}
}

// SnapshotOf reads the cluster's state and that of the named schedules
// (unknown names are left out) with their newest recent runs: a few
// pipelined round trips whose size is that of the names, not of the
// registry. The cluster, queue and loss reads run side by side; each that
// fails or does not answer in time is listed in Missing, and the others are
// still shown. A read that times out is reported slow (RedisSlow), not
// down: Redis answers, only not in time.
func (mon *Monitor) SnapshotOf(ctx context.Context, names []string, recent int) (Snapshot, error) {
	r := mon.rt
	now := r.clock.Now()
	snap := Snapshot{At: now, Replica: r.opts.Replica, Disabled: r.disabled}
	scheds := make([]*registry.Schedule, 0, len(names))
	known := make([]string, 0, len(names))
	for _, n := range names {
		if s, ok := r.reg.Lookup(n); ok {
			scheds, known = append(scheds, s), append(known, n)
		}
	}
	var data []engine.ScheduleData
	reads := readLog{refusal: r.refusal, unavailable: r.unavailable, store: r.storeName()}
	if r.disabled == "" {
		var wg sync.WaitGroup
		if len(known) > 0 {
			wg.Go(func() {
				data, _ = timedRead(ctx, &reads, PartSchedules, func(ctx context.Context) ([]engine.ScheduleData, error) {
					return r.scheduleData(ctx, known, recent)
				})
			})
		}
		wg.Go(func() { snap.Cluster, _ = timedRead(ctx, &reads, PartCluster, mon.Cluster) })
		wg.Go(func() {
			snap.Unserved, _ = timedRead(ctx, &reads, PartQueues, func(context.Context) ([]string, error) { return r.Diagnostics().UnservedQueues() })
		})
		wg.Go(func() { snap.LostWrites, _ = timedRead(ctx, &reads, PartLostWrites, r.Diagnostics().LostWrites) })
		wg.Go(func() { snap.Misrouted, _ = timedRead(ctx, &reads, PartMisrouted, r.Diagnostics().Misrouted) })
		wg.Wait()
	}
	r.settle(&snap, &reads)
	snap.Schedules = make([]ScheduleState, 0, len(scheds))
	for i, s := range scheds {
		st := ScheduleState{Schedule: s, Next: s.Next(now), Status: StatusUnknown}
		switch {
		case r.disabled != "":
			st.Status = StatusDisabled
		case data != nil:
			d := data[i]
			st.Counters = countersFrom(d.Stats)
			for _, rec := range d.Recent {
				st.Recent = append(st.Recent, recordOf(rec))
			}
			if d.Pause != nil {
				p := pauseOf(*d.Pause)
				st.Paused = &p
			}
			st.Status = scheduleStatus(statusInputs{paused: st.Paused != nil, failing: d.FailingSince > 0,
				active: Outcome(d.Active), lateAt: lateAt(s, st.Counters, r.grace(s))}, now)
		}
		snap.Schedules = append(snap.Schedules, st)
	}
	if data != nil {
		r.attachLiveProgress(ctx, snap.Schedules)
	}
	return snap, reads.err()
}

// snapshotPart is how many schedules one ScheduleData call reads; a
// snapshot of more reads its parts side by side, snapshotReaders at once,
// so that decoding the replies is spread over the cores.
const (
	snapshotPart    = 5000
	snapshotReaders = 4
)

func (r *Runtime) scheduleData(ctx context.Context, names []string, recent int) ([]engine.ScheduleData, error) {
	if len(names) <= snapshotPart {
		return r.eng.ScheduleData(ctx, names, recent, counterFields, nil)
	}
	// The parts' problems are read once, in HSCAN steps, rather than by
	// each part.
	problems, err := r.eng.Problems(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]engine.ScheduleData, len(names))
	errs := make(chan error, (len(names)+snapshotPart-1)/snapshotPart)
	slots := make(chan struct{}, snapshotReaders)
	var wg sync.WaitGroup
	for start := 0; start < len(names); start += snapshotPart {
		part := names[start:min(start+snapshotPart, len(names))]
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			data, err := r.eng.ScheduleData(ctx, part, recent, counterFields, &problems)
			if err != nil {
				errs <- err
				return
			}
			copy(out[start:], data)
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return out, nil
}

// readLog collects the outcome of a request's reads.
type readLog struct {
	mu      sync.Mutex
	missing []Missing
	errs    []error
	down    error  // a failure that is not a timeout: Redis refused or broke
	slow    error  // a read that did not answer in time (an ErrRedisSlow)
	slowWhy string // why that read failed, without the store's name: RedisError
	// refusal is Runtime.refusal: a read the engine's server refused for
	// how it is set up.
	refusal func(error) error
	// unavailable is Runtime.unavailable: the name of a read's failure
	// that is the server answering it cannot serve for now.
	unavailable func(error) string
	// store names the engine's server in reasons ("Redis", "Postgres").
	store string
}

// timedRead runs one part's read under bounded (so it returns by ctx's
// deadline whatever the client, a timeout being an ErrRedisSlow) and logs
// whether it failed and how.
func timedRead[T any](ctx context.Context, log *readLog, part string, read func(context.Context) (T, error)) (T, error) {
	start := time.Now()
	v, err := bounded(ctx, read)
	if err != nil {
		log.fail(part, err, time.Since(start))
	}
	return v, err
}

func (l *readLog) fail(part string, err error, took time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, fmt.Errorf("%s: %w", part, err))
	reason := cmp.Or(l.unavailable(err), l.store+" unreachable") + ": " + err.Error()
	switch {
	case l.refusal(err) != nil:
		reason = l.refusal(err).Error()
		if sentinel := engine.RefusedAs(l.refusal(err)); sentinel != nil {
			reason = sentinel.Error()
		}
		if l.down == nil {
			l.down = err
		}
	case isSlow(err):
		why := fmt.Sprintf("no answer within %.1f s", took.Seconds())
		if took < 50*time.Millisecond {
			why = "the request's time ran out before this read"
		}
		reason = l.store + " slow: " + why
		if l.slow == nil {
			l.slow, l.slowWhy = err, why
		}
	case l.down == nil:
		l.down = err
	}
	l.missing = append(l.missing, Missing{Part: part, Reason: reason})
}

func (l *readLog) err() error { return errors.Join(l.errs...) }

// settle records a request's reads in the runtime's view of Redis and sets
// the snapshot's Redis state, error and missing parts. A timeout is not an
// outage: it makes the view of Redis slow (see RedisState), never down, and
// the snapshot says which reads it cost.
func (r *Runtime) settle(snap *Snapshot, reads *readLog) {
	if r.disabled == "" {
		switch {
		case reads.down != nil:
			r.noteRedis(reads.down)
		case reads.slow != nil:
			r.noteRedis(reads.slow)
		default:
			r.noteRedis(nil)
		}
	}
	state, downName, lastErr := r.redisView()
	snap.Redis, snap.redisDownName = state, downName
	if lastErr != nil {
		snap.RedisError = r.redact(lastErr.Error())
	}
	// A timeout says Redis did not answer in time, not that it is gone:
	// it is slow while it answered within a lease TTL, down once silent
	// for longer (a partition, a hung server). RedisError gives the cause
	// alone, beside Redis that gives the state: health puts the name of
	// the outage in front of it, and a name in both would read twice.
	silent := time.Since(time.Unix(0, r.statusIndex.answered.Load()))
	switch {
	case state == RedisSlow && silent >= r.opts.LeaseTTL:
		snap.Redis, snap.RedisError = RedisDown, "no answer since this replica started"
		if r.statusIndex.answered.Load() != 0 {
			snap.RedisError = fmt.Sprintf("no answer for %.0f s", silent.Seconds())
		}
	case state == RedisSlow && reads.slow != nil:
		snap.RedisError = reads.slowWhy
	}
	for i := range reads.missing {
		reads.missing[i].Reason = r.redact(reads.missing[i].Reason)
	}
	snap.Missing = reads.missing
	snap.RedisUnsafe = r.Diagnostics().Unsafe()
	snap.DuplicateReplica = r.duplicateReplica()
	snap.NamespaceContention, snap.LegacyNamespace = r.Diagnostics().NamespaceContention(), r.Diagnostics().LegacyNamespace()
}

// statusInputs are what a schedule's status is judged from: a few values
// per schedule, none of them its history.
type statusInputs struct {
	paused  bool
	failing bool    // the last occurrence to finish failed
	active  Outcome // running or retrying: an attempt under way since the last finished
	lateAt  time.Time
}

// scheduleStatus judges a schedule at now. A pause wins (an operator said
// so); failing wins over late (the last occurrence to finish failed: that
// is the thing to look at); a schedule is late from lateAt on; running
// while an attempt started, or waits to retry, after the last one
// finished.
func scheduleStatus(in statusInputs, now time.Time) Status {
	switch {
	case in.paused:
		return StatusPaused
	case in.failing:
		return StatusFailing
	case !in.lateAt.IsZero() && !now.Before(in.lateAt):
		return StatusLate
	case in.active == OutcomeRunning || in.active == OutcomeRetrying:
		return StatusRunning // retrying: an attempt failed, the occurrence is not over
	}
	return StatusOK
}

// neverLate is the lateAt of a schedule that never fires again.
var neverLate = time.Unix(1<<40, 0)

// lateAt is when a schedule turns late if no slot's work succeeds first: a
// schedule is late when the newest slot that should have finished by now
// (due grace + timeout ago) has no success since it, counting only slots
// after the scheduler first saw the schedule and after its last resume.
// That slot is the first after the latest of those three instants, so the
// moment is that slot plus grace plus timeout. Zero when the scheduler
// never saw the schedule (it cannot be late yet).
//
// The three instants only move forward, so a lateAt still in the future
// stays true until a write moves it later: Statuses keeps it and re-reads
// a schedule's counters only once its lateAt has passed.
func lateAt(s *registry.Schedule, c Counters, grace time.Duration) time.Time {
	if c.FirstSeen.IsZero() {
		return time.Time{}
	}
	from := c.FirstSeen
	for _, t := range []time.Time{c.LastResume, c.LastSlotSuccess} {
		if t.After(from) {
			from = t
		}
	}
	next := s.Next(from)
	if next.IsZero() {
		return neverLate
	}
	return next.Add(grace + s.Timeout)
}

// ScheduleStatus is one schedule's status, as Statuses reads it.
type ScheduleStatus struct {
	Schedule *registry.Schedule
	Status   Status
}

// Statuses is every schedule's status at one moment.
type Statuses struct {
	At time.Time
	// Schedules are in registry order.
	Schedules []ScheduleStatus
	// Counts is how many schedules have each status.
	Counts map[Status]int
	// Missing are the parts that could not be read; the schedules whose
	// status they decide are StatusUnknown.
	Missing []Missing
	Redis   RedisState
	// RedisError says why Redis is down or slow, as Snapshot's does.
	RedisError string
}

// statusIndex keeps, per schedule in registry order, the moment it turns
// late as last read (see lateAt): until then Statuses need not read its
// counters again.
type statusIndex struct {
	mu sync.Mutex
	// lateAt holds each moment as lateInstant encodes it: 8 bytes a
	// schedule where a time.Time is 24.
	lateAt []lateInstant
	// answered is when a Redis call last succeeded, unix ns: a Redis
	// that answered within a lease TTL and now times out is slow; one
	// silent for longer is down.
	answered atomic.Int64
}

// lateInstant is a lateAt moment in unix nanoseconds: 0 for the zero
// time (never seen, so not late yet), math.MaxInt64 for neverLate and for
// any moment past what nanoseconds hold (year 2262), which no now reaches.
type lateInstant int64

func lateInstantOf(t time.Time) lateInstant {
	switch {
	case t.IsZero():
		return 0
	case !t.Before(maxLateInstant):
		return math.MaxInt64
	}
	return lateInstant(t.UnixNano())
}

// maxLateInstant is the moment from which lateInstant keeps never.
var maxLateInstant = time.Unix(0, math.MaxInt64)

// time returns the moment: the zero time for 0, neverLate for the end.
func (l lateInstant) time() time.Time {
	switch l {
	case 0:
		return time.Time{}
	case math.MaxInt64:
		return neverLate
	}
	return time.Unix(0, int64(l))
}

// warmReadTimeout bounds the first read of every schedule's lateness.
const warmReadTimeout = 10 * time.Second

// warmStatuses reads every schedule's lateness once at start-up, so that
// the first admin page does not pay for it: at 100k schedules that first
// read is the one that reads every schedule's counters.
func (r *Runtime) warmStatuses(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, warmReadTimeout)
	defer cancel()
	if err := r.backfillFailing(ctx); err != nil {
		r.log.Warn("could not mark the schedules that failed before this version", "err", err)
	}
	r.Monitor().Statuses(ctx)
}

// backfillFailing marks failing, once per namespace, the schedules whose
// newest finished occurrence failed before the workers kept the failing
// hash (an earlier version), so that they do not read ok until their next
// failure. Candidates are the schedules whose last failure is newer than
// their last success; only their history is read.
func (r *Runtime) backfillFailing(ctx context.Context) error {
	if done, err := r.eng.Backfilled(ctx); err != nil || done {
		return err
	}
	names := r.names()
	vals, err := r.eng.StatFields(ctx, names, []string{counterLastFailure, counterLastSuccess})
	if err != nil {
		return err
	}
	for i, v := range vals {
		if v[0] <= v[1] {
			continue
		}
		history, err := r.History(ctx, names[i], recentPerSchedule)
		if err != nil {
			return err
		}
		for _, rec := range history {
			if rec.Outcome == OutcomeSucceeded {
				break
			}
			if rec.Outcome == OutcomeFailed {
				if err := r.eng.MarkFailing(ctx, names[i], rec.FinishedAt.UnixMilli()); err != nil {
					return err
				}
				break
			}
		}
	}
	return r.eng.MarkBackfilled(ctx)
}

// lateFields are the counters lateAt reads.
var lateFields = []string{counterFirstSeen, counterLastResume, counterLastSlotSuccess}

// Statuses reads every schedule's status without reading any schedule's
// history: the paused, failing and running schedules in one round trip
// (the size of what is wrong), and the counters that say whether a
// schedule is late only for those whose last known lateAt has passed, in
// pipelined chunks. What could not be read is in Missing, and the
// schedules it decides are StatusUnknown, never guessed ok.
func (mon *Monitor) Statuses(ctx context.Context) (Statuses, error) {
	r := mon.rt
	now := r.clock.Now()
	scheds := r.reg.Schedules()
	out := Statuses{At: now, Schedules: make([]ScheduleStatus, len(scheds)), Counts: map[Status]int{}}
	for i, s := range scheds {
		out.Schedules[i] = ScheduleStatus{Schedule: s, Status: StatusDisabled}
	}
	if r.disabled != "" {
		out.Counts[StatusDisabled], out.Redis = len(scheds), RedisDisabled
		return out, nil
	}
	reads := readLog{refusal: r.refusal, unavailable: r.unavailable, store: r.storeName()}
	problems, probErr := timedRead(ctx, &reads, PartStatuses, r.eng.Problems)
	idx := &r.statusIndex
	idx.mu.Lock()
	if len(idx.lateAt) != len(scheds) {
		idx.lateAt = make([]lateInstant, len(scheds))
	}
	var stale []int
	var staleNames []string
	for i, at := range idx.lateAt {
		if at == 0 || !now.Before(at.time()) {
			stale, staleNames = append(stale, i), append(staleNames, scheds[i].Name)
		}
	}
	idx.mu.Unlock()
	var lateErr error
	if probErr == nil && len(stale) > 0 {
		var vals [][]int64
		vals, lateErr = timedRead(ctx, &reads, PartStatuses, func(ctx context.Context) ([][]int64, error) {
			return r.eng.StatFields(ctx, staleNames, lateFields)
		})
		if lateErr == nil {
			idx.mu.Lock()
			for k, i := range stale {
				s, v := scheds[i], vals[k]
				c := Counters{FirstSeen: unixMilli(v[0]), LastResume: unixMilli(v[1]), LastSlotSuccess: unixMilli(v[2])}
				idx.lateAt[i] = lateInstantOf(lateAt(s, c, r.grace(s)))
			}
			idx.mu.Unlock()
		}
	}
	var snap Snapshot
	r.settle(&snap, &reads)
	out.Missing, out.Redis, out.RedisError = snap.Missing, snap.Redis, snap.RedisError
	idx.mu.Lock()
	defer idx.mu.Unlock()
	for i, s := range scheds {
		status := StatusUnknown
		if probErr == nil {
			_, paused := problems.Paused[s.Name]
			_, failing := problems.Failing[s.Name]
			in := statusInputs{paused: paused, failing: failing, active: Outcome(problems.Active[s.Name]), lateAt: idx.lateAt[i].time()}
			status = scheduleStatus(in, now)
			if lateErr != nil && !paused && !failing && (in.lateAt.IsZero() || !now.Before(in.lateAt)) {
				status = StatusUnknown // whether it is late was not read
			}
		}
		out.Schedules[i].Status = status
		out.Counts[status]++
	}
	return out, reads.err()
}

// LastTimes is when a schedule last had an occurrence enqueued, an
// occurrence succeed and an attempt fail; zero for never.
type LastTimes struct {
	Enqueue, Success, Failure time.Time
}

// lastFields are the counters LastTimes reads.
var lastFields = []string{counterLastEnqueue, counterLastSuccess, counterLastFailure}

// LastTimes reads every schedule's LastTimes, in registry order: three
// counters a schedule in pipelined chunks, none of its history.
func (mon *Monitor) LastTimes(ctx context.Context) ([]LastTimes, error) {
	r := mon.rt
	scheds := r.reg.Schedules()
	out := make([]LastTimes, len(scheds))
	if r.disabled != "" {
		return out, nil
	}
	vals, err := bounded(ctx, func(ctx context.Context) ([][]int64, error) {
		return r.eng.StatFields(ctx, r.names(), lastFields)
	})
	if err != nil {
		return nil, err
	}
	for i, v := range vals {
		out[i] = LastTimes{Enqueue: unixMilli(v[0]), Success: unixMilli(v[1]), Failure: unixMilli(v[2])}
	}
	return out, nil
}

package core

// The leader loop. Every replica runs one; only the lease holder acts.
// What the leader does comes in tasks (the schedules, the families'
// members), and the loop owns, once for all of them:
//
//   - following and leading: a follower watches the lease and the store's
//     epoch and makes no task traffic at all;
//   - one rebuild for each new lease (a new value, or the same value
//     created again): the lost-write check first, then each task's state
//     in order, the schedules' before the families';
//   - one backoff for Redis errors, and stepping down when a fenced write
//     is refused;
//   - waking on lease events, on the soonest moment any task has work (a
//     due slot, the families' change poll) and on a background commit's
//     end;
//   - judging every dispatch's lateness for the handover (handover.go),
//     whichever task made it, and committing every task's work before the
//     lease is handed over, lost or released at shutdown.
//
// The tasks take turns, one step each, so a spike of one task's slots
// does not hold back the other's, and the loop looks at its lease between
// any two steps.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/testsignal"
)

// leaderTask is one kind of work the leader loop schedules. Its state is
// built for one lease by load and dropped with that lease.
type leaderTask interface {
	// load builds the task's state for the lease value, once the store is
	// checked for lost writes: resume is where a loss found by that check
	// moves every cursor (zero without one).
	load(ctx context.Context, value string, resume time.Time) error
	// drop forgets the state, without committing anything.
	drop()
	// step does the work due at now, if any, and reports whether it did
	// some; if not, next is when it has some (zero: none). A dispatch
	// comes with its lateness.
	step(ctx context.Context, now time.Time) (worked bool, next time.Time, late *dispatchLate, err error)
	// committed is closed when the task's background commit ends; nil
	// when none runs.
	committed() <-chan struct{}
	// flush commits what the task enqueued and has not committed yet, and
	// returns the first commit's error.
	flush(ctx context.Context) error
}

// dispatchLate is one dispatch's lateness: its earliest slot (or when it
// came due to this leader, if later), and when its enqueues were done
// (zero when it failed before them).
type dispatchLate struct{ earliest, enqueued time.Time }

// errTermNotTrusted is ErrNotLeader found by the leader's own look at its
// lease before a write, not by the engine refusing one: the lease is no
// longer trusted here, or holds another term, so the step stops, but
// nothing says another replica leads.
var errTermNotTrusted = fmt.Errorf("%w: the lease is not trusted for this term", engine.ErrNotLeader)

// keepState marks a task's error that needs a retry after backoff but
// leaves its state valid (a failed read of what changed): the loop backs
// off without rebuilding.
type keepState struct{ err error }

func (e *keepState) Error() string { return e.err.Error() }
func (e *keepState) Unwrap() error { return e.err }

// leaderLoopSignals are the loop's test signals: a test waits on them
// instead of polling for the loop's effects. Zero in production, where
// each costs one nil check.
type leaderLoopSignals struct {
	// rebuilt: the tasks' state is built for this lease value.
	rebuilt testsignal.Signal[string]
	// stepped: a step did the work due at this time on the loop's clock.
	stepped testsignal.Signal[time.Time]
	// waiting: the loop sleeps until this time on its clock, or until a
	// lease event or a commit's end wakes it first.
	waiting testsignal.Signal[time.Time]
}

// leaderLoop is the loop's state: the lease its tasks' states were built
// for, and whose turn it is.
type leaderLoop struct {
	r       *Runtime
	tasks   []leaderTask
	leading bool   // the tasks hold state for value and created
	value   string // the lease value the state was built for
	// created is the lease's Created count it was built under: a lease
	// created again with the same value (the token counter went back, see
	// lostwrites.go) is a new lease all the same, and the state is built
	// again so that checkLostWrites sees it.
	created uint64
	turn    int // the task that steps first next time
	retry   *clock.Backoff
}

// newLeaderLoop is the loop over the schedules and, if the registry has
// any, the families.
func (r *Runtime) newLeaderLoop() *leaderLoop {
	tasks := []leaderTask{&scheduleTask{r: r}}
	if len(r.families()) > 0 {
		tasks = append(tasks, &familyTask{r: r})
	}
	return &leaderLoop{r: r, tasks: tasks, retry: clock.NewBackoff(50*time.Millisecond, 2*time.Second)}
}

// run runs the loop until ctx ends. Between steps it looks at the lease,
// so however much is due a lost lease stops it within one step.
func (l *leaderLoop) run(ctx context.Context) {
	r := l.r
	// On the runtime's clock: a stub clock moves the loop from one due
	// slot to the next without real waits.
	timer := clock.NewTimer(r.clock, time.Hour)
	defer timer.Stop()
	defer r.scheduling.Store(false)
	for {
		var wait time.Duration
		var until time.Time // when a due slot makes the wait a moment, not a length
		value, leader := r.eng.Current()
		switch {
		case !leader:
			if l.leading {
				l.flush(ctx) // refused if it comes too late; the next holder reads Redis
				l.drop()
			}
			r.learnEpoch(ctx)
			r.reportLossSeen(ctx)
			// Woken when the lease changes; the cap is a backstop against
			// a missed signal and costs no Redis traffic.
			wait = r.opts.LeaseTTL / 3
		case !l.leading || l.value != value || l.created != r.eng.Created():
			l.drop()
			if err := l.rebuild(ctx, value); err != nil {
				l.drop()
				r.noteRedis(err)
				wait = l.retry.Next()
				break
			}
			l.retry.Reset()
			r.loopSignals.rebuilt.Signal(value)
			continue
		default:
			now := r.clock.Now()
			worked, next, err := l.step(ctx, now)
			// After the step, not before it: the look at the queues (a
			// call to the engine, once a minute) does not delay a slot
			// that is due.
			r.checkUnserved(now)
			var keep *keepState
			switch {
			case errors.As(err, &keep):
				r.noteRedis(keep.err)
				wait = l.retry.Next()
			case err != nil:
				// The cursors in Redis are the truth; what this replica
				// holds in memory may be ahead of them after a failed
				// commit, so it is rebuilt before the next attempt, once
				// what was enqueued is committed.
				l.flush(ctx)
				l.drop()
				if errors.Is(err, errTermNotTrusted) {
					// No write was refused: the lease's trust lapsed
					// (a stall) or its term moved on under the step. The
					// lease's next renewal restores it or steps down; a
					// step-down here would give up a lease that the
					// renewal could still restore.
					continue
				}
				if errors.Is(err, engine.ErrNotLeader) {
					r.eng.StepDown("a fenced write was rejected")
					continue
				}
				r.noteRedis(err)
				wait = l.retry.Next()
			case worked:
				l.retry.Reset()
				r.loopSignals.stepped.Signal(now)
				continue
			default:
				wait = time.Hour
				until = next
				l.readAhead(ctx, until)
			}
		}
		r.scheduling.Store(l.leading)
		if until.IsZero() {
			until = r.clock.Now().Add(wait)
		}
		// Armed from the clock's time now, not the step's: a clock moved
		// meanwhile (a stub's, by a test) finds a slot it passed due at once.
		timer.Reset(max(until.Sub(r.clock.Now()), 0))
		r.loopSignals.waiting.Signal(until)
		select {
		case <-ctx.Done():
			if l.leading {
				l.flush(ctx) // the lease is released after this loop ends
			}
			return
		case <-r.eng.Changed():
		case <-timer.C():
		case <-l.committed():
		}
	}
}

// rebuild builds every task's state for the lease value: the lost-write
// check first, then each task in order. A loss is handled (recorded and
// accepted) only once the schedules' cursors are moved past it: had a
// write failed before, the next attempt finds the loss again.
func (l *leaderLoop) rebuild(ctx context.Context, value string) error {
	r := l.r
	created := r.eng.Created() // before the check, which reads it too
	// The term's start (a move of older keys, its fences) comes before the
	// check too: the check writes an epoch, which would stand in the way
	// of the one moved.
	if f, ok := r.eng.(engine.TermStart); ok {
		if err := f.StartTerm(ctx, value); err != nil {
			return err
		}
	}
	resume, commitLoss, err := r.checkLostWrites(ctx, value)
	if err != nil {
		return err
	}
	for i, t := range l.tasks {
		if err := t.load(ctx, value, resume); err != nil {
			return err
		}
		if i == 0 {
			commitLoss(ctx)
		}
	}
	l.leading, l.value, l.created = true, value, created
	return nil
}

// step gives the tasks one turn: the first, from whose turn it is, that
// has work due does it, and the next task steps first next time. A
// dispatch's lateness is judged at once; a handover it calls for first
// commits every task's work.
func (l *leaderLoop) step(ctx context.Context, now time.Time) (worked bool, next time.Time, err error) {
	for i := range l.tasks {
		k := (l.turn + i) % len(l.tasks)
		did, due, late, terr := l.tasks[k].step(ctx, now)
		if late != nil {
			flush := func() error { return l.flush(ctx) }
			terr = cmp2(terr, l.r.noteDispatch(ctx, late.earliest, late.enqueued, flush))
		}
		if did || terr != nil {
			l.turn = (k + 1) % len(l.tasks)
			return true, time.Time{}, terr
		}
		if !due.IsZero() && (next.IsZero() || due.Before(next)) {
			next = due
		}
	}
	return false, next, nil
}

// flush commits every task's work, and returns the first error.
func (l *leaderLoop) flush(ctx context.Context) error {
	var err error
	for _, t := range l.tasks {
		err = cmp2(err, t.flush(ctx))
	}
	return err
}

// drop forgets every task's state.
func (l *leaderLoop) drop() {
	for _, t := range l.tasks {
		t.drop()
	}
	l.leading = false
}

// committed is the channel of the first background commit running, nil
// when none does.
func (l *leaderLoop) committed() <-chan struct{} {
	if !l.leading {
		return nil
	}
	for _, t := range l.tasks {
		if c := t.committed(); c != nil {
			return c
		}
	}
	return nil
}

func cmp2(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

package core

import (
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
)

// A change of a member's zone or expression moves its next run; it does
// not add one. The run the member would have had next on its old
// schedule happens instead at the new schedule's slot nearest to it (of
// two as near, the later), and the new schedule goes on from there. That
// slot is after the change was made (no slot of the new schedule before
// it is run or recorded missed), after the last slot the member had, and
// after that slot's local time in the new zone (cursorFloor): a report
// moved from Tokyo to New York after Monday 09:00 in Tokyo is not run
// again at Monday 09:00 in New York.
//
// So one intended occurrence never runs twice because of a change:
//
//	weekly Monday 09:00, changed at Monday 09:30 to Monday 10:00:
//	    this Monday's run happened; the next is next Monday at 10:00
//	daily 09:00, changed on Wednesday at 10:00 to Mondays 09:00:
//	    next Monday 09:00; Tuesday and Wednesday are not recorded missed
//	weekly Monday 09:00, changed on Wednesday to daily 09:00:
//	    next Monday 09:00 (the run the change moved), then every day
//	Monday 09:00 in New York, moved on Wednesday to Tokyo:
//	    next Monday 09:00 in Tokyo, 13 hours before the New York run
//	    it replaces (not the Monday after, a week later than intended)
//
// An old slot that was due when the change was made, and that the
// member's cursor does not show handled, is either being enqueued at
// that moment or waits for a leader that is behind or down. The write
// tells the two apart by whether asynq holds the slot's task, in the
// same script that writes the change. If it does, the slot counts as the
// member's last (its local time included) and the run after it moves.
// If not, that slot itself moves, to the new schedule's slot nearest it,
// which may be due already: a leader then plans it, and the new
// schedule's slots after it, as the backlog they are (run within grace,
// recorded missed beyond), never dropping one unsaid. (A leader that read
// the member before the write and enqueues the old slot just after it
// can still give that one occurrence a second run, at its new time: a
// window of the leader's read-to-enqueue, as for a deletion.) Use
// Families.Trigger to run a member now after a change.
//
// The floor is computed by the writer, from the member and cursor it
// read, and written only if both are unchanged when the write lands.

// changeFloors returns the since a member takes when it changes from
// schedule old to next at now: ifHad if due is zero or asynq holds due's
// task, else ifNot. next's first slot after the since is the member's
// next run.
func changeFloors(old, next *registry.Schedule, since time.Time, cursor engine.MemberCursor, hasCursor bool, now time.Time) (due, ifHad, ifNot time.Time) {
	// The old schedule's next run, as its leader would plan it.
	moved := old.Next(memberFloor(since, cursor, hasCursor, old.Location()))
	if moved.IsZero() || moved.After(now) {
		return time.Time{}, movedRunFloor(next, moved, later(since, now), cursor, hasCursor), time.Time{}
	}
	// Due already. Had: it is the member's last slot, and the run after
	// it moves (to after the change, unless that one is due too).
	_, offset := moved.In(old.Location()).Zone()
	had := engine.MemberCursor{Slot: moved.Unix(), Offset: offset}
	after, notBefore := old.Next(moved), since
	if after.IsZero() || after.After(now) {
		notBefore = later(since, now)
	}
	ifHad = movedRunFloor(next, after, notBefore, had, true)
	// Not had: that slot moves, however long ago it was due.
	ifNot = movedRunFloor(next, moved, since, cursor, hasCursor)
	return moved, ifHad, ifNot
}

// movedRunFloor is the since that makes next's slot nearest to moved (the
// run the change moves) the member's next run, never at or before
// notBefore or its cursor's floor in next's zone; with moved zero, next's
// first slot after those.
func movedRunFloor(next *registry.Schedule, moved, notBefore time.Time, cursor engine.MemberCursor, hasCursor bool) time.Time {
	floor := memberFloor(notBefore, cursor, hasCursor, next.Location())
	if moved.IsZero() {
		return floor
	}
	before := next.Prev(moved.Add(-time.Second)) // the newest slot before moved
	after := next.Next(moved.Add(-time.Second))  // the first at or after it
	nearest := after
	if !before.IsZero() && before.After(floor) && (after.IsZero() || moved.Sub(before) < after.Sub(moved)) {
		nearest = before
	}
	if nearest.IsZero() || !nearest.After(floor) {
		return floor
	}
	return nearest.Add(-time.Second)
}

// changeFloorFunc is the store's ChangeFloor for a write of members of
// fam whose schedules cache knows.
func (r *Runtime) changeFloorFunc(fam *registry.Schedule, cache *memberSchedules) engine.ChangeFloor {
	unix := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.Unix()
	}
	return func(m engine.SetMember, old engine.MemberValue, cursor engine.MemberCursor, hasCursor bool) engine.Floor {
		// Now as the write is made: a bulk write takes seconds, and a slot
		// that falls due meanwhile must be asked about.
		now := r.clock.Now()
		since := time.Unix(old.Since, 0)
		from, err1 := cache.get(old.Zone, old.Expr)
		to, err2 := cache.get(m.Zone, m.Expr)
		if err1 != nil || err2 != nil {
			// The old zone or expression no longer parses (a zone
			// database without it): the change starts the member afresh.
			return engine.Floor{Since: later(since, now).Unix()}
		}
		due, ifHad, ifNot := changeFloors(from, to, since, cursor, hasCursor, now)
		if due.IsZero() {
			return engine.Floor{Since: unix(ifHad)}
		}
		return engine.Floor{Since: unix(ifNot), Queue: fam.Queue, TaskID: r.memberScope(fam, m.Key).ID(due), SinceIfTask: unix(ifHad)}
	}
}

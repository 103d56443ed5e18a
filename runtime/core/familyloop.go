package core

// The family engine: how the leader schedules families' members.
//
// Members that share a zone and an expression share a bucket, and the
// leader keeps one heap entry per bucket, not per member: its memory and
// its idle work do not grow with the member count. When a bucket comes due
// the leader reads its members from Redis in pages of familyPage (each
// read, script and pipeline a few milliseconds at most), plans each
// member's slots from the member's own cursor with the planner ordinary
// schedules use (grace, missed, misfire, pause), enqueues them with the
// same fenced enqueueAll, and commits the members' cursors in fenced
// scripts. A crash between enqueue and commit is repaired as for an
// ordinary schedule: the next holder enqueues the same IDs, which asynq
// refuses as duplicates.
//
// A member's cursor is the last slot it had and its zone's UTC offset
// then, so the leader knows the local time of that slot whatever zone the
// member has moved to since. A member's next slot is the first after
// both the cursor's instant and the instant the cursor's local time has
// in the member's zone now, and after the member's since (its creation,
// or the floor its last change of zone or expression set, see
// familychange.go): a change never yields a slot at or before the last
// one, nor the same local time again (Tokyo's Monday 09:00 handled, New
// York's Monday 09:00 is not another run of it).
//
// Changes: every write of a member bumps "<ns>:fam:ver" and stamps the
// member's bucket with that version. The leader GETs the counter every
// familyPoll and, when it moved, reads the buckets stamped since: a new
// bucket gets a heap entry; an existing one needs nothing, since members
// are read when it is due. A bucket found empty when due is dropped. Each
// bucket also keeps a cursor, the slot through which all its members were
// handled, so that a new leader reads a bucket's members only when it has
// something due after it.
//
// A deletion that lands while the leader is already enqueueing that very
// slot's page can let that one occurrence through; after that the member
// never runs again, and its cursor is not written back.

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
)

const (
	// familyPoll is how often the leader looks for changed members: one
	// GET, whatever the number of members. A follower makes none.
	familyPoll = 500 * time.Millisecond
	// familyPage is the number of members read, planned, enqueued and
	// committed together.
	familyPage = 1000
)

// famBucket is the heap entry of one (zone, expression) bucket.
type famBucket struct {
	fam   *registry.Schedule
	key   string             // engine.BucketOf(zone, expr), as stored
	sched *registry.Schedule // the family in that zone, by that expression
	next  time.Time
	// added is when this leader took the bucket: the slots before it that
	// a new bucket catches up within grace are no lateness of this
	// leader's, as a takeover's catch-up is not (handover.go).
	added time.Time
}

type bucketHeap []*famBucket

func (h bucketHeap) Len() int           { return len(h) }
func (h bucketHeap) Less(i, j int) bool { return h[i].next.Before(h[j].next) }
func (h bucketHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *bucketHeap) Push(x any)        { *h = append(*h, x.(*famBucket)) }
func (h *bucketHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// familyState is what the leader holds about families while it leads.
type familyState struct {
	value    string // the lease value it leads with
	version  int64  // the change counter it has seen
	seen     map[string]int64
	buckets  map[string]map[string]*famBucket // family -> bucket key
	queue    bucketHeap
	nextPoll time.Time
	// lostFloor is the newest recorded loss's resume point: as for an
	// ordinary schedule's cursor, no member runs a slot at or before it,
	// which a replica may have enqueued before Redis lost the members'
	// cursors (members written again after the loss start from now).
	lostFloor time.Time
}

// familyTask is the leader loop's task for the families' members.
type familyTask struct {
	r  *Runtime
	st *familyState // nil while not leading
}

func (t *familyTask) load(ctx context.Context, value string, resume time.Time) error {
	st, err := t.r.loadFamilies(ctx, value)
	if st != nil {
		// The loss this rebuild found, even if recording it failed.
		st.lostFloor = later(st.lostFloor, resume)
	}
	t.st = st
	return err
}

func (t *familyTask) drop() { t.st = nil }

// step looks for changed members every familyPoll, then dispatches the
// buckets due. A failed poll leaves the state as it was, to poll again.
func (t *familyTask) step(ctx context.Context, now time.Time) (bool, time.Time, *dispatchLate, error) {
	r, st := t.r, t.st
	polled := false
	if !now.Before(st.nextPoll) {
		if err := r.pollFamilies(ctx, st, now); err != nil {
			return false, time.Time{}, nil, &keepState{err}
		}
		st.nextPoll, polled = now.Add(familyPoll), true
	}
	if len(st.queue) > 0 && !st.queue[0].next.After(now) {
		late, err := r.dispatchBuckets(ctx, st, now)
		return true, time.Time{}, &late, err
	}
	next := st.nextPoll
	if len(st.queue) > 0 && st.queue[0].next.Before(next) {
		next = st.queue[0].next
	}
	return polled, next, nil, nil
}

// committed is nil: a family's pages are committed as they are enqueued.
func (t *familyTask) committed() <-chan struct{} { return nil }

// flush has nothing to do: each page's commit is done before its dispatch
// returns, even when the loop's context ends meanwhile (dispatchBucket).
func (t *familyTask) flush(context.Context) error { return nil }

// loadFamilies reads every family's buckets and their cursors.
func (r *Runtime) loadFamilies(ctx context.Context, value string) (*familyState, error) {
	// The counter first: a change made while the buckets are read is
	// then seen again by the next poll, never missed.
	ver, err := r.eng.FamilyVersion(ctx)
	if err != nil {
		return nil, err
	}
	now := r.clock.Now()
	st := &familyState{value: value, version: ver, seen: map[string]int64{},
		buckets: map[string]map[string]*famBucket{}, nextPoll: now.Add(familyPoll)}
	lost, err := r.eng.Lost(ctx)
	if err != nil {
		return nil, err
	}
	for _, l := range lost {
		if l.Token > 0 { // not an enqueue in doubt's one slot (which carries no token)
			st.lostFloor = later(st.lostFloor, time.Unix(l.To, 0))
		}
	}
	buckets := 0
	for _, fam := range r.families() {
		st.buckets[fam.Name] = map[string]*famBucket{}
		if err := r.addBuckets(ctx, st, fam, -1, now); err != nil {
			return nil, err
		}
		buckets += len(st.buckets[fam.Name])
	}
	heap.Init(&st.queue)
	r.log.Info("scheduling families", "families", len(st.buckets), "buckets", buckets)
	return st, nil
}

// addBuckets adds the family's buckets changed after version that the
// state does not hold yet.
func (r *Runtime) addBuckets(ctx context.Context, st *familyState, fam *registry.Schedule, version int64, now time.Time) error {
	bvs, err := r.eng.BucketsChangedAfter(ctx, fam.Name, version)
	if err != nil || len(bvs) == 0 {
		return err
	}
	var fresh []string
	for _, bv := range bvs {
		st.seen[fam.Name] = max(st.seen[fam.Name], bv.Version)
		if _, ok := st.buckets[fam.Name][bv.Bucket]; !ok {
			fresh = append(fresh, bv.Bucket)
		}
	}
	cursors, err := r.eng.BucketCursors(ctx, fam.Name, fresh)
	if err != nil {
		return err
	}
	for i, key := range fresh {
		zone, expr := engine.SplitBucket(key)
		s, err := fam.ForMember(zone, expr)
		if err != nil {
			// Stored by an earlier release that accepted it: its members
			// cannot be scheduled until they are set again.
			r.log.Error("family members in a bucket this release rejects are not scheduled", "family", fam.Name, "bucket", key, "err", err)
			continue
		}
		// From the bucket's cursor, or for a bucket never handled, from
		// the oldest slot still within grace: the members' own cursors
		// then say which slots each one still has to run.
		from := now.Add(-r.grace(fam))
		if cursors[i] > 0 {
			from = time.Unix(cursors[i], 0)
		}
		b := &famBucket{fam: fam, key: key, sched: s, next: s.Next(from), added: now}
		st.buckets[fam.Name][key] = b
		if !b.next.IsZero() {
			heap.Push(&st.queue, b)
		}
	}
	return nil
}

// pollFamilies picks up buckets that members' changes created.
func (r *Runtime) pollFamilies(ctx context.Context, st *familyState, now time.Time) error {
	ver, err := r.eng.FamilyVersion(ctx)
	if err != nil || ver == st.version {
		return err
	}
	for _, fam := range r.families() {
		if err := r.addBuckets(ctx, st, fam, st.seen[fam.Name], now); err != nil {
			return err
		}
	}
	st.version = ver
	return nil
}

// dispatchBuckets handles every bucket due at now, and returns the
// dispatch's lateness: its earliest slot, or when that slot's bucket came
// to this leader if later. It counts toward handing the lease over as a
// schedules' dispatch does (handover.go): a leader behind a slow link
// falls behind its members' slots as it does behind its schedules'.
func (r *Runtime) dispatchBuckets(ctx context.Context, st *familyState, now time.Time) (late dispatchLate, err error) {
	defer func() {
		if err == nil {
			late.enqueued = r.clock.Now()
		}
	}()
	for len(st.queue) > 0 && !st.queue[0].next.After(now) {
		b := heap.Pop(&st.queue).(*famBucket)
		if from := later(b.next, b.added); late.earliest.IsZero() || from.Before(late.earliest) {
			late.earliest = from
		}
		empty, err := r.dispatchBucket(ctx, st, b, now)
		if err != nil {
			return late, err
		}
		if empty {
			delete(st.buckets[b.fam.Name], b.key)
			continue
		}
		if b.next = b.sched.Next(now); !b.next.IsZero() {
			heap.Push(&st.queue, b)
		}
	}
	return late, nil
}

// dispatchBucket plans, enqueues and commits every member of the bucket
// with a slot due at now, page by page, familyPagesInFlight pages at a
// time, and reports whether the bucket had no member left. The last page
// waits for the others: it commits the bucket's cursor, which only a
// bucket handled whole may.
func (r *Runtime) dispatchBucket(ctx context.Context, st *familyState, b *famBucket, now time.Time) (empty bool, err error) {
	fam := b.fam
	// The family's past pauses hold for members whose slots in them a
	// leader reaches only after the resume, as a schedule's do.
	pauses, famWindows, err := r.eng.PauseStates(ctx, []string{fam.Name})
	if err != nil {
		return false, err
	}
	pg := &familyPages{r: r, st: st, b: b, now: now, famPaused: pauses[0] != nil, famWindows: famWindows[0],
		free: make(chan struct{}, familyPagesInFlight)}
	after, members := "", 0
	for {
		keys, err := r.eng.BucketPage(ctx, fam.Name, b.key, after, familyPage)
		if err != nil {
			pg.wg.Wait()
			return false, err
		}
		members += len(keys)
		if len(keys) < familyPage {
			pg.wg.Wait()
			if fatal, _ := pg.errs(); fatal != nil {
				return false, fatal
			}
			pg.dispatch(ctx, keys, true)
			fatal, firstErr := pg.errs()
			return members == 0, cmp2(fatal, firstErr)
		}
		pg.free <- struct{}{}
		if fatal, _ := pg.errs(); fatal != nil {
			<-pg.free
			pg.wg.Wait()
			return false, fatal
		}
		pg.wg.Go(func() {
			defer func() { <-pg.free }()
			pg.dispatch(ctx, keys, false)
		})
		after = keys[len(keys)-1]
	}
}

// familyPagesInFlight bounds the pages of a bucket under way at once:
// while one page's enqueue waits on the engine, the next is read and
// planned, and enqueued beside it.
const familyPagesInFlight = 2

// familyPages is one dispatch of a bucket's pages.
type familyPages struct {
	r          *Runtime
	st         *familyState
	b          *famBucket
	now        time.Time
	famPaused  bool
	famWindows []engine.PauseWindow
	free       chan struct{}
	wg         sync.WaitGroup

	mu sync.Mutex
	// fatal ends the dispatch (a failed read or commit, or the lease
	// lost); firstErr is the first of the pages' enqueue errors, which
	// keeps the bucket's cursor where it is.
	fatal, firstErr error
}

func (pg *familyPages) errs() (fatal, firstErr error) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	return pg.fatal, pg.firstErr
}

func (pg *familyPages) fail(fatal, planErr error) {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	pg.fatal, pg.firstErr = cmp2(pg.fatal, fatal), cmp2(pg.firstErr, planErr)
}

// dispatch plans, enqueues and commits the members keys, a page; last
// commits the bucket's cursor too, if no page had an error.
func (pg *familyPages) dispatch(ctx context.Context, keys []string, last bool) {
	r, b, leaseValue := pg.r, pg.b, pg.st.value
	plans, prior, err := r.planMembers(ctx, b, keys, pg.famPaused, pg.famWindows, pg.st.lostFloor, pg.now)
	if err != nil {
		pg.fail(err, nil)
		return
	}
	r.enqueueAll(ctx, &engine.Fence{Term: leaseValue}, plans)
	commit, mcs, planErr := r.familyCommit(b, plans, prior, pg.now)
	if errors.Is(planErr, engine.ErrNotLeader) {
		pg.fail(planErr, nil) // the commit would be refused too
		return
	}
	pg.fail(nil, planErr)
	bucketCursor := ""
	if _, firstErr := pg.errs(); last && firstErr == nil {
		if through := b.sched.Prev(pg.now); !through.IsZero() {
			bucketCursor = strconv.FormatInt(through.Unix(), 10)
		}
	}
	if len(mcs) > 0 || bucketCursor != "" {
		// What was enqueued is committed even when the loop's context
		// ends meanwhile (shutdown): the records and counters of the
		// page's enqueues are not lost, and the next holder does not
		// enqueue them again. The fence still refuses a late commit.
		commitCtx := context.WithoutCancel(ctx)
		if err := r.eng.CommitFamily(commitCtx, leaseValue, b.fam.Name, commit, mcs, b.key, bucketCursor); err != nil {
			pg.fail(err, nil) // cursors stay; the next pass re-enqueues harmlessly
			return
		}
	}
	for _, p := range plans {
		p.report(r.emit)
	}
}

// planMembers plans the slots due at now of the members keys of bucket b,
// famWindows being the family's past pauses. prior holds each plan's
// member's last enqueued slot before it.
func (r *Runtime) planMembers(ctx context.Context, b *famBucket, keys []string, famPaused bool, famWindows []engine.PauseWindow, floor, now time.Time) ([]*slotPlan, []int64, error) {
	if len(keys) == 0 {
		return nil, nil, nil
	}
	ms, known, cursors, hasCursor, err := r.eng.MemberStates(ctx, b.fam.Name, keys)
	if err != nil {
		return nil, nil, err
	}
	s, grace := b.sched, r.grace(b.fam)
	plans := make([]*slotPlan, 0, len(keys))
	prior := make([]int64, 0, len(keys))
	for i, key := range keys {
		if !known[i] || engine.BucketOf(ms[i].Zone, ms[i].Expr) != b.key {
			continue // deleted or moved since the page was read: its new bucket has it
		}
		start := memberFloor(later(time.Unix(ms[i].Since, 0), floor), cursors[i], hasCursor[i], s.Location())
		first := s.Next(start)
		if first.IsZero() || first.After(now) {
			continue
		}
		p := planSlots(r.memberScope(b.fam, key), s, first, start, now, grace)
		if hasCursor[i] && cursors[i].LastEnqueued > 0 {
			p.prevID = p.scope.ID(time.Unix(cursors[i].LastEnqueued, 0))
		}
		p.applyPauses(ms[i].Paused || famPaused, famWindows, now, grace)
		plans = append(plans, p)
		prior = append(prior, cursors[i].LastEnqueued)
	}
	return plans, prior, nil
}

// memberFloor is the instant after which a member in loc has its next
// slot: its since, or, if later, its cursor's floor (if it has a cursor).
func memberFloor(since time.Time, c engine.MemberCursor, hasCursor bool, loc *time.Location) time.Time {
	if !hasCursor {
		return since
	}
	return later(since, cursorFloor(c, loc))
}

// cursorFloor is the instant after which a member's next slot lies: the
// cursor's own instant, or, if later, the instant its local time has in
// loc, the member's zone now.
func cursorFloor(c engine.MemberCursor, loc *time.Location) time.Time {
	at := time.Unix(c.Slot, 0)
	wall := time.Unix(c.Slot+int64(c.Offset), 0).UTC()
	same := time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), wall.Second(), 0, loc)
	if same.After(at) {
		return same
	}
	return at
}

// familyCommit is the fenced commit of a page's plans: the family's
// records (the newest HistoryLimit of them; all are counted) and
// counters, and each member's cursor and newest occurrence. It returns
// the first enqueue error, engine.ErrNotLeader if any.
func (r *Runtime) familyCommit(b *famBucket, plans []*slotPlan, prior []int64, now time.Time) (engine.Commit, []engine.MemberCommit, error) {
	fam := engine.Commit{Name: b.fam.Name, Counts: map[string]int64{}}
	mcs := make([]engine.MemberCommit, 0, len(plans))
	withLast := b.fam.Overlap == registry.OverlapSkip
	loc := b.sched.Location()
	firstErr := firstPlanErr(plans)
	if errors.Is(firstErr, engine.ErrNotLeader) {
		return fam, nil, firstErr
	}
	for i, p := range plans {
		c := p.commit(now)
		for k, v := range c.Counts {
			if strings.HasPrefix(k, "last_") {
				fam.Counts[k] = max(fam.Counts[k], v)
			} else {
				fam.Counts[k] += v
			}
		}
		_, offset := p.cursor.In(loc).Zone()
		cur := engine.MemberCursor{Slot: p.cursor.Unix(), Offset: offset, LastEnqueued: prior[i]}
		mc := engine.MemberCommit{Member: p.scope.Member}
		var newest *engine.Rec
		for j := range c.Recs {
			rec := &c.Recs[j]
			rec.Member = p.scope.Member
			if rec.Outcome == string(OutcomeEnqueued) {
				cur.LastEnqueued = max(cur.LastEnqueued, rec.Slot)
			}
			if newest == nil || rec.Slot >= newest.Slot {
				newest = rec
			}
			fam.Recs = append(fam.Recs, *rec)
		}
		mc.Cursor = engine.EncodeCursor(cur, withLast)
		if newest != nil {
			mc.Last = engine.EncodeLast(engine.MemberLast{Slot: newest.Slot, Outcome: newest.Outcome, At: newest.At})
			mc.LastSlot = newest.Slot
		}
		mcs = append(mcs, mc)
	}
	// Records beyond the history limit would be trimmed at once.
	if limit := r.opts.HistoryLimit; len(fam.Recs) > limit {
		slices.SortStableFunc(fam.Recs, func(a, b engine.Rec) int { return cmp.Compare(a.Score, b.Score) })
		fam.Recs = fam.Recs[len(fam.Recs)-limit:]
	}
	return fam, mcs, firstErr
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

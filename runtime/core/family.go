package core

// Families: the Go API, rt.Families().
//
// A family is a schedule declared with per= (registry.Schedule.Per): the
// code declares the work (handler, queue, timeout, retries, grace,
// overlap, the default expression and zone); the members are data in
// Redis, managed here, each with its own zone and optionally its own
// expression:
//
//	fams := rt.Families()
//	fams.Set(ctx, "weekly-report", runtime.Member{Key: "acme", Zone: "Europe/Paris"})   // created?
//	fams.SetMany(ctx, "weekly-report", many)        // bulk: one script per 500 members
//	fams.Get(ctx, "weekly-report", "acme")          // ErrNoMember if unknown
//	fams.List(ctx, "weekly-report", cursor, 100)    // a page and the next cursor ("" at the end)
//	fams.Search(ctx, "weekly-report", "ac", cursor, 100)
//	fams.Count(ctx, "weekly-report")
//	fams.Delete(ctx, "weekly-report", "acme")       // ErrNoMember if unknown
//	fams.Pause(ctx, "weekly-report", "acme", "moving to a new plan"); fams.Resume(...)
//	fams.Infos(ctx, "weekly-report", page)          // each one's next run and last run
//	fams.Next(ctx, "weekly-report")                 // the next run of any member
//	fams.History(ctx, "weekly-report", "acme", 10)
//	fams.Trigger / Rerun / Backfill                 // manual runs for one member
//
// Names: an unknown schedule is ErrUnknownSchedule, an ordinary one
// ErrNotAFamily; a bad member key, zone or expression is an error that
// wraps ErrBadMember and reads as crongen's message for the same mistake
// in a directive. Member.Zone and Member.Expr empty mean the family's
// (Families.Get returns the zone in effect; Expr stays empty when it is
// the family's). Member.Paused (or Families.Pause, with a reason) pauses
// one member: its slots are recorded paused and never run, and resuming
// does not backfill; Runtime.Pause on the family's name pauses every
// member. The family's counters (Monitor.Counters) and history
// (Runtime.History, Monitor.HistoryLimit records for all members together)
// cover all its members; Record.Member says whose an occurrence was, and
// Families.Infos has each member's newest one. Runtime.Trigger, Rerun and
// Backfill refuse a family's name (ErrNoMember: say which member): use
// Families.Trigger, Rerun and Backfill. Families.List pages hold at most
// their limit of members each, in no particular order.
//
// A member's first slot is the first after it was written (by the
// writing replica's clock). Redis holds a member's entry, its bucket's
// index, its cursor and its newest occurrence, within 512 bytes a member
// (family_redis_bytes_member in BENCHMARKS.md); the leader holds one entry
// per (zone, expression), not per member.
//
// Every guarantee of an ordinary schedule holds per (member, slot): one
// enqueue across replicas, fenced; grace; no backfill; missed recorded;
// overlap=skip per member. A member's occurrence ID is
// "cron:<ns>/<family>:member:<member>:<slot>" (registry.Scope).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
)

// Errors of the family API.
var (
	// ErrNotAFamily: a member operation named an ordinary schedule.
	ErrNotAFamily = errors.New("not a family (declared without per=)")
	// ErrNoMember: the family has no member with that key, or a manual
	// run named a family without a member.
	ErrNoMember = errors.New("no such member")
	// ErrBadMember: a member's key, zone or expression is not valid. The
	// error's text is the reason, in crongen's words.
	ErrBadMember = errors.New("bad member")
	// ErrMembersBusy: members kept changing while a write computed the
	// next runs of those whose zone or expression it changes (a leader
	// handling their slots at every try, or another writer); try again.
	ErrMembersBusy = engine.ErrMembersBusy
)

// Families manages the members of the registry's families (schedules
// declared with per=) and runs them by hand. Every method takes the
// family's name first: an unknown name is ErrUnknownSchedule, an ordinary
// schedule's ErrNotAFamily, an unknown member ErrNoMember, and a bad key,
// zone or expression wraps ErrBadMember.
type Families struct{ rt *Runtime }

// Families returns the runtime's family API: members and their manual runs.
func (r *Runtime) Families() *Families { return &Families{rt: r} }

// Member is one member of a family.
type Member struct {
	// Key identifies the member: a tenant's slug or ID
	// (registry.CheckMember's alphabet).
	Key string `json:"member"`
	// Zone is the IANA zone the member's slots are in; empty means the
	// family's tz=.
	Zone string `json:"zone"`
	// Expr is the member's own cron expression; empty means the family's.
	Expr string `json:"expr,omitempty"`
	// Paused members' slots are recorded paused and never run.
	Paused bool `json:"paused,omitempty"`
}

// badMemberError is a member rejected for reason, which is the whole text.
type badMemberError struct{ reason error }

func (e *badMemberError) Error() string        { return e.reason.Error() }
func (e *badMemberError) Is(target error) bool { return target == ErrBadMember }
func (e *badMemberError) Unwrap() error        { return e.reason }

func badMember(format string, args ...any) error {
	return &badMemberError{fmt.Errorf(format, args...)}
}

// family looks a family up for a member operation.
func (r *Runtime) family(name string) (*registry.Schedule, error) {
	s, ok := r.reg.Lookup(name)
	switch {
	case !ok:
		return nil, fmt.Errorf("%w %q", ErrUnknownSchedule, name)
	case !s.Family():
		return nil, fmt.Errorf("%w: %q", ErrNotAFamily, name)
	case r.disabled != "":
		return nil, ErrDisabled
	}
	return s, nil
}

// memberSchedules caches the schedules members follow, by (zone, expr),
// for one bulk call: 100,000 members share a few hundred.
type memberSchedules struct {
	fam  *registry.Schedule
	seen map[[2]string]memberSchedule
}

type memberSchedule struct {
	s   *registry.Schedule
	err error
}

func (c *memberSchedules) get(zone, expr string) (*registry.Schedule, error) {
	k := [2]string{zone, expr}
	if ms, ok := c.seen[k]; ok {
		return ms.s, ms.err
	}
	s, err := c.fam.ForMember(zone, expr)
	if c.seen == nil {
		c.seen = map[[2]string]memberSchedule{}
	}
	c.seen[k] = memberSchedule{s, err}
	return s, err
}

// checkMember validates m against the family and returns it as stored:
// the family's own zone and expression stored as empty, so that members
// that did not choose follow the code's default.
func checkMember(cache *memberSchedules, m Member) (engine.SetMember, error) {
	if err := registry.CheckMember(m.Key); err != nil {
		return engine.SetMember{}, badMember("bad member %q: %v", m.Key, err)
	}
	fam := cache.fam
	zone, expr := m.Zone, m.Expr
	if zone == fam.Zone {
		zone = ""
	}
	if expr == fam.Expr {
		expr = ""
	}
	if strings.ContainsAny(zone, "|") {
		return engine.SetMember{}, badMember("bad value %q for tz: unknown zone %q; want an IANA name such as tz=UTC or tz=America/New_York", m.Zone, m.Zone)
	}
	if _, err := cache.get(zone, expr); err != nil {
		return engine.SetMember{}, &badMemberError{err}
	}
	return engine.SetMember{Key: m.Key, Paused: m.Paused, Zone: zone, Expr: expr}, nil
}

// Set creates or replaces a member of the family and reports
// whether it was created. A new member's first slot is its first after
// now: one added at 08:59:58 runs at 09:00, not for a slot before. A
// change of a member's zone or expression moves its next run and never
// adds one (familychange.go): the run it would have had next on its old
// schedule happens at the new schedule's slot nearest to it, after the
// change and after the last slot it had and that slot's local time. A
// weekly report moved from Tokyo to New York after Monday 09:00 in Tokyo
// next runs the Monday after, not again on Monday 09:00 in New York; one
// moved from 09:00 to 10:00 on a Monday at 09:30 next runs the Monday
// after, at 10:00. The leader sees the change within about a second.
func (fs *Families) Set(ctx context.Context, family string, m Member) (created bool, err error) {
	r := fs.rt
	fam, err := r.family(family)
	if err != nil {
		return false, err
	}
	sm, err := checkMember(&memberSchedules{fam: fam}, m)
	if err != nil {
		return false, err
	}
	sm.Pause = r.memberPause(ctx, "")
	c, err := r.eng.SetMembers(ctx, family, r.clock.Now().Unix(), false, []engine.SetMember{sm}, r.changeFloorFunc(fam, &memberSchedules{fam: fam}))
	if err != nil {
		return false, err
	}
	return c[0], nil
}

// SetMany creates or replaces many members in one call: each is
// validated first, and a bad one fails the call before anything is
// written (its error names it). The writes go in scripts of 500 members.
func (fs *Families) SetMany(ctx context.Context, family string, ms []Member) error {
	r := fs.rt
	fam, err := r.family(family)
	if err != nil {
		return err
	}
	cache := &memberSchedules{fam: fam}
	out := make([]engine.SetMember, len(ms))
	seen := make(map[string]bool, len(ms))
	for i, m := range ms {
		if out[i], err = checkMember(cache, m); err != nil {
			return fmt.Errorf("member %d (%q): %w", i, m.Key, err)
		}
		if seen[m.Key] {
			return badMember("member %q is given twice", m.Key)
		}
		seen[m.Key] = true
	}
	pause := r.memberPause(ctx, "")
	for i := range out {
		out[i].Pause = pause
	}
	_, err = r.eng.SetMembers(ctx, family, r.clock.Now().Unix(), false, out, r.changeFloorFunc(fam, cache))
	return err
}

// memberPause is the record of a pause asked for now by ctx's actor.
func (r *Runtime) memberPause(ctx context.Context, reason string) engine.Pause {
	if len(reason) > maxReasonLen {
		reason = reason[:maxReasonLen] + "…"
	}
	return engine.Pause{Reason: reason, Actor: ActorFrom(ctx), At: r.clock.Now().UnixMilli()}
}

// Pause pauses one member, as Runtime.Pause does a schedule: its slots are
// recorded paused and never run, until Resume (or Set with
// Paused false); resuming does not backfill. The reason, ctx's actor and
// the time are kept (Infos). Pausing a paused member replaces its
// reason. A member set with Paused true through Set gets a pause with
// no reason.
func (fs *Families) Pause(ctx context.Context, family, key, reason string) error {
	r := fs.rt
	return r.setPaused(ctx, family, key, true, reason)
}

// Resume ends a member's pause; the next slot runs.
func (fs *Families) Resume(ctx context.Context, family, key string) error {
	r := fs.rt
	return r.setPaused(ctx, family, key, false, "")
}

func (r *Runtime) setPaused(ctx context.Context, family, key string, paused bool, reason string) error {
	fam, err := r.family(family)
	if err != nil {
		return err
	}
	var sm engine.SetMember
	// The member is written back with the zone and expression it was read
	// with; a change that lands in between makes the store refuse the
	// write (ErrMembersBusy), and it is read again.
	for try := 0; ; try++ {
		vs, ok, err := r.eng.Members(ctx, family, []string{key})
		if err != nil {
			return err
		}
		if !ok[0] {
			return fmt.Errorf("%w %q in %s", ErrNoMember, key, family)
		}
		v := vs[0]
		sm = engine.SetMember{Key: key, Paused: paused, Zone: v.Zone, Expr: v.Expr, Pause: r.memberPause(ctx, reason)}
		_, err = r.eng.SetMembers(ctx, family, r.clock.Now().Unix(), paused, []engine.SetMember{sm}, nil)
		if err == nil {
			break
		}
		if !errors.Is(err, engine.ErrMembersBusy) || try == 3 {
			return err
		}
	}
	what := "family member resumed"
	if paused {
		what = "family member paused"
	}
	r.log.Info(what, "schedule", fam.Name, "member", key, "reason", sm.Pause.Reason, "actor", sm.Pause.Actor)
	return nil
}

// Delete removes a member: it never runs again (ErrNoMember if the
// family has no such member). Its records stay in the family's history.
func (fs *Families) Delete(ctx context.Context, family, key string) error {
	r := fs.rt
	if _, err := r.family(family); err != nil {
		return err
	}
	ok, err := r.eng.DeleteMember(ctx, family, key)
	if err == nil && !ok {
		err = fmt.Errorf("%w %q in %s", ErrNoMember, key, family)
	}
	return err
}

func (r *Runtime) memberOf(fam *registry.Schedule, v engine.MemberValue) Member {
	return Member{Key: v.Key, Zone: cmpOr(v.Zone, fam.Zone), Expr: v.Expr, Paused: v.Paused}
}

func cmpOr(a, b string) string {
	if a == "" {
		return b
	}
	return a
}

// Get returns one member (ErrNoMember if unknown).
func (fs *Families) Get(ctx context.Context, family, key string) (Member, error) {
	r := fs.rt
	fam, err := r.family(family)
	if err != nil {
		return Member{}, err
	}
	type found struct {
		v  engine.MemberValue
		ok bool
	}
	f, err := bounded(ctx, func(ctx context.Context) (found, error) {
		vs, ok, err := r.eng.Members(ctx, family, []string{key})
		if err != nil {
			return found{}, err
		}
		return found{vs[0], ok[0]}, nil
	})
	if err != nil {
		return Member{}, err
	}
	if !f.ok {
		return Member{}, fmt.Errorf("%w %q in %s", ErrNoMember, key, family)
	}
	return r.memberOf(fam, f.v), nil
}

// List returns a page of at most limit members (in no particular order)
// and the cursor of the next page, "" after the last. Start with cursor
// "". Following the cursors lists every member present from the first
// page to the last exactly once (on Redis: unless the family shrinks to a
// small fraction of its size, or Redis restarts or fails over, while it is
// paged; docs/engines.md); a member added or removed while paging may or
// may not be listed. A page may hold fewer than limit members, and
// a search's may hold none and still have a next cursor: it reads a
// bounded number of members, so that a search of a large family never
// blocks Redis.
func (fs *Families) List(ctx context.Context, family, cursor string, limit int) (page []Member, next string, err error) {
	return fs.Search(ctx, family, "", cursor, limit)
}

// Search is List restricted to members whose key contains
// substr.
func (fs *Families) Search(ctx context.Context, family, substr, cursor string, limit int) (page []Member, next string, err error) {
	r := fs.rt
	fam, err := r.family(family)
	if err != nil {
		return nil, "", err
	}
	limit = min(max(limit, 1), 1000)
	type scanned struct {
		vs   []engine.MemberValue
		next string
	}
	got, err := bounded(ctx, func(ctx context.Context) (scanned, error) {
		vs, next, err := r.eng.ScanMembers(ctx, family, cursor, substr, limit)
		return scanned{vs, next}, err
	})
	vs, next := got.vs, got.next
	if errors.Is(err, engine.ErrBadCursor) {
		return nil, "", badMember("bad cursor %q: pass the one the previous page returned, or \"\" for the first", cursor)
	}
	if err != nil {
		return nil, "", err
	}
	page = make([]Member, len(vs))
	for i, v := range vs {
		page[i] = r.memberOf(fam, v)
	}
	return page, next, nil
}

// Count returns the number of members of the family.
func (fs *Families) Count(ctx context.Context, family string) (int64, error) {
	r := fs.rt
	if _, err := r.family(family); err != nil {
		return 0, err
	}
	return bounded(ctx, func(ctx context.Context) (int64, error) { return r.eng.MemberCount(ctx, family) })
}

// Schedule returns the schedule a member follows: the family's in
// the member's zone and with its expression (ErrBadMember if either is
// not valid). Its Next is the member's next run.
func (fs *Families) Schedule(family string, m Member) (*registry.Schedule, error) {
	r := fs.rt
	fam, ok := r.reg.Lookup(family)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownSchedule, family)
	}
	if !fam.Family() {
		return nil, fmt.Errorf("%w: %q", ErrNotAFamily, family)
	}
	s, err := fam.ForMember(m.Zone, m.Expr)
	if err != nil {
		return nil, &badMemberError{err}
	}
	return s, nil
}

// Next returns the family's next run over all its members: the
// earliest slot after now of any (zone, expression) its members have,
// in UTC; zero when it has no members. It reads the buckets, not the
// members: a member whose change of zone or expression moved its next
// run later (familychange.go) still counts its bucket's next slot, so
// this can be earlier than any member's own next run (Infos).
func (fs *Families) Next(ctx context.Context, family string) (time.Time, error) {
	n, err := fs.NextRun(ctx, family)
	return n.At, err
}

// FamilyNextRun is a family's next run across its members, and whose it is.
type FamilyNextRun struct {
	At time.Time // UTC; zero if no member runs again
	// Zone and Expr are those of the members the next run is for; Expr is
	// the family's own expression when they give none.
	Zone, Expr string
	// Expressions is how many different expressions the members run on,
	// the family's own counted once: with more than one, the family's
	// expression is not what every member runs.
	Expressions int
}

// NextRun is Next, saying which members' (zone, expression)
// the next run is for and how many expressions the members use, in the
// same one read of the family's buckets.
func (fs *Families) NextRun(ctx context.Context, family string) (FamilyNextRun, error) {
	r := fs.rt
	fam, err := r.family(family)
	if err != nil {
		return FamilyNextRun{}, err
	}
	buckets, err := bounded(ctx, func(ctx context.Context) ([]engine.BucketVersion, error) {
		return r.eng.BucketsChangedAfter(ctx, family, -1)
	})
	if err != nil {
		return FamilyNextRun{}, err
	}
	now := r.clock.Now()
	var next FamilyNextRun
	exprs := map[string]bool{}
	for _, b := range buckets {
		s, err := fam.ForMember(engine.SplitBucket(b.Bucket))
		if err != nil {
			continue
		}
		exprs[s.Expr] = true
		if t := s.Next(now); !t.IsZero() && (next.At.IsZero() || t.Before(next.At)) {
			next.At, next.Zone, next.Expr = t, s.Zone, s.Expr
		}
	}
	next.At, next.Expressions = next.At.UTC(), len(exprs)
	return next, nil
}

// LastRun is a member's newest occurrence. In JSON, as a Record's,
// "task_id" is null for a slot that was never enqueued (missed, skipped,
// paused), and "occurrence_id" is ID.
type LastRun struct {
	Slot    time.Time `json:"slot"`
	Outcome Outcome   `json:"outcome"`
	At      time.Time `json:"at"`
	ID      string    `json:"task_id"`
}

// MarshalJSON writes the last run as its struct tags say, with "task_id"
// null for a slot that was never enqueued and "occurrence_id" beside it.
func (l LastRun) MarshalJSON() ([]byte, error) {
	type fields LastRun
	return json.Marshal(struct {
		fields
		TaskID       *string `json:"task_id"`
		OccurrenceID string  `json:"occurrence_id"`
	}{fields(l), taskIDOrNil(l.ID, l.Outcome), l.ID})
}

// MemberInfo is a member with its next and last run.
type MemberInfo struct {
	Member
	// Next is the member's next slot after now; zero if none.
	Next time.Time `json:"next_run,omitzero"`
	// Last is its newest occurrence; nil if none yet.
	Last *LastRun `json:"last_run,omitempty"`
	// Pause is why, when and by whom a paused member was paused.
	Pause *Pause `json:"pause,omitempty"`
}

// Infos adds each member's next run (after now) and last run, in
// three round trips for the page, whatever its size.
func (fs *Families) Infos(ctx context.Context, family string, ms []Member) ([]MemberInfo, error) {
	r := fs.rt
	fam, err := r.family(family)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(ms))
	for i, m := range ms {
		keys[i] = m.Key
	}
	type state struct {
		lasts            []engine.MemberLast
		ok               []bool
		pauses           []*engine.Pause
		stored           []engine.MemberValue
		known, hasCursor []bool
		cursors          []engine.MemberCursor
	}
	st, err := bounded(ctx, func(ctx context.Context) (st state, err error) {
		if st.lasts, st.ok, err = r.eng.MemberLasts(ctx, family, keys); err != nil {
			return st, err
		}
		if st.pauses, err = r.eng.MemberPauses(ctx, family, keys); err != nil {
			return st, err
		}
		// The next run is the leader's: after the member's since (a
		// change's floor) and its cursor's floor, as planMembers reckons it.
		st.stored, st.known, st.cursors, st.hasCursor, err = r.eng.MemberStates(ctx, family, keys)
		return st, err
	})
	if err != nil {
		return nil, err
	}
	now := r.clock.Now()
	cache := &memberSchedules{fam: fam}
	out := make([]MemberInfo, len(ms))
	for i, m := range ms {
		out[i].Member = m
		if p := st.pauses[i]; p != nil && m.Paused {
			pause := pauseOf(*p)
			out[i].Pause = &pause
		}
		if s, err := cache.get(m.Zone, m.Expr); err == nil {
			since := now
			if st.known[i] {
				since = later(since, time.Unix(st.stored[i].Since, 0))
			}
			if next := s.Next(memberFloor(since, st.cursors[i], st.hasCursor[i], s.Location())); !next.IsZero() {
				out[i].Next = next.In(s.Location())
			}
		}
		if st.ok[i] {
			l := st.lasts[i]
			id := l.ID
			if id == "" {
				id = r.memberScope(fam, m.Key).ID(time.Unix(l.Slot, 0))
			}
			out[i].Last = &LastRun{Slot: time.Unix(l.Slot, 0).UTC(), Outcome: Outcome(l.Outcome), At: unixMilli(l.At), ID: id}
		}
	}
	return out, nil
}

// History returns the member's occurrences among the family's
// newest records (the family keeps Monitor.HistoryLimit records for all its
// members together), newest first, at most n. Infos has every
// member's newest occurrence.
func (fs *Families) History(ctx context.Context, family, key string, n int) ([]Record, error) {
	r := fs.rt
	if _, err := r.family(family); err != nil {
		return nil, err
	}
	recs, err := r.History(ctx, family, r.opts.HistoryLimit)
	out := recs[:0]
	for _, rec := range recs {
		if rec.Member == key && len(out) < n {
			out = append(out, rec)
		}
	}
	return out, err
}

func (r *Runtime) memberScope(fam *registry.Schedule, key string) registry.Scope {
	return registry.Scope{Namespace: r.opts.Namespace, Schedule: fam.Name, Member: key}
}

// manualMember looks a member up for a manual run: the schedule it
// follows and its scope.
func (r *Runtime) manualMember(ctx context.Context, family, key string) (*registry.Schedule, registry.Scope, error) {
	m, err := r.Families().Get(ctx, family, key)
	if err != nil {
		return nil, registry.Scope{}, err
	}
	s, err := r.Families().Schedule(family, m)
	if err != nil {
		return nil, registry.Scope{}, err
	}
	return s, r.memberScope(s, key), nil
}

// Trigger is Runtime.Trigger for one member of a family: a run now, in the
// member's zone, with its own key.
func (fs *Families) Trigger(ctx context.Context, family, key, requestKey string) (registry.Occurrence, error) {
	r := fs.rt
	s, sc, err := r.manualMember(ctx, family, key)
	if err != nil {
		return registry.Occurrence{}, err
	}
	return r.trigger(ctx, s, sc, requestKey)
}

// Rerun is Runtime.Rerun for one member: the slot must be one the member's
// schedule (its zone and expression now) really had.
func (fs *Families) Rerun(ctx context.Context, family, key string, slot time.Time, requestKey string) (registry.Occurrence, error) {
	r := fs.rt
	s, sc, err := r.manualMember(ctx, family, key)
	if err != nil {
		return registry.Occurrence{}, err
	}
	return r.rerun(ctx, s, sc, slot, requestKey)
}

// Backfill is Runtime.Backfill for one member.
func (fs *Families) Backfill(ctx context.Context, family, key string, from, to time.Time, requestKey string) ([]registry.Occurrence, error) {
	r := fs.rt
	s, sc, err := r.manualMember(ctx, family, key)
	if err != nil {
		return nil, err
	}
	return r.backfill(ctx, s, sc, from, to, requestKey)
}

// occurrence is the scheduled occurrence of slot for the plan's scope:
// the member's, for a family.
func (p *slotPlan) occurrence(namespace string, slot time.Time) registry.Occurrence {
	occ := p.sched.Occurrence(namespace, slot)
	if p.scope.Member != "" {
		occ.Member, occ.ID = p.scope.Member, p.scope.ID(slot)
	}
	return occ
}

// families lists the registry's families.
func (r *Runtime) families() []*registry.Schedule {
	var out []*registry.Schedule
	for _, s := range r.reg.Schedules() {
		if s.Family() {
			out = append(out, s)
		}
	}
	return out
}

// noteMemberRun records a member's newest occurrence for Families.Infos; a
// failure is logged, never the handler's.
func (r *Runtime) noteMemberRun(ctx context.Context, occ registry.Occurrence, outcome Outcome, at time.Time) {
	id := occ.ID
	if id == (registry.Scope{Namespace: r.opts.Namespace, Schedule: occ.Schedule, Member: occ.Member}).ID(occ.Slot) {
		id = ""
	}
	l := engine.MemberLast{Slot: occ.Slot.Unix(), Outcome: string(outcome), At: at.UnixMilli(), ID: id}
	if err := r.eng.SetMemberLast(ctx, occ.Schedule, occ.Member, l); err != nil {
		r.log.Warn("could not record a member's last run", "id", occ.ID, "err", err)
	}
}

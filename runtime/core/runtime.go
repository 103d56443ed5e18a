package core

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/clock"
)

// Runtime schedules a registry's occurrences into its engine's queue, once
// per occurrence across replicas. Create one per process with New and call
// Run.
type Runtime struct {
	reg   *registry.Registry
	opts  Options
	log   *slog.Logger
	clock clock.Clock

	// disabled explains why the scheduler does not run (no Redis
	// configured); empty when it does.
	disabled string

	// eng is the engine every core file talks to; its optional
	// interfaces (package engine) are type-asserted where used.
	eng engine.Engine
	// deliveries reads a worker's delivery (its attempt); nil when the
	// engine does not say.
	deliveries engine.Deliveries

	redisMu   sync.Mutex
	redisErr  error // last Redis error, nil while reachable
	redisSeen bool  // a call has completed since start
	// redisDownAs names redisErr when the engine knows it for an answer
	// that the server cannot serve for now (engine.Unavailable): "" for
	// an outage.
	redisDownAs string
	// outageSaid holds the kinds of outage (outageKind) logged since Redis
	// was last reachable: each is said once an outage, however often the
	// errors alternate between kinds.
	outageSaid map[string]bool
	// outageLast is the outage the log last named: a later line's was.
	outageLast string
	running    atomic.Bool
	// scheduling is true while the leader loop holds leader state and
	// enqueues (leaderloop.go); only that loop writes it.
	scheduling atomic.Bool
	// loopSignals are the leader loop's test signals, silent unless a
	// test inits them.
	loopSignals leaderLoopSignals

	observers
	unserved   unservedLog
	redisCheck redisCheck
	lateness   lateness
	inDoubt    inDoubt // enqueues no replica acknowledged (the engine's replica acks)
	// marks counts the attempts this runtime's workers hold a start mark
	// for and have not yet recorded the end of (start.go).
	marks atomic.Int64
	// checkpoints counts the checkpointed handlers running on this
	// runtime's workers; Close waits for their last saves.
	checkpoints atomic.Int64
	statusIndex statusIndex

	// identity tells this registry's service from others in the namespace;
	// derivedNamespace is true when the namespace is the default.
	identity         string
	derivedNamespace bool
	namespace        namespaceWatch
}

// recordTTL bounds how long an occurrence record outlives its index entry.
const recordTTL = 7 * 24 * time.Hour

// New validates opts and returns a runtime for reg, configuring
// opts.Engine when it is an engine.Configurable. It does not reach the
// engine's store; Run does.
func New(reg *registry.Registry, opts Options) (*Runtime, error) {
	return newRuntime(reg, opts, clock.Real{})
}

// newRuntime is New with the clock that lease, scheduler and ledger share:
// tests place a runtime at another instant, the chaos harness skews it.
func newRuntime(reg *registry.Registry, opts Options, clk clock.Clock) (*Runtime, error) {
	derived := opts.Namespace == ""
	if err := validate(reg, &opts); err != nil {
		return nil, err
	}
	identity := cmp.Or(registryIdentity(reg), "unknown")
	r := &Runtime{reg: reg, opts: opts, clock: clk, identity: identity, derivedNamespace: derived}
	r.namespace.looked = make(chan struct{})
	r.redisCheck.every = redisCheckEvery
	r.log = opts.Logger.With("replica", opts.Replica)
	if err := r.useEngine(clk); err != nil {
		return nil, err
	}
	return r, nil
}

// validate checks reg and opts, filling in opts' defaults (the namespace
// derived from reg when unset).
func validate(reg *registry.Registry, opts *Options) error {
	if reg == nil {
		return errors.New("registry is nil; pass the Registry that crongen generated")
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace(reg)
	}
	return opts.normalize()
}

// Registry returns the schedules this runtime serves.
func (r *Runtime) Registry() *registry.Registry { return r.reg }

// Replica returns this replica's name.
func (r *Runtime) Replica() string { return r.opts.Replica }

// Logger returns the runtime's logger, for integrations that log beside it.
func (r *Runtime) Logger() *slog.Logger { return r.log }

// duplicateReplica says, when another process heartbeats under this
// replica's Replica name on the same namespace, which it is; "" otherwise.
// Two processes with one name make the admin and the metrics lie about
// who did what.
func (r *Runtime) duplicateReplica() string {
	if r.disabled != "" {
		return ""
	}
	if d, ok := r.eng.Duplicate(); ok {
		return d.String()
	}
	return ""
}

// grace returns how late a slot of s may still be enqueued: Options.Grace
// when set, else the schedule's own.
func (r *Runtime) grace(s *registry.Schedule) time.Duration {
	if r.opts.Grace > 0 {
		return r.opts.Grace
	}
	return s.Grace
}

// isLeader reports whether this replica holds the lease and trusts it.
func (r *Runtime) isLeader() bool {
	if r.disabled != "" {
		return false
	}
	_, ok := r.eng.Current()
	return ok
}

// Run schedules until ctx is cancelled, then releases the lease so a
// follower takes over at once, and returns. With no Redis configured it logs
// once that scheduling is disabled and waits for ctx. It never panics the
// host on Redis errors: it retries with backoff and logs state changes.
func (r *Runtime) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("runtime: Run called twice")
	}
	if r.disabled != "" {
		r.log.Warn("belfry scheduler disabled: " + r.disabled + "; schedules are listed but nothing is enqueued")
		<-ctx.Done()
		return nil
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.watchNamespace(ctx) })
	wg.Go(func() { r.eng.Run(ctx) })
	wg.Go(func() { r.newLeaderLoop().run(ctx) })
	wg.Go(func() { r.warmStatuses(ctx) })
	wg.Wait()
	releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	r.eng.Release(releaseCtx)
	return nil
}

// Close waits, briefly, for the attempts this runtime's workers marked
// started (an engine with engine.Starts) to record their ends: call it
// after the workers' shutdown. The engine's clients are its owner's to
// close.
func (r *Runtime) Close() error {
	// A worker shut down just before cancelled its attempts; their marks'
	// last writes let the next deliveries run them at once.
	r.waitMarks()
	return nil
}

// noteRedis logs Redis reachability changes, and an outage changing kind
// (the engine's word for it, or replicas not acknowledging), once each,
// not every retry. Its first line says slow for a timeout, but slow and
// unreachable are one kind: a Redis that went away gives both, a refused
// connection and a dial that outlives the call's deadline, by turns.
func (r *Runtime) noteRedis(err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, engine.ErrNotLeader) {
		return
	}
	// A cluster's refusal is an answer: Redis is reachable and refuses
	// what belfry asks of it, which no retry mends.
	refusal := r.refusal(err)
	if refusal != nil {
		defer r.refuseCluster(refusal)
		err = nil
	}
	if err == nil {
		r.statusIndex.answered.Store(time.Now().UnixNano())
	}
	downAs := r.unavailable(err)
	r.redisMu.Lock()
	defer r.redisMu.Unlock()
	wasDown, first, wasDownAs := r.redisErr != nil, !r.redisSeen, r.redisDownAs
	was, wasKind := r.outageLast, r.outageKind(r.redisErr, r.redisDownAs)
	r.redisSeen = true
	r.redisErr, r.redisDownAs = err, downAs
	if errors.Is(err, ErrNotAcked) {
		// Redis ran the write, and too few replicas have it: judge the
		// settings again before leading, which says why when no replica
		// is connected (a failover's new primary, a replica down).
		r.redisCheck.mu.Lock()
		r.redisCheck.stale = true
		r.redisCheck.mu.Unlock()
	}
	outage, kind := r.outageName(err, downAs), r.outageKind(err, downAs)
	if err == nil || !wasDown || first {
		clear(r.outageSaid)
	} else if kind == wasKind || r.outageSaid[kind] {
		outage = "" // said: errors repeated on every retry, or alternating between two kinds, do not flood the log
	}
	if outage != "" {
		if r.outageSaid == nil {
			r.outageSaid = map[string]bool{}
		}
		r.outageSaid[kind] = true
		r.outageLast = outage
	}
	switch {
	case err != nil && (!wasDown || first):
		r.log.Error(outage+"; retrying with backoff", "err", err)
	case err != nil && outage != "":
		r.log.Error(outage+"; retrying with backoff", "err", err, "was", was)
	case err == nil && wasDown:
		if wasDownAs != "" {
			r.log.Info(strings.ToLower(r.storeName())+" serving again", "was", wasDownAs)
		} else {
			r.log.Info(strings.ToLower(r.storeName()) + " reachable again")
		}
		// It may be another Redis now (a failover, a restart with other
		// settings): judge its settings again before leading.
		r.redisCheck.mu.Lock()
		r.redisCheck.stale = true
		if refusal == nil {
			r.redisCheck.cluster = nil
		}
		r.redisCheck.mu.Unlock()
	}
}

// unavailable is the engine's name for err when err is its server
// answering that it cannot serve for now (engine.Unavailable), else "".
func (r *Runtime) unavailable(err error) string {
	if u, ok := r.eng.(engine.Unavailable); ok && err != nil {
		return u.Unavailable(err)
	}
	return ""
}

// downName is how the log and health name Redis down: as the engine named
// its answer (downAs), else unreachable.
func (r *Runtime) downName(downAs string) string {
	return cmp.Or(downAs, strings.ToLower(r.storeName())+" unreachable")
}

// outageKind is the kind of outage err is, for telling a change of kind:
// outageName's, with slow one kind with unreachable.
func (r *Runtime) outageKind(err error, downAs string) string {
	if err != nil && !errors.Is(err, ErrNotAcked) {
		return r.downName(downAs)
	}
	return r.outageName(err, downAs)
}

// outageName is how the log names the outage err is, in health's words
// (a call not answered in time is RedisSlow there): replicas that do not
// acknowledge, slow, else downName; "" for no error.
func (r *Runtime) outageName(err error, downAs string) string {
	store := strings.ToLower(r.storeName())
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrNotAcked):
		return store + " replicas do not acknowledge writes"
	case isSlow(err):
		return store + " slow"
	}
	return r.downName(downAs)
}

// redisState returns the runtime's view of Redis and, when it is down, the
// last error.
func (r *Runtime) redisState() (RedisState, error) {
	state, _, err := r.redisView()
	return state, err
}

// redisView is redisState with the name of a down Redis (downName of the
// engine's word for the last error), read together so that the two agree.
func (r *Runtime) redisView() (RedisState, string, error) {
	if r.disabled != "" {
		return RedisDisabled, "", nil
	}
	r.redisMu.Lock()
	defer r.redisMu.Unlock()
	name := r.downName(r.redisDownAs)
	if errors.Is(r.redisErr, ErrNotAcked) {
		name = r.outageName(r.redisErr, r.redisDownAs) // as the log says it
	}
	switch {
	case !r.redisSeen:
		return RedisUnknown, name, nil
	case r.redisErr != nil && isSlow(r.redisErr):
		return RedisSlow, name, r.redisErr
	case r.redisErr != nil:
		return RedisDown, name, r.redisErr
	}
	return RedisUp, name, nil
}

// retention keeps a finished task's ID reserved for a lease TTL, not for
// grace: no scheduler path enqueues a slot again once its task is in. An
// ex-leader's late enqueue is refused by the fence, and a holder that
// crashed between its enqueue and its commit left its cursor raised to the
// slot by the enqueue itself (the same script), so the next holder
// starts after it. What the retained ID still covers is a replay of one
// enqueue while its call lasts (go-redis retrying a command whose reply
// was lost), which a holder's lease bounds. A per-second schedule thus
// keeps about twenty finished tasks in Redis, not grace's three hundred —
// unless the engine's enqueues can end in doubt (engine.InDoubt): their
// retry, up to grace after the slot, must find a task that ran.
func (r *Runtime) retention(s *registry.Schedule, slot time.Time) time.Duration {
	if d, ok := r.eng.(engine.InDoubt); ok && d.EnqueuesInDoubt() {
		return max(r.opts.LeaseTTL, r.memberRetention(s, slot))
	}
	return r.opts.LeaseTTL
}

// memberRetention keeps a family member's finished task ID reserved as
// long as a replica could still enqueue the same slot: the next holder
// after a crash between the member's enqueue and its cursor commit
// enqueues the slot again while it is within grace, and with
// misfire=latest while it is the member's newest slot however old (a
// holder back after an outage longer than grace), that is until the next
// slot; plus its clock's skew.
func (r *Runtime) memberRetention(s *registry.Schedule, slot time.Time) time.Duration {
	window := r.grace(s)
	if s.Misfire == registry.MisfireLatest {
		if next := s.Next(slot); !next.IsZero() {
			window = max(window, next.Sub(slot))
		}
	}
	return window + r.opts.SkewMargin
}

// manualRetention keeps a manual occurrence's ID reserved long enough to
// make a double-submitted form a no-op.
const manualRetention = time.Hour

// MaxBackfillSlots caps the slots one Backfill may re-run, so making up an
// outage is a deliberate, bounded act.
const MaxBackfillSlots = 100

var requestKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// requestKeyOf checks a manual run's request key, or makes a fresh one.
func requestKeyOf(key string) (string, error) {
	if key == "" {
		return randomHex(), nil
	}
	if !requestKeyRE.MatchString(key) {
		return "", fmt.Errorf("%w %q: want 1-64 letters, digits, '-' or '_'", ErrBadRequestKey, key)
	}
	return key, nil
}

// randomHex is 16 random hex digits: an epoch, a request key, a token.
func randomHex() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// manualSchedule looks a schedule up for a manual run.
func (r *Runtime) manualSchedule(name string) (*registry.Schedule, error) {
	s, ok := r.reg.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownSchedule, name)
	}
	if r.disabled != "" {
		return nil, ErrDisabled
	}
	if s.Family() {
		return nil, fmt.Errorf("%w: %q is a family (per=%s); name the member (TriggerMember, RerunMember, BackfillMember)", ErrNoMember, name, s.Per)
	}
	return s, nil
}

// Trigger enqueues one manual occurrence of the schedule now ("run now"):
// its Slot is the moment of the trigger and its key is its own. To do a past
// slot's work again, use Rerun. requestKey identifies the request (e.g. a
// token in the admin form): triggering twice with the same key enqueues once
// and returns the same occurrence. An empty key makes a fresh one; a
// malformed one is ErrBadRequestKey.
func (r *Runtime) Trigger(ctx context.Context, name, requestKey string) (registry.Occurrence, error) {
	s, err := r.manualSchedule(name)
	if err != nil {
		return registry.Occurrence{}, err
	}
	return r.trigger(ctx, s, r.scope(s), requestKey)
}

func (r *Runtime) trigger(ctx context.Context, s *registry.Schedule, sc registry.Scope, requestKey string) (registry.Occurrence, error) {
	requestKey, err := requestKeyOf(requestKey)
	if err != nil {
		return registry.Occurrence{}, err
	}
	now := r.clock.Now().Truncate(time.Second)
	occ := registry.Occurrence{Schedule: s.Name, Slot: now.In(s.Location()), Zone: s.Zone, Member: sc.Member, Manual: true,
		ID: sc.ManualID(requestKey)}
	return occ, r.enqueueManual(ctx, s, occ)
}

// NotASlotError is returned by Rerun and Backfill for an instant that is not
// one of the schedule's slots, or is in the future; it names the nearest
// real slots.
type NotASlotError struct {
	Schedule      string
	Slot          time.Time
	Before, After time.Time // the nearest slots; zero if none
	Future        bool
}

func (e *NotASlotError) Error() string {
	near := func(t time.Time) string {
		if t.IsZero() {
			return "none"
		}
		return t.Format(time.RFC3339)
	}
	if e.Future {
		return fmt.Sprintf("%s is in the future; the newest past slot of %s is %s", e.Slot.Format(time.RFC3339), e.Schedule, near(e.Before))
	}
	return fmt.Sprintf("%s is not a slot of %s; the nearest are %s and %s", e.Slot.Format(time.RFC3339), e.Schedule, near(e.Before), near(e.After))
}

// Is makes errors.Is(err, ErrNotASlot) true.
func (e *NotASlotError) Is(target error) bool { return target == ErrNotASlot }

// checkSlot returns the slot in the schedule's zone if it is one the
// schedule really had, not in the future.
func (r *Runtime) checkSlot(s *registry.Schedule, slot time.Time) (time.Time, error) {
	now := r.clock.Now()
	real := s.AtOrAfter(slot)
	if !real.Equal(slot) {
		return time.Time{}, &NotASlotError{Schedule: s.Name, Slot: slot, Before: s.Prev(slot), After: real}
	}
	if slot.After(now) {
		return time.Time{}, &NotASlotError{Schedule: s.Name, Slot: slot, Before: s.Prev(now), Future: true}
	}
	return real.In(s.Location()), nil
}

// Rerun enqueues the schedule's past slot again: the night that failed. The
// occurrence carries that Slot, Manual true and the scheduled occurrence's
// Key, so a handler keyed on occ.Key() does the slot's work if it was not
// done and nothing if it was; its task ID is its own, so asynq accepts it
// while the original is retained or archived. The slot must be one the
// schedule really had and not in the future (a *NotASlotError otherwise).
// requestKey makes a double submit a no-op, as for Trigger.
func (r *Runtime) Rerun(ctx context.Context, name string, slot time.Time, requestKey string) (registry.Occurrence, error) {
	s, err := r.manualSchedule(name)
	if err != nil {
		return registry.Occurrence{}, err
	}
	return r.rerun(ctx, s, r.scope(s), slot, requestKey)
}

func (r *Runtime) rerun(ctx context.Context, s *registry.Schedule, sc registry.Scope, slot time.Time, requestKey string) (registry.Occurrence, error) {
	requestKey, err := requestKeyOf(requestKey)
	if err != nil {
		return registry.Occurrence{}, err
	}
	if slot, err = r.checkSlot(s, slot); err != nil {
		return registry.Occurrence{}, err
	}
	occ := rerunOccurrence(sc, s, slot, requestKey)
	return occ, r.enqueueManual(ctx, s, occ)
}

func rerunOccurrence(sc registry.Scope, s *registry.Schedule, slot time.Time, requestKey string) registry.Occurrence {
	return registry.Occurrence{Schedule: s.Name, Slot: slot, Zone: s.Zone, Member: sc.Member, Manual: true,
		ID: sc.RerunID(slot, requestKey), RerunOf: sc.ID(slot)}
}

// scope is whose occurrences s's IDs name: this runtime's namespace and s.
func (r *Runtime) scope(s *registry.Schedule) registry.Scope {
	return registry.Scope{Namespace: r.opts.Namespace, Schedule: s.Name}
}

// Backfill re-runs every slot of the schedule in [from, to] (see Rerun), at
// most MaxBackfillSlots (ErrTooManySlots beyond). to must not be in the
// future. The slots are enqueued oldest first; on an error the ones before
// it stay enqueued and are returned with it.
func (r *Runtime) Backfill(ctx context.Context, name string, from, to time.Time, requestKey string) ([]registry.Occurrence, error) {
	s, err := r.manualSchedule(name)
	if err != nil {
		return nil, err
	}
	return r.backfill(ctx, s, r.scope(s), from, to, requestKey)
}

func (r *Runtime) backfill(ctx context.Context, s *registry.Schedule, sc registry.Scope, from, to time.Time, requestKey string) ([]registry.Occurrence, error) {
	requestKey, err := requestKeyOf(requestKey)
	if err != nil {
		return nil, err
	}
	now := r.clock.Now()
	switch {
	case to.Before(from):
		return nil, fmt.Errorf("%w: from %s is after to %s", ErrBadRange, from.Format(time.RFC3339), to.Format(time.RFC3339))
	case to.After(now):
		return nil, fmt.Errorf("%w: to %s is in the future", ErrBadRange, to.Format(time.RFC3339))
	}
	var slots []time.Time
	for slot := s.AtOrAfter(from); !slot.IsZero() && !slot.After(to); slot = s.Next(slot) {
		if len(slots) == MaxBackfillSlots {
			return nil, fmt.Errorf("%w: %s has more than %d slots from %s to %s; backfill a shorter range",
				ErrTooManySlots, s.Name, MaxBackfillSlots, from.Format(time.RFC3339), to.Format(time.RFC3339))
		}
		slots = append(slots, slot)
	}
	if len(slots) == 0 {
		return nil, fmt.Errorf("%w: %s has no slot from %s to %s", ErrBadRange, s.Name, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	occs := make([]registry.Occurrence, 0, len(slots))
	for _, slot := range slots {
		occ := rerunOccurrence(sc, s, slot.In(s.Location()), requestKey)
		if err := r.enqueueManualUnacked(ctx, s, occ); err != nil {
			return occs, err
		}
		occs = append(occs, occ)
	}
	// One acknowledgement covers every enqueue before it.
	return occs, r.acknowledged(ctx, fmt.Sprintf("%d re-runs of %s", len(occs), s.Name))
}

// enqueueManual enqueues an operator's occurrence and records it with its
// actor; a double submit (its ID already enqueued) records nothing again.
// With the engine's replica acks (runtime.Options.ReplicaAcks on Redis)
// the operator hears "done" only once a failover can no longer lose the
// task (or its record); a double submit, which finds the task already
// there, waits for the same acknowledgement.
func (r *Runtime) enqueueManual(ctx context.Context, s *registry.Schedule, occ registry.Occurrence) error {
	if err := r.enqueueManualUnacked(ctx, s, occ); err != nil {
		return err
	}
	return r.acknowledged(ctx, "manual occurrence "+occ.ID)
}

// enqueueManualUnacked is enqueueManual without waiting for replicas.
func (r *Runtime) enqueueManualUnacked(ctx context.Context, s *registry.Schedule, occ registry.Occurrence) error {
	inserted, err := r.enqueue(ctx, s, occ, manualRetention)
	if err != nil {
		return err
	}
	if inserted {
		r.recordManual(ctx, s, occ)
	}
	return nil
}

// acknowledged waits for the replicas to have every write before it
// (store.Acknowledged). Any failure of that wait is ErrNotAcked: what was
// written is in Redis, so the caller must not hear "could not enqueue".
func (r *Runtime) acknowledged(ctx context.Context, what string) error {
	err := r.eng.Acknowledged(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotAcked):
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: written, but the replicas' acknowledgement could not be read: %w", what, errors.Join(ErrNotAcked, err))
}

// recordManual writes a manual occurrence's record once its task is in.
func (r *Runtime) recordManual(ctx context.Context, s *registry.Schedule, occ registry.Occurrence) {
	at := r.clock.Now().UnixMilli()
	rec := engine.Rec{ID: occ.ID, Slot: occ.Slot.Unix(), Manual: true, At: at, Outcome: string(OutcomeEnqueued),
		Score: at, Actor: ActorFrom(ctx), Member: occ.Member}
	if occ.Member != "" {
		r.noteMemberRun(ctx, occ, OutcomeEnqueued, time.UnixMilli(at))
	}
	r.emit(Event{Schedule: s.Name, Outcome: OutcomeEnqueued, Manual: true})
	if err := r.eng.RecordManual(ctx, engine.Commit{Name: s.Name, Recs: []engine.Rec{rec},
		Counts: map[string]int64{counterManual: 1, counterLastEnqueue: at}}); err != nil {
		r.log.Warn("manual occurrence enqueued but not recorded in history", "id", occ.ID, "err", err)
	}
}

// useEngine takes Options.Engine, configured for this runtime when it asks
// to be (engine.Configurable), or none: scheduling disabled.
func (r *Runtime) useEngine(clk clock.Clock) error {
	eng := r.opts.Engine
	if eng == nil {
		r.disabled = "no engine configured (set Options.Engine)"
		return nil
	}
	c, ok := eng.(engine.Configurable)
	if !ok {
		if held := heldConfigurable(reflect.ValueOf(eng), 0); held != nil {
			return fmt.Errorf("Options.Engine: %T holds an engine.Configurable (%s), which New configures only as Options.Engine itself, so it would run unconfigured; pass that engine as Options.Engine, or make %T an engine.Configurable that configures it", eng, held, eng)
		}
	}
	if ok {
		configured, err := c.Configure(engine.Config{Registry: r.reg, Namespace: r.opts.Namespace, Replica: r.opts.Replica, Service: r.identity,
			LeaseTTL: r.opts.LeaseTTL, HistoryLimit: r.opts.HistoryLimit, Limits: historyLimits(r.reg, r.opts.HistoryLimit),
			RecordTTL: recordTTL, Logger: r.log, Clock: clk, MayLead: r.mayLeadInNamespace})
		if err != nil {
			return err
		}
		eng = configured
	}
	// What the engine offers of the optional interfaces (engine.Losses,
	// Starts, Namespaces, Settings, Queues) the core type-asserts where
	// it needs them; the rest stays off.
	r.eng = eng
	r.deliveries, _ = eng.(engine.Deliveries)
	r.eng.Watch(r.noteRedis)
	return nil
}

var (
	engineType       = reflect.TypeFor[engine.Engine]()
	configurableType = reflect.TypeFor[engine.Configurable]()
)

// maxWrapDepth bounds how deep heldConfigurable looks: an engine inside
// an engine, each in a field of the other.
const maxWrapDepth = 8

// heldConfigurable returns the type of an engine.Configurable that the
// engine v holds in a field whose type is an engine, embedded or named,
// through wrappers of wrappers (an engine that instruments another holds
// it so); nil if none. New configures only Options.Engine itself, so one
// held inside another engine would serve unconfigured. Only fields typed
// as engines are read, which their wrapper set when it was built.
func heldConfigurable(v reflect.Value, depth int) reflect.Type {
	if !v.IsValid() || depth > maxWrapDepth {
		return nil
	}
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		if v.IsNil() {
			return nil
		}
	}
	if depth > 0 && v.Kind() != reflect.Interface && v.Type().Implements(configurableType) {
		return v.Type()
	}
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		return heldConfigurable(v.Elem(), depth+1)
	case reflect.Struct:
		for i := range v.NumField() {
			if !v.Type().Field(i).Type.Implements(engineType) {
				continue
			}
			if held := heldConfigurable(v.Field(i), depth+1); held != nil {
				return held
			}
		}
	}
	return nil
}

// redact passes a message that may quote an engine's error through the
// engine's Redact, when it has one (engine.Redactor).
func (r *Runtime) redact(msg string) string {
	if red, ok := r.eng.(engine.Redactor); ok {
		return red.Redact(msg)
	}
	return msg
}

// Provider hands over a *Runtime: a *Runtime itself, or a type that
// embeds one (runtime.Runtime, the Redis entry point). Packages written
// against the core (admin, metrics) take a Provider, so that either
// works.
type Provider interface {
	Core() *Runtime
}

// Core returns r itself, so that a *Runtime is a Provider.
func (r *Runtime) Core() *Runtime { return r }

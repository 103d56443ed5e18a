package registry

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"
	_ "time/tzdata" // zones resolve on hosts without a zoneinfo database
)

// Defaults applied to schedules (by the directive parser and by New).
const (
	// ZoneDefault: schedules run in UTC unless they say otherwise.
	ZoneDefault = "UTC"
	// QueueDefault is asynq's default queue.
	QueueDefault = "default"
	// TimeoutDefault bounds one execution, as asynq's own default does.
	TimeoutDefault = 30 * time.Minute
	// RetryDefault is low on purpose: asynq's default of 25 retries with
	// backoff can re-run last night's job days later.
	RetryDefault = 3
	// GraceDefault is how late a slot may still be enqueued after it came
	// due: long enough to cover a lease takeover after a crash and a
	// rolling deploy, short enough that a stale run is not a surprise.
	GraceDefault = 5 * time.Minute
)

// Overlap says what happens when a slot comes due while the previous
// occurrence of the same schedule is still pending or running.
type Overlap string

const (
	OverlapAllow Overlap = "allow" // enqueue anyway (the default)
	OverlapSkip  Overlap = "skip"  // record the slot as skipped
)

// Misfire says what happens to slots older than the grace window (after an
// outage longer than grace).
type Misfire string

const (
	MisfireSkip   Misfire = "skip"   // record them as missed (the default; no backfill)
	MisfireLatest Misfire = "latest" // run the newest one, record the rest as missed
)

// Schedule is one declared schedule. Generated code fills every field; New
// fills zero fields with the defaults above and validates the rest.
type Schedule struct {
	Name     string        // task type; unique in the registry
	Expr     string        // cron expression
	Zone     string        // IANA zone the expression is evaluated in
	Queue    string        // asynq queue
	Timeout  time.Duration // per execution
	MaxRetry int           // asynq retries after a failure; 0 means none
	Grace    time.Duration // how late a slot may still be enqueued
	Overlap  Overlap
	Misfire  Misfire
	// Phase shifts the slots of an @every expression: "@every 1h" with
	// Phase 17*time.Minute fires at 00:17, 01:17, ...
	Phase   time.Duration
	Handler HandlerFunc
	// Source is where the schedule is declared ("jobs/prune.go:12"), for
	// diagnostics and the admin page. Optional.
	Source string

	cron *Cron
}

// Cron returns the parsed expression. It is nil until the schedule has been
// through New.
func (s *Schedule) Cron() *Cron { return s.cron }

// Location returns the schedule's zone.
func (s *Schedule) Location() *time.Location { return s.cron.Location() }

// Next returns the schedule's first fire time strictly after t.
func (s *Schedule) Next(t time.Time) time.Time { return s.cron.Next(t) }

// Occurrence returns the scheduled occurrence for slot.
func (s *Schedule) Occurrence(slot time.Time) Occurrence {
	return Occurrence{
		Schedule: s.Name,
		Slot:     slot.In(s.cron.Location()),
		Zone:     s.Zone,
		ID:       OccurrenceID(s.Name, slot),
	}
}

var (
	nameRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)
	queueRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)
)

// LoadZone loads an IANA zone, refusing "Local" and "" whose meaning
// depends on the host: replicas on differently configured hosts would
// compute different slots.
func LoadZone(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("zone %q depends on the host; name an IANA zone such as tz=UTC or tz=Europe/Berlin", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown zone %q; want an IANA name such as tz=UTC or tz=America/New_York", name)
	}
	return loc, nil
}

func (s *Schedule) normalize() error {
	s.Zone = cmp.Or(s.Zone, ZoneDefault)
	s.Queue = cmp.Or(s.Queue, QueueDefault)
	s.Timeout = cmp.Or(s.Timeout, TimeoutDefault)
	s.Grace = cmp.Or(s.Grace, GraceDefault)
	s.Overlap = cmp.Or(s.Overlap, OverlapAllow)
	s.Misfire = cmp.Or(s.Misfire, MisfireSkip)
	switch {
	case !nameRE.MatchString(s.Name):
		return fmt.Errorf("schedule name %q: want letters, digits, '.', '_' or '-', at most 100, e.g. name=prune-soft-deleted", s.Name)
	case !queueRE.MatchString(s.Queue):
		return fmt.Errorf("schedule %s: queue %q: want letters, digits, '.', '_' or '-', e.g. queue=maintenance", s.Name, s.Queue)
	case s.Timeout < time.Second:
		return fmt.Errorf("schedule %s: Timeout must be at least 1s; got %s", s.Name, s.Timeout)
	case s.Grace < time.Second:
		return fmt.Errorf("schedule %s: Grace must be at least 1s; got %s", s.Name, s.Grace)
	case s.MaxRetry < 0:
		return fmt.Errorf("schedule %s: MaxRetry must be 0 or more; got %d", s.Name, s.MaxRetry)
	case s.Overlap != OverlapAllow && s.Overlap != OverlapSkip:
		return fmt.Errorf("schedule %s: Overlap must be %q or %q; got %q", s.Name, OverlapAllow, OverlapSkip, s.Overlap)
	case s.Misfire != MisfireSkip && s.Misfire != MisfireLatest:
		return fmt.Errorf("schedule %s: Misfire must be %q or %q; got %q", s.Name, MisfireSkip, MisfireLatest, s.Misfire)
	case s.Handler == nil:
		return fmt.Errorf("schedule %s: Handler is nil", s.Name)
	}
	loc, err := LoadZone(s.Zone)
	if err != nil {
		return fmt.Errorf("schedule %s: %w", s.Name, err)
	}
	if s.cron, err = ParseCron(s.Expr, loc, WithName(s.Name), WithPhase(s.Phase)); err != nil {
		return fmt.Errorf("schedule %s: expression %q: %w", s.Name, s.Expr, err)
	}
	return nil
}

// Registry is the set of schedules of a service, usually built by the code
// crongen generates.
type Registry struct {
	schedules []*Schedule // sorted by name
	byName    map[string]*Schedule
}

// New validates schedules, fills defaults and returns them as a Registry.
// Names must be unique.
func New(schedules ...Schedule) (*Registry, error) {
	r := &Registry{byName: make(map[string]*Schedule, len(schedules))}
	var errs []error
	for i := range schedules {
		s := schedules[i]
		if err := s.normalize(); err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := r.byName[s.Name]; dup {
			errs = append(errs, fmt.Errorf("schedule name %q is declared twice (%s and %s); names must be unique, set name= on one", s.Name, cmp.Or(prev.Source, "?"), cmp.Or(s.Source, "?")))
			continue
		}
		r.byName[s.Name] = &s
		r.schedules = append(r.schedules, &s)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortFunc(r.schedules, func(a, b *Schedule) int { return cmp.Compare(a.Name, b.Name) })
	return r, nil
}

// MustNew is New for generated code, whose schedules crongen has already
// validated; it panics on an invalid schedule.
func MustNew(schedules ...Schedule) *Registry {
	r, err := New(schedules...)
	if err != nil {
		panic("registry: " + err.Error())
	}
	return r
}

// Schedules returns the schedules sorted by name. The slice is shared: do
// not modify it.
func (r *Registry) Schedules() []*Schedule { return r.schedules }

// Lookup returns the schedule called name.
func (r *Registry) Lookup(name string) (*Schedule, bool) {
	s, ok := r.byName[name]
	return s, ok
}

// Len returns the number of schedules.
func (r *Registry) Len() int { return len(r.schedules) }

package registry

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	// OverlapBufferOne keeps one slot waiting behind the running
	// occurrence, enqueued once it ends; slots that come due while one
	// waits are recorded skipped.
	OverlapBufferOne Overlap = "buffer_one"
	// OverlapReplace cancels the running occurrence (its handler's ctx is
	// cancelled, and it is recorded replaced) and enqueues the new one.
	OverlapReplace Overlap = "replace"
)

// Resume says which occurrence takes up the unfinished work of a
// checkpointed handler (runtime/checkpoint).
type Resume string

const (
	// ResumeNext: the next occurrence first finishes what its previous
	// occurrence left (a timeout it did not continue from, a last attempt
	// that failed), then does its own. Without it, only the occurrence's
	// own retries and continuations resume its work.
	ResumeNext Resume = "next"
)

// Misfire says what happens to slots older than the grace window (after an
// outage longer than grace).
type Misfire string

const (
	MisfireSkip   Misfire = "skip"   // record them as missed (the default; no backfill)
	MisfireLatest Misfire = "latest" // run the newest one, record the rest as missed
	// MisfireAll runs every missed slot, oldest first, up to MisfireAllCap
	// of them (the newest); older ones are recorded as missed. For work
	// that must happen once per period, such as billing.
	MisfireAll Misfire = "all"
)

// MisfireAllCap bounds the missed slots misfire=all runs after one outage,
// so a schedule that was down for months does not flood its queue.
const MisfireAllCap = 100

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
	// Resume is ResumeNext for resume=next, "" otherwise.
	Resume Resume
	// Phase shifts the slots of an @every expression: "@every 1h" with
	// Phase 17*time.Minute fires at 00:17, 01:17, ...
	Phase time.Duration
	// Per makes the schedule a family: one declared kind of work whose
	// members (per=tenant: each tenant) are data, each with its own zone
	// and optionally its own expression (see ForMember). Zone and Expr are
	// then the members' defaults. Empty for an ordinary schedule.
	Per     string
	Handler HandlerFunc
	// Source is where the schedule is declared ("jobs/prune.go:12"), for
	// diagnostics and the admin page. Optional.
	Source string
	// Package is the import path of the package that declares the schedule
	// (crongen fills it). It tells one service's registry from another's:
	// the runtime's default namespace is named after it. Optional.
	Package string

	cron *Cron
}

// Cron returns the parsed expression. It is nil until the schedule has been
// through New.
func (s *Schedule) Cron() *Cron { return s.cron }

// Location returns the schedule's zone.
func (s *Schedule) Location() *time.Location { return s.cron.Location() }

// Next returns the schedule's first fire time strictly after t.
func (s *Schedule) Next(t time.Time) time.Time { return s.cron.Next(t) }

// Occurrence returns the scheduled occurrence for slot of the runtime whose
// namespace is given ("" outside a runtime).
func (s *Schedule) Occurrence(namespace string, slot time.Time) Occurrence {
	return Occurrence{
		Schedule: s.Name,
		Slot:     slot.In(s.cron.Location()),
		Zone:     s.Zone,
		ID:       Scope{Namespace: namespace, Schedule: s.Name}.ID(slot),
	}
}

// Family reports whether the schedule is a family (declared with per=).
func (s *Schedule) Family() bool { return s.Per != "" }

// ForMember returns the schedule a family member follows: the family's,
// evaluated in zone and by expr, where an empty zone or expr means the
// family's own. A bad zone or expression is an error in the words crongen
// uses for a bad tz= or expression, so an API can answer with them. The
// result shares the family's name, handler and settings; its H values are
// the family's (hashed from the family's name), so members that give the
// same expression in the same zone have the same slots. A phase= applies
// to members that keep the family's expression.
func (s *Schedule) ForMember(zone, expr string) (*Schedule, error) {
	m := *s
	loc := s.cron.Location()
	if zone != "" && zone != s.Zone {
		var err error
		if loc, err = LoadZone(zone); err != nil {
			return nil, fmt.Errorf("bad value %q for tz: %v", zone, err)
		}
		m.Zone = zone
	}
	switch {
	case expr == "" || expr == s.Expr:
		m.cron = s.cron.In(loc)
	default:
		c, err := ParseCron(expr, loc, WithName(s.Name))
		if err != nil {
			msg := err.Error()
			var ee *ExprError
			if errors.As(err, &ee) {
				msg = ee.Msg
			}
			return nil, fmt.Errorf("bad cron expression %q: %s", expr, msg)
		}
		m.Expr, m.Phase, m.cron = expr, 0, c
	}
	return &m, nil
}

// perRE is the alphabet of per=: a lowercase word naming what a member is.
var perRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)

// CheckPer reports whether per can name a family's members (per=tenant):
// a lowercase word of at most 40 letters, digits or '_'.
func CheckPer(per string) error {
	if !perRE.MatchString(per) {
		return fmt.Errorf("want a lowercase word naming what each member is, at most 40 letters, digits or '_'; e.g. per=tenant")
	}
	return nil
}

// Field checks. The directive parser and New check each field with the same
// function, so a value one accepts the other accepts, in the same words.
// Each message ends with a valid example.

// nameRE is asynq's task-type alphabet, ':' included for its
// category:action convention.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$`)

// reservedNameSegments are the markers of the occurrence IDs that are not a
// plain "cron:<name>:<slot>": a name with such a segment could spell another
// name's ID ("a:manual" at slot 5 would be "a"'s manual run with request 5).
var reservedNameSegments = []string{"manual", "rerun", "member"}

// CheckName reports whether name can be a schedule's name (its asynq task
// type): 1 to 100 letters, digits, '.', '_', '-' or ':', starting with a
// letter or digit, with no empty ':'-separated segment and none of the
// segments the occurrence IDs reserve.
func CheckName(name string) error {
	const example = "e.g. name=prune-soft-deleted or name=reports:weekly"
	if !nameRE.MatchString(name) {
		return fmt.Errorf("want 1-100 letters, digits, '.', '_', '-' or ':', starting with a letter or digit; %s", example)
	}
	for seg := range strings.SplitSeq(name, ":") {
		switch {
		case seg == "":
			return fmt.Errorf("want no empty segment around ':'; %s", example)
		case slices.Contains(reservedNameSegments, seg):
			return fmt.Errorf("the segment %q is reserved for occurrence IDs (%s); %s", seg, strings.Join(reservedNameSegments, ", "), example)
		}
	}
	return nil
}

// memberRE is the alphabet of a family member's key: no ':' and no '/',
// which end the name and the namespace in an occurrence ID.
var memberRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$`)

// CheckMember reports whether member can be a family member's key: 1 to
// 128 letters, digits, '.', '_', '@' or '-', starting with a letter or
// digit (a tenant's slug or ID, an email-like "team@acme").
func CheckMember(member string) error {
	if !memberRE.MatchString(member) {
		return fmt.Errorf("want 1-128 letters, digits, '.', '_', '@' or '-', starting with a letter or digit; e.g. acme or tenant-42")
	}
	return nil
}

// queueRE is the alphabet of asynq queue names belfry accepts.
var queueRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

func checkQueue(queue string) error {
	if !queueRE.MatchString(queue) {
		return fmt.Errorf("want 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit; e.g. queue=maintenance")
	}
	return nil
}

// minDuration is the least timeout and grace: slots are whole seconds.
const minDuration = time.Second

// Valid values of the duration keys, for their messages.
const (
	timeoutExample = "timeout=20m"
	graceExample   = "grace=10m"
)

// checkDuration checks a timeout or grace, whose valid example is example.
func checkDuration(d time.Duration, example string) error {
	if d < minDuration {
		return fmt.Errorf("want a Go duration of at least %s; e.g. %s", minDuration, example)
	}
	return nil
}

// maxRetry bounds retry=: a larger number is a typo, not a policy.
const maxRetry = 1000

func checkRetry(n int) error {
	if n < 0 || n > maxRetry {
		return fmt.Errorf("want a whole number of retries from 0 to %d; e.g. retry=3", maxRetry)
	}
	return nil
}

func checkOverlap(o Overlap) error {
	switch o {
	case OverlapAllow, OverlapSkip, OverlapBufferOne, OverlapReplace:
		return nil
	}
	return fmt.Errorf("want %s, %s, %s or %s; e.g. overlap=skip", OverlapAllow, OverlapSkip, OverlapBufferOne, OverlapReplace)
}

// checkFamilyOverlap refuses buffer_one and replace for a family: the
// slot one keeps waiting and the occurrence the other cancels are a
// schedule's, kept with its cursor, and a member's cursor has no room for
// them.
func checkFamilyOverlap(o Overlap) error {
	if o == OverlapBufferOne || o == OverlapReplace {
		return fmt.Errorf("overlap=%s is not offered for a family (per=); use overlap=skip or overlap=allow", o)
	}
	return nil
}

func checkPerIfSet(per string) error {
	if per == "" {
		return nil
	}
	return CheckPer(per)
}

// checkFamilyMisfire refuses misfire=all for a family. Its catch-up
// enqueues up to MisfireAllCap slots per member after an outage, and a
// member's cursor is only committed after its enqueues: a holder that
// crashed between the two would leave the next one to enqueue the same old
// slots again once their tasks' IDs were freed, which only keeping a
// hundred finished tasks per member would prevent.
func checkFamilyMisfire(m Misfire) error {
	if m == MisfireAll {
		return fmt.Errorf("misfire=all is not offered for a family (per=): its members catch up to %d slots each; use misfire=latest or misfire=skip", MisfireAllCap)
	}
	return nil
}

func checkMisfire(m Misfire) error {
	if m != MisfireSkip && m != MisfireLatest && m != MisfireAll {
		return fmt.Errorf("want %s, %s or %s; e.g. misfire=latest", MisfireSkip, MisfireLatest, MisfireAll)
	}
	return nil
}

func checkResumeIfSet(r Resume) error {
	if r != "" && r != ResumeNext {
		return fmt.Errorf("want %s; e.g. resume=next", ResumeNext)
	}
	return nil
}

// zones caches loaded zones by name. time.LoadLocation reads and parses the
// zone's data on every call and returns a new copy: 100,000 schedules in
// one zone would hold 100,000 copies, each larger than the 0.5 kB a
// schedule may cost the process (rss_kb_per_sched in BENCHMARKS.md). Only
// zones that loaded are kept, so bad names cannot grow the cache.
var zones sync.Map // name -> *time.Location

// LoadZone loads an IANA zone, refusing "Local" and "" whose meaning
// depends on the host: replicas on differently configured hosts would
// compute different slots. Each name is loaded once per process; every
// caller gets the same *time.Location.
func LoadZone(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("zone %q depends on the host; name an IANA zone such as tz=UTC or tz=Europe/Berlin", name)
	}
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown zone %q%s; want an IANA name such as tz=UTC or tz=America/New_York", name, didYouMean(SuggestZone(name)))
	}
	cached, _ := zones.LoadOrStore(name, loc)
	return cached.(*time.Location), nil
}

// parsedExprs shares one parse among the schedules of a registry that
// give the same expression in the same zone with the same phase: a Cron is
// immutable, and 100,000 schedules commonly hold a few thousand distinct
// expressions. A parse whose H fields took values from the schedule's name
// differs by name and is not shared.
type parsedExprs map[parsedExpr]*Cron

type parsedExpr struct {
	expr, zone string
	phase      time.Duration
}

// parse returns s's parsed expression, the one already made for the same
// expression, zone and phase when there is one.
func (p parsedExprs) parse(s *Schedule, loc *time.Location) (*Cron, error) {
	key := parsedExpr{expr: s.Expr, zone: s.Zone, phase: s.Phase}
	if c, ok := p[key]; ok {
		return c, nil
	}
	cfg := cronConfig{name: s.Name, phase: s.Phase}
	c, err := parseCron(s.Expr, loc, &cfg)
	if err == nil && !cfg.hashed {
		p[key] = c
	}
	return c, err
}

func (s *Schedule) normalize(parsed parsedExprs) error {
	s.Zone = cmp.Or(s.Zone, ZoneDefault)
	s.Queue = cmp.Or(s.Queue, QueueDefault)
	s.Timeout = cmp.Or(s.Timeout, TimeoutDefault)
	s.Grace = cmp.Or(s.Grace, GraceDefault)
	s.Overlap = cmp.Or(s.Overlap, OverlapAllow)
	s.Misfire = cmp.Or(s.Misfire, MisfireSkip)
	if err := CheckName(s.Name); err != nil {
		return fmt.Errorf("schedule name %q: %w", s.Name, err)
	}
	if s.Per != "" {
		if err := checkFamilyMisfire(s.Misfire); err != nil {
			return fmt.Errorf("schedule %s: misfire %q: %w", s.Name, s.Misfire, err)
		}
		if err := checkFamilyOverlap(s.Overlap); err != nil {
			return fmt.Errorf("schedule %s: overlap %q: %w", s.Name, s.Overlap, err)
		}
	}
	if s.Handler == nil {
		return fmt.Errorf("schedule %s: Handler is nil", s.Name)
	}
	for _, c := range []struct {
		field string
		err   error
	}{
		{fmt.Sprintf("queue %q", s.Queue), checkQueue(s.Queue)},
		{"timeout " + s.Timeout.String(), checkDuration(s.Timeout, timeoutExample)},
		{"grace " + s.Grace.String(), checkDuration(s.Grace, graceExample)},
		{"retry " + strconv.Itoa(s.MaxRetry), checkRetry(s.MaxRetry)},
		{fmt.Sprintf("overlap %q", s.Overlap), checkOverlap(s.Overlap)},
		{fmt.Sprintf("misfire %q", s.Misfire), checkMisfire(s.Misfire)},
		{fmt.Sprintf("resume %q", s.Resume), checkResumeIfSet(s.Resume)},
		{fmt.Sprintf("per %q", s.Per), checkPerIfSet(s.Per)},
	} {
		if c.err != nil {
			return fmt.Errorf("schedule %s: %s: %w", s.Name, c.field, c.err)
		}
	}
	loc, err := LoadZone(s.Zone)
	if err != nil {
		return fmt.Errorf("schedule %s: %w", s.Name, err)
	}
	if s.cron, err = parsed.parse(s, loc); err != nil {
		return fmt.Errorf("schedule %s: expression %q: %w", s.Name, s.Expr, err)
	}
	return nil
}

// Registry is the set of schedules of a service, usually built by the code
// crongen generates.
type Registry struct {
	// schedules are sorted by name, which Lookup searches: a name index
	// beside them would be a map entry a schedule, memory the per-schedule
	// budget (rss_kb_per_sched in BENCHMARKS.md) need not spend.
	schedules []*Schedule
	// packages are the schedules' distinct Package paths in the order
	// they were first given (New's arguments, Merge's registries).
	packages []string
}

// New validates schedules, fills defaults and returns them as a Registry.
// Names must be unique.
func New(schedules ...Schedule) (*Registry, error) {
	// One array holds the registry's copies of the schedules: the
	// registry keeps them all as long as it lives.
	copies := slices.Clone(schedules)
	r := &Registry{schedules: make([]*Schedule, 0, len(schedules))}
	seen := make(map[string]*Schedule, len(schedules))
	parsed := parsedExprs{}
	var errs []error
	for i := range copies {
		s := &copies[i]
		if err := s.normalize(parsed); err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := seen[s.Name]; dup {
			errs = append(errs, fmt.Errorf("schedule name %q is declared twice (%s and %s); names must be unique, set name= on one", s.Name, cmp.Or(prev.Source, "?"), cmp.Or(s.Source, "?")))
			continue
		}
		seen[s.Name] = s
		r.add(s)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	r.sort()
	return r, nil
}

// Packages returns the import paths of the packages that declare the
// schedules, in the order they were given: a generated registry's own
// package, or for Merge each registry's in turn. Schedules built without
// a Package add none. The slice is shared: do not modify it.
func (r *Registry) Packages() []string { return r.packages }

// Merge returns one registry holding the schedules of regs, for a service
// whose jobs live in several packages (each with its own generated
// Registry or NewRegistry). A name in more than one of them is an error
// naming where each is declared: asynq routes a task by its name, so two
// handlers under one name would each get the other's occurrences.
func Merge(regs ...*Registry) (*Registry, error) {
	n := 0
	for _, reg := range regs {
		n += reg.Len()
	}
	r := &Registry{schedules: make([]*Schedule, 0, n)}
	copies := make([]Schedule, 0, n) // never grows past n, so the pointers into it hold
	type first struct {
		s   *Schedule
		reg int // index in regs
	}
	seen := make(map[string]first, n)
	var errs []error
	for i, reg := range regs {
		for _, s := range reg.Schedules() {
			if prev, dup := seen[s.Name]; dup {
				errs = append(errs, fmt.Errorf("schedule name %q is in registries %d and %d (declared at %s and %s); names must be unique across the service, set name= on one",
					s.Name, prev.reg+1, i+1, cmp.Or(prev.s.Source, "?"), cmp.Or(s.Source, "?")))
				continue
			}
			copies = append(copies, *s)
			copied := &copies[len(copies)-1]
			seen[s.Name] = first{s: copied, reg: i}
			r.add(copied)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	r.sort()
	return r, nil
}

func (r *Registry) add(s *Schedule) {
	r.schedules = append(r.schedules, s)
	if s.Package != "" && !slices.Contains(r.packages, s.Package) {
		r.packages = append(r.packages, s.Package)
	}
}

func (r *Registry) sort() {
	slices.SortFunc(r.schedules, func(a, b *Schedule) int { return cmp.Compare(a.Name, b.Name) })
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
	i, ok := slices.BinarySearchFunc(r.schedules, name, func(s *Schedule, name string) int { return strings.Compare(s.Name, name) })
	if !ok {
		return nil, false
	}
	return r.schedules[i], true
}

// Len returns the number of schedules.
func (r *Registry) Len() int { return len(r.schedules) }

// FormatDuration writes d as a directive would: without zero units, 1h,
// 1h30m, 90s, 30m rather than 1h0m0s or 30m0s.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Package metrics exports a belfry runtime's state as Prometheus metrics.
// It is written only against package runtime's public API and kept apart
// from it, so a service that does not use Prometheus does not link it.
//
// Two kinds of series, aggregated differently:
//
//   - Counters and histograms count what this replica did: the slots its
//     scheduler enqueued, missed, skipped, buffered or recorded paused
//     while it led, the occurrences it replaced,
//     the manual occurrences enqueued through it, and the attempts its
//     workers ran, with their durations and the fire lag of its enqueues.
//     Each event is counted by exactly one replica, so sum() across
//     replicas is the cluster's total.
//   - Gauges describe the cluster as the shared ledger shows it (late,
//     failing, paused, last success and failure, next run) and are the same
//     on every replica: aggregate them with max(), never sum().
//
// Every series exists from start-up, at zero where nothing happened yet.
// Timestamps of things that never happened are 0. While the ledger cannot be
// read (Redis down: belfry_redis_up 0; or too slow for the scrape:
// belfry_redis_slow 1), the gauges it would give are left out of the scrape
// rather than reported as zeros. A scrape reads no schedule's history: the
// statuses (see runtime.Statuses) and three counters a schedule.
//
// # Many schedules
//
// Up to Options.PerScheduleLimit schedules (DefaultPerScheduleLimit,
// 1,000) every per-schedule series exists for every schedule, as above.
// Past it a scrape would write ~43 series a schedule (4.3 million at
// 100,000), more than a scrape can encode in a second and more than an
// operator wants in Prometheus, so the series are bounded; every metric
// name and label set stays, and nothing is dropped unsaid:
//
//   - the counters and histograms count every schedule together, under
//     schedule="*" (AllSchedules): decided once, by the registry's size;
//   - belfry_schedule_late, _failing, _paused and _misrouted name only the
//     schedules where they are 1, which are the ones the alerts look for,
//     and write schedule="*" 0 for all the others;
//   - the time gauges are written for those same schedules, and once under
//     schedule="*": the soonest next run, the newest enqueue, success and
//     failure of any schedule;
//   - belfry_schedules{status} counts the schedules of each status (also
//     below the limit).
//
// The rest of every schedule (its counters, times and history) is in the
// admin's JSON API (api/schedules, api/schedules/{name}).
package metrics

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/belfry/belfry/runtime/core"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readTimeout bounds the Redis reads of one scrape, so a Redis outage
// makes a scrape report redis_up 0, and a slow Redis redis_slow 1, not
// hang.
const readTimeout = 2 * time.Second

// manualOutcome labels occurrences an operator asked for in
// belfry_schedule_occurrences_total.
const manualOutcome = "manual"

// Outcomes of each counter, created at zero for every schedule.
var (
	scheduledOutcomes = []string{string(core.OutcomeEnqueued), string(core.OutcomeMissed),
		string(core.OutcomeSkipped), string(core.OutcomePaused), manualOutcome, string(core.OutcomeBuffered),
		string(core.OutcomeReplaced)}
	attemptOutcomes = []string{string(core.OutcomeSucceeded), string(core.OutcomeRetrying), string(core.OutcomeFailed),
		string(core.OutcomeContinued)}
)

// DefaultPerScheduleLimit is the registry size up to which every
// schedule has every per-schedule series.
const DefaultPerScheduleLimit = 1000

// AllSchedules is the schedule label of the series that count or
// summarise every schedule together, past the per-schedule limit.
const AllSchedules = "*"

// Options configure a collector.
type Options struct {
	// PerScheduleLimit is how many schedules get every per-schedule series;
	// past it the series are bounded (see the package doc). 0 means
	// DefaultPerScheduleLimit; negative means no limit.
	PerScheduleLimit int
}

func (o Options) limit() int {
	if o.PerScheduleLimit == 0 {
		return DefaultPerScheduleLimit
	}
	return o.PerScheduleLimit
}

// over says whether n schedules are past the limit.
func (o Options) over(n int) bool {
	return o.limit() >= 0 && n > o.limit()
}

// What the HELP texts say of the series past the per-schedule limit.
const (
	flagHelp    = " Past the per-schedule limit only the schedules at 1 are written, and schedule=\"*\" 0 for all the rest; belfry_schedules counts them."
	timesHelp   = " Past the per-schedule limit only for the late, failing, paused and misrouted schedules, and schedule=\"*\": the newest of all; the rest are in the admin JSON."
	countedHelp = " Past the per-schedule limit every schedule's under schedule=\"*\"; per schedule in the admin JSON."
)

// statusLabels are the statuses belfry_schedules counts, each from
// start-up.
var statusLabels = []core.Status{core.StatusOK, core.StatusLate, core.StatusFailing, core.StatusRunning,
	core.StatusPaused, core.StatusDisabled, core.StatusUnknown}

type collector struct {
	rt   *core.Runtime
	opts Options
	// aggregated is true when the counters and histograms count every
	// schedule under AllSchedules.
	aggregated bool
	schedules  *prometheus.Desc

	occurrences, attempts *prometheus.CounterVec
	lostWrites            prometheus.Counter
	duration, lag         *prometheus.HistogramVec

	next, lastEnqueue, lastSuccess, lastFailure *prometheus.Desc
	late, failing, paused                       *prometheus.Desc
	leader, redisUp, redisSlow, redisUnsafe     *prometheus.Desc
	disabled                                    *prometheus.Desc
	duplicateReplica, clockSkew                 *prometheus.Desc
	// What tells two services on one Redis apart (see the runtime's
	// RedisDiagnostics.NamespaceContention, LegacyNamespace and Misrouted).
	namespaceContended, legacyNamespace, misrouted *prometheus.Desc
}

// NewCollector returns a Prometheus collector of rt's metrics, to register
// in the host's registry. It observes rt from now on; make one per runtime.
func NewCollector(rt core.Provider) prometheus.Collector {
	return NewCollectorWith(rt, Options{})
}

// NewCollectorWith is NewCollector with options.
func NewCollectorWith(p core.Provider, opts Options) prometheus.Collector {
	rt := p.Core()
	schedule := []string{"schedule"}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	c := &collector{
		rt: rt, opts: opts,
		aggregated: opts.over(len(rt.Registry().Schedules())),
		schedules:  desc("belfry_schedules", "How many schedules have each status (ok, late, failing, running, paused, disabled, unknown). Aggregate with max.", "status"),
		occurrences: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "belfry_schedule_occurrences_total",
			Help: "Slots this replica's scheduler handled, by outcome (enqueued, missed, skipped, paused, buffered by overlap=buffer_one, occurrences replaced by overlap=replace), and manual occurrences enqueued through it. Sum across replicas." + countedHelp},
			[]string{"schedule", "outcome"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "belfry_schedule_attempts_total",
			Help: "Attempts this replica's workers finished, by outcome (succeeded, retrying: failed with retries left, failed: the last attempt, continued: a checkpointed handler stopped between batches before its timeout or at a shutdown, to go on in a new attempt). Sum across replicas." + countedHelp},
			[]string{"schedule", "outcome"}),
		lostWrites: prometheus.NewCounter(prometheus.CounterOpts{Name: "belfry_lost_writes_total",
			Help: "Losses of Redis data this replica detected when it gained the lease (the store's epoch gone, or the fencing token gone back). Sum across replicas."}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "belfry_schedule_attempt_duration_seconds",
			Help:    "How long this replica's attempts ran." + countedHelp,
			Buckets: []float64{.01, .05, .25, 1, 5, 15, 60, 300, 900, 3600}}, schedule),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "belfry_schedule_fire_lag_seconds",
			Help:    "How long after its slot this replica's scheduler enqueued an occurrence." + countedHelp,
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 60}}, schedule),
		next:             desc("belfry_schedule_next_run_timestamp_seconds", "When the schedule fires next. Past the per-schedule limit only for the late, failing, paused and misrouted schedules, and schedule=\"*\": the soonest of all; the rest are in the admin JSON.", schedule...),
		lastEnqueue:      desc("belfry_schedule_last_enqueue_timestamp_seconds", "When an occurrence of the schedule was last enqueued; 0 if never. Aggregate with max."+timesHelp, schedule...),
		lastSuccess:      desc("belfry_schedule_last_success_timestamp_seconds", "When an occurrence of the schedule last succeeded; 0 if never. Aggregate with max."+timesHelp, schedule...),
		lastFailure:      desc("belfry_schedule_last_failure_timestamp_seconds", "When an attempt of the schedule last failed; 0 if never. Aggregate with max."+timesHelp, schedule...),
		late:             desc("belfry_schedule_late", "1 when the newest due slot has no success within grace plus timeout. Aggregate with max."+flagHelp, schedule...),
		failing:          desc("belfry_schedule_failing", "1 when the newest finished occurrence failed. Aggregate with max."+flagHelp, schedule...),
		paused:           desc("belfry_schedule_paused", "1 while an operator has the schedule paused. Aggregate with max."+flagHelp, schedule...),
		leader:           desc("belfry_leader", "1 when this replica holds the scheduler lease.", "replica"),
		redisUp:          desc("belfry_redis_up", "1 when this replica's last Redis call succeeded, or was only slow."),
		redisSlow:        desc("belfry_redis_slow", "1 when a read of this scrape did not answer in time: the series it would give are left out."),
		redisUnsafe:      desc("belfry_redis_unsafe", "1 when this replica will not lead on its Redis: it evicts keys (maxmemory-policy is not noeviction), is older than 6.2, or is a Redis Cluster reached without a cluster client (a configuration error)."),
		disabled:         desc("belfry_scheduler_disabled", "1 when no Redis is configured, so nothing is ever scheduled."),
		clockSkew:        desc("belfry_clock_skew_seconds", "This replica's clock minus Redis's, as last measured; a replica off by more than SkewMargin does not lead.", "replica"),
		duplicateReplica: desc("belfry_replica_name_duplicate", "1 when another process heartbeats under this replica's name on the same namespace.", "replica"),
	}
	c.namespaceContended = desc("belfry_namespace_contended", "1 when a replica of another registry (another service) beats in this replica's namespace; only the namespace's owner leads.", "replica")
	c.legacyNamespace = desc("belfry_namespace_legacy_in_use", "1 when a live leader in the old default namespace \"belfry\" schedules this registry's schedules, so both run every slot.", "replica")
	c.misrouted = desc("belfry_schedule_misrouted", "1 while workers of the schedule's queue recently bounced its occurrences: they lack its handler, or are another service's with a schedule of the same name. Past the per-schedule limit only the schedules at 1 are written.", schedule...)
	names := []string{AllSchedules}
	if !c.aggregated {
		names = names[:0]
		for _, s := range rt.Registry().Schedules() {
			names = append(names, s.Name)
		}
	}
	for _, name := range names {
		for _, o := range scheduledOutcomes {
			c.occurrences.WithLabelValues(name, o)
		}
		for _, o := range attemptOutcomes {
			c.attempts.WithLabelValues(name, o)
		}
		c.duration.WithLabelValues(name)
		c.lag.WithLabelValues(name)
	}
	rt.Observe(c.observe)
	return c
}

// label is the schedule label an event of schedule counts under.
func (c *collector) label(schedule string) string {
	if c.aggregated {
		return AllSchedules
	}
	return schedule
}

// observe counts one of the replica's events.
func (c *collector) observe(e core.Event) {
	name := c.label(e.Schedule)
	switch e.Outcome {
	case core.OutcomeLost:
		c.lostWrites.Inc()
	case core.OutcomeSucceeded, core.OutcomeRetrying, core.OutcomeFailed, core.OutcomeContinued:
		c.attempts.WithLabelValues(name, string(e.Outcome)).Inc()
		c.duration.WithLabelValues(name).Observe(e.Duration.Seconds())
	case core.OutcomeEnqueued:
		if e.Manual {
			c.occurrences.WithLabelValues(name, manualOutcome).Inc()
			return
		}
		c.occurrences.WithLabelValues(name, string(e.Outcome)).Inc()
		c.lag.WithLabelValues(name).Observe(e.Lag.Seconds())
	default:
		c.occurrences.WithLabelValues(name, string(e.Outcome)).Add(float64(e.Slots))
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	c.occurrences.Describe(ch)
	c.attempts.Describe(ch)
	c.lostWrites.Describe(ch)
	c.duration.Describe(ch)
	c.lag.Describe(ch)
	for _, d := range []*prometheus.Desc{c.next, c.lastEnqueue, c.lastSuccess, c.lastFailure, c.late, c.failing,
		c.paused, c.leader, c.redisUp, c.redisSlow, c.redisUnsafe, c.disabled, c.duplicateReplica, c.clockSkew,
		c.namespaceContended, c.legacyNamespace, c.misrouted, c.schedules} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.occurrences.Collect(ch)
	c.attempts.Collect(ch)
	c.lostWrites.Collect(ch)
	c.duration.Collect(ch)
	c.lag.Collect(ch)
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	// Three reads side by side, none of them a schedule's history: the
	// statuses, the last times, and the cluster.
	var statuses core.Statuses
	var last []core.LastTimes
	var snap core.Snapshot
	var lastErr error
	var wg sync.WaitGroup
	wg.Go(func() { statuses, _ = c.rt.Monitor().Statuses(ctx) })
	wg.Go(func() { last, lastErr = c.rt.Monitor().LastTimes(ctx) })
	wg.Go(func() { snap, _ = c.rt.Monitor().SnapshotOf(ctx, nil, 0) })
	wg.Wait()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	seconds := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return float64(t.Unix())
	}
	flag := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	// The misrouted reports are one of the snapshot's reads (a hash per
	// queue); while they could not be read the gauge is left out, as the
	// ledger's are.
	misroutedRead := !slices.ContainsFunc(snap.Missing, func(m core.Missing) bool { return m.Part == core.PartMisrouted })
	misrouted := map[string]bool{}
	for _, m := range snap.Misrouted {
		misrouted[m.Schedule] = true
	}
	now := time.Now()
	// Past the limit a schedule is named only where a flag is 1, and the
	// times of every schedule are summarised once under AllSchedules.
	bounded := c.opts.over(len(statuses.Schedules))
	var all core.LastTimes
	var soonest time.Time
	for i, st := range statuses.Schedules {
		name := st.Schedule.Name
		next := st.Schedule.Next(now)
		if bounded {
			if !next.IsZero() && (soonest.IsZero() || next.Before(soonest)) {
				soonest = next
			}
			if lastErr == nil {
				all.Enqueue, all.Success, all.Failure = later(all.Enqueue, last[i].Enqueue), later(all.Success, last[i].Success), later(all.Failure, last[i].Failure)
			}
			if !flagged(st.Status) && !(misroutedRead && misrouted[name]) {
				continue
			}
		}
		if !next.IsZero() {
			gauge(c.next, seconds(next), name)
		}
		// What could not be read has no series, rather than zeros that
		// would read as "never succeeded" and "not late".
		if lastErr == nil {
			gauge(c.lastEnqueue, seconds(last[i].Enqueue), name)
			gauge(c.lastSuccess, seconds(last[i].Success), name)
			gauge(c.lastFailure, seconds(last[i].Failure), name)
		}
		flagGauge := func(d *prometheus.Desc, on bool) {
			if !bounded || on {
				gauge(d, flag(on), name)
			}
		}
		if st.Status != core.StatusUnknown {
			flagGauge(c.late, st.Status == core.StatusLate)
			flagGauge(c.failing, st.Status == core.StatusFailing)
			flagGauge(c.paused, st.Status == core.StatusPaused)
		}
		if misroutedRead {
			flagGauge(c.misrouted, misrouted[name])
		}
	}
	if bounded {
		// Every schedule not named above is at 0: one series says so, and
		// keeps the name when no schedule is at 1; not while some statuses
		// are unknown, which might be 1.
		if statuses.Schedules != nil && statuses.Counts[core.StatusUnknown] == 0 {
			for _, d := range []*prometheus.Desc{c.late, c.failing, c.paused} {
				gauge(d, 0, AllSchedules)
			}
		}
		if misroutedRead {
			gauge(c.misrouted, 0, AllSchedules)
		}
		if !soonest.IsZero() {
			gauge(c.next, seconds(soonest), AllSchedules)
		}
		if lastErr == nil {
			gauge(c.lastEnqueue, seconds(all.Enqueue), AllSchedules)
			gauge(c.lastSuccess, seconds(all.Success), AllSchedules)
			gauge(c.lastFailure, seconds(all.Failure), AllSchedules)
		}
	}
	// While some statuses could not be read, the count of "unknown" says
	// how many.
	if statuses.Schedules != nil {
		for _, s := range statusLabels {
			gauge(c.schedules, float64(statuses.Counts[s]), string(s))
		}
	}
	slow := statuses.Redis == core.RedisSlow || snap.Redis == core.RedisSlow || errors.Is(lastErr, core.ErrRedisSlow)
	gauge(c.redisSlow, flag(slow && snap.Redis != core.RedisDown))
	gauge(c.leader, flag(c.rt.Leadership().Leading()), c.rt.Replica())
	// Slow is reachable: belfry_redis_slow says the rest.
	gauge(c.redisUp, flag(snap.Redis == core.RedisUp || snap.Redis == core.RedisSlow))
	gauge(c.redisUnsafe, flag(snap.RedisUnsafe != ""))
	gauge(c.disabled, flag(snap.Disabled != ""))
	gauge(c.duplicateReplica, flag(snap.DuplicateReplica != ""), c.rt.Replica())
	gauge(c.namespaceContended, flag(snap.NamespaceContention != ""), c.rt.Replica())
	gauge(c.legacyNamespace, flag(snap.LegacyNamespace != ""), c.rt.Replica())
	if skew, ok := c.rt.Diagnostics().ClockSkew(); ok {
		gauge(c.clockSkew, skew.Seconds(), c.rt.Replica())
	}
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// flagged says whether a schedule of status st keeps its own series past
// the per-schedule limit: it is one an alert names.
func flagged(st core.Status) bool {
	return st == core.StatusLate || st == core.StatusFailing || st == core.StatusPaused
}

// Handler serves rt's metrics alone, for mounting at /metrics outside the
// admin's authentication or passing as admin.Options.Metrics.
func Handler(rt core.Provider) http.Handler {
	return HandlerWith(rt, Options{})
}

// HandlerWith is Handler with options.
func HandlerWith(rt core.Provider, opts Options) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollectorWith(rt, opts))
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, req)
	})
}

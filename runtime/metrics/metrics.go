// Package metrics exports a belfry runtime's state as Prometheus metrics.
// It is written only against package runtime's public API and kept apart
// from it, so a service that does not use Prometheus does not link it.
//
// Two kinds of series, aggregated differently:
//
//   - Counters and histograms count what this replica did: the slots its
//     scheduler enqueued, missed, skipped or recorded paused while it led,
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
// read (Redis down: belfry_redis_up 0), the ledger's gauges are left out of
// the scrape rather than reported as zeros.
package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/belfry/belfry/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readTimeout bounds the Redis reads of one scrape, so a Redis outage
// makes a scrape report redis_up 0, not hang.
const readTimeout = 2 * time.Second

// manualOutcome labels occurrences an operator asked for in
// belfry_schedule_occurrences_total.
const manualOutcome = "manual"

// Outcomes of each counter, created at zero for every schedule.
var (
	scheduledOutcomes = []string{string(runtime.OutcomeEnqueued), string(runtime.OutcomeMissed),
		string(runtime.OutcomeSkipped), string(runtime.OutcomePaused), manualOutcome}
	attemptOutcomes = []string{string(runtime.OutcomeSucceeded), string(runtime.OutcomeRetrying), string(runtime.OutcomeFailed)}
)

type collector struct {
	rt *runtime.Runtime

	occurrences, attempts *prometheus.CounterVec
	lostWrites            prometheus.Counter
	duration, lag         *prometheus.HistogramVec

	next, lastEnqueue, lastSuccess, lastFailure *prometheus.Desc
	late, failing, paused                       *prometheus.Desc
	leader, redisUp, redisUnsafe, disabled      *prometheus.Desc
	duplicateReplica, clockSkew                 *prometheus.Desc
	// What tells two services on one Redis apart (see the runtime's
	// NamespaceContention, LegacyNamespace and MisroutedOccurrences).
	namespaceContended, legacyNamespace, misrouted *prometheus.Desc
}

// NewCollector returns a Prometheus collector of rt's metrics, to register
// in the host's registry. It observes rt from now on; make one per runtime.
func NewCollector(rt *runtime.Runtime) prometheus.Collector {
	schedule := []string{"schedule"}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	c := &collector{
		rt: rt,
		occurrences: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "belfry_schedule_occurrences_total",
			Help: "Slots this replica's scheduler handled, by outcome (enqueued, missed, skipped, paused), and manual occurrences enqueued through it. Sum across replicas."},
			[]string{"schedule", "outcome"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "belfry_schedule_attempts_total",
			Help: "Attempts this replica's workers finished, by outcome (succeeded, retrying: failed with retries left, failed: the last attempt). Sum across replicas."},
			[]string{"schedule", "outcome"}),
		lostWrites: prometheus.NewCounter(prometheus.CounterOpts{Name: "belfry_lost_writes_total",
			Help: "Losses of Redis data this replica detected when it gained the lease (the store's epoch gone, or the fencing token gone back). Sum across replicas."}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "belfry_schedule_attempt_duration_seconds",
			Help:    "How long this replica's attempts ran.",
			Buckets: []float64{.01, .05, .25, 1, 5, 15, 60, 300, 900, 3600}}, schedule),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "belfry_schedule_fire_lag_seconds",
			Help:    "How long after its slot this replica's scheduler enqueued an occurrence.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10, 60}}, schedule),
		next:             desc("belfry_schedule_next_run_timestamp_seconds", "When the schedule fires next.", schedule...),
		lastEnqueue:      desc("belfry_schedule_last_enqueue_timestamp_seconds", "When an occurrence of the schedule was last enqueued; 0 if never. Aggregate with max.", schedule...),
		lastSuccess:      desc("belfry_schedule_last_success_timestamp_seconds", "When an occurrence of the schedule last succeeded; 0 if never. Aggregate with max.", schedule...),
		lastFailure:      desc("belfry_schedule_last_failure_timestamp_seconds", "When an attempt of the schedule last failed; 0 if never. Aggregate with max.", schedule...),
		late:             desc("belfry_schedule_late", "1 when the newest due slot has no success within grace plus timeout. Aggregate with max.", schedule...),
		failing:          desc("belfry_schedule_failing", "1 when the newest finished occurrence failed. Aggregate with max.", schedule...),
		paused:           desc("belfry_schedule_paused", "1 while an operator has the schedule paused. Aggregate with max.", schedule...),
		leader:           desc("belfry_leader", "1 when this replica holds the scheduler lease.", "replica"),
		redisUp:          desc("belfry_redis_up", "1 when this replica's last Redis call succeeded."),
		redisUnsafe:      desc("belfry_redis_unsafe", "1 when this replica will not lead on its Redis: it evicts keys (maxmemory-policy is not noeviction) or is older than 6.2."),
		disabled:         desc("belfry_scheduler_disabled", "1 when no Redis is configured, so nothing is ever scheduled."),
		clockSkew:        desc("belfry_clock_skew_seconds", "This replica's clock minus Redis's, as last measured; a replica off by more than SkewMargin does not lead.", "replica"),
		duplicateReplica: desc("belfry_replica_name_duplicate", "1 when another process heartbeats under this replica's name on the same namespace.", "replica"),
	}
	c.namespaceContended = desc("belfry_namespace_contended", "1 when a replica of another registry (another service) beats in this replica's namespace; only the namespace's owner leads.", "replica")
	c.legacyNamespace = desc("belfry_namespace_legacy_in_use", "1 when a live leader in the old default namespace \"belfry\" schedules this registry's schedules, so both run every slot.", "replica")
	c.misrouted = desc("belfry_schedule_misrouted", "1 while workers of the schedule's queue recently bounced its occurrences: they lack its handler, or are another service's with a schedule of the same name.", schedule...)
	for _, s := range rt.Registry().Schedules() {
		for _, o := range scheduledOutcomes {
			c.occurrences.WithLabelValues(s.Name, o)
		}
		for _, o := range attemptOutcomes {
			c.attempts.WithLabelValues(s.Name, o)
		}
		c.duration.WithLabelValues(s.Name)
		c.lag.WithLabelValues(s.Name)
	}
	rt.Observe(c.observe)
	return c
}

// observe counts one of the replica's events.
func (c *collector) observe(e runtime.Event) {
	switch e.Outcome {
	case runtime.OutcomeLost:
		c.lostWrites.Inc()
	case runtime.OutcomeSucceeded, runtime.OutcomeRetrying, runtime.OutcomeFailed:
		c.attempts.WithLabelValues(e.Schedule, string(e.Outcome)).Inc()
		c.duration.WithLabelValues(e.Schedule).Observe(e.Duration.Seconds())
	case runtime.OutcomeEnqueued:
		if e.Manual {
			c.occurrences.WithLabelValues(e.Schedule, manualOutcome).Inc()
			return
		}
		c.occurrences.WithLabelValues(e.Schedule, string(e.Outcome)).Inc()
		c.lag.WithLabelValues(e.Schedule).Observe(e.Lag.Seconds())
	default:
		c.occurrences.WithLabelValues(e.Schedule, string(e.Outcome)).Add(float64(e.Slots))
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	c.occurrences.Describe(ch)
	c.attempts.Describe(ch)
	c.lostWrites.Describe(ch)
	c.duration.Describe(ch)
	c.lag.Describe(ch)
	for _, d := range []*prometheus.Desc{c.next, c.lastEnqueue, c.lastSuccess, c.lastFailure, c.late, c.failing,
		c.paused, c.leader, c.redisUp, c.redisUnsafe, c.disabled, c.duplicateReplica, c.clockSkew,
		c.namespaceContended, c.legacyNamespace, c.misrouted} {
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
	snap, err := c.rt.Snapshot(ctx)
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
	misrouted := map[string]bool{}
	for _, m := range snap.Misrouted {
		misrouted[m.Schedule] = true
	}
	for _, st := range snap.Schedules {
		name, n := st.Schedule.Name, st.Counters
		if !st.Next.IsZero() {
			gauge(c.next, seconds(st.Next), name)
		}
		if err != nil {
			// The ledger could not be read: no series rather than zeros that
			// would read as "never succeeded" and "not late".
			continue
		}
		gauge(c.lastEnqueue, seconds(n.LastEnqueue), name)
		gauge(c.lastSuccess, seconds(n.LastSuccess), name)
		gauge(c.lastFailure, seconds(n.LastFailure), name)
		gauge(c.late, flag(st.Status == runtime.StatusLate), name)
		gauge(c.failing, flag(st.Status == runtime.StatusFailing), name)
		gauge(c.paused, flag(st.Paused != nil), name)
		gauge(c.misrouted, flag(misrouted[name]), name)
	}
	gauge(c.leader, flag(c.rt.IsLeader()), c.rt.Replica())
	gauge(c.redisUp, flag(snap.Redis == runtime.RedisUp))
	gauge(c.redisUnsafe, flag(snap.RedisUnsafe != ""))
	gauge(c.disabled, flag(snap.Disabled != ""))
	gauge(c.duplicateReplica, flag(snap.DuplicateReplica != ""), c.rt.Replica())
	gauge(c.namespaceContended, flag(snap.NamespaceContention != ""), c.rt.Replica())
	gauge(c.legacyNamespace, flag(snap.LegacyNamespace != ""), c.rt.Replica())
	if skew, ok := c.rt.ClockSkew(); ok {
		gauge(c.clockSkew, skew.Seconds(), c.rt.Replica())
	}
}

// Handler serves rt's metrics alone, for mounting at /metrics outside the
// admin's authentication or passing as admin.Options.Metrics.
func Handler(rt *runtime.Runtime) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(rt))
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, req)
	})
}

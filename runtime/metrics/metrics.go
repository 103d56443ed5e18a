// Package metrics exports a belfry runtime's state as Prometheus metrics.
// It is written only against package runtime's public API and kept apart
// from it, so a service that does not use Prometheus does not link it.
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

// collector exports the same Snapshot the admin page shows, read at scrape
// time: a silent stoppage (late=1, last_success aging) becomes an alert.
// Occurrence counts come from the ledger in Redis, so every replica exports
// the cluster's totals; aggregate with max, not sum.
type collector struct {
	r                                           *runtime.Runtime
	next, lastEnqueue, lastSuccess, late, total *prometheus.Desc
	leader, redisUp                             *prometheus.Desc
}

// NewCollector returns a Prometheus collector of rt's metrics, to register
// in the host's registry.
func NewCollector(rt *runtime.Runtime) prometheus.Collector {
	schedule := []string{"schedule"}
	return &collector{
		r:           rt,
		next:        prometheus.NewDesc("belfry_schedule_next_run_timestamp_seconds", "When the schedule fires next.", schedule, nil),
		lastEnqueue: prometheus.NewDesc("belfry_schedule_last_enqueue_timestamp_seconds", "When an occurrence of the schedule was last enqueued.", schedule, nil),
		lastSuccess: prometheus.NewDesc("belfry_schedule_last_success_timestamp_seconds", "When an occurrence of the schedule last succeeded.", schedule, nil),
		late:        prometheus.NewDesc("belfry_schedule_late", "1 when the newest due slot has no success within grace plus timeout.", schedule, nil),
		total:       prometheus.NewDesc("belfry_schedule_occurrences_total", "Occurrences by outcome: enqueued, manual, missed, skipped, succeeded, failed (attempts).", []string{"schedule", "outcome"}, nil),
		leader:      prometheus.NewDesc("belfry_leader", "1 when this replica holds the scheduler lease.", []string{"replica"}, nil),
		redisUp:     prometheus.NewDesc("belfry_redis_up", "1 when the last Redis call succeeded.", nil, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.next, c.lastEnqueue, c.lastSuccess, c.late, c.total, c.leader, c.redisUp} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	snap, _ := c.r.Snapshot(ctx)
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, st := range snap.Schedules {
		name, n := st.Schedule.Name, st.Counters
		if !st.Next.IsZero() {
			gauge(c.next, float64(st.Next.Unix()), name)
		}
		if !n.LastEnqueue.IsZero() {
			gauge(c.lastEnqueue, float64(n.LastEnqueue.Unix()), name)
		}
		if !n.LastSuccess.IsZero() {
			gauge(c.lastSuccess, float64(n.LastSuccess.Unix()), name)
		}
		late := 0.0
		if st.Status == runtime.StatusLate {
			late = 1
		}
		gauge(c.late, late, name)
		for outcome, v := range map[string]int64{
			string(runtime.OutcomeEnqueued): n.Enqueued, manualOutcome: n.Manual, string(runtime.OutcomeMissed): n.Missed,
			string(runtime.OutcomeSkipped): n.Skipped, string(runtime.OutcomeSucceeded): n.Succeeded, string(runtime.OutcomeFailed): n.Failed,
		} {
			ch <- prometheus.MustNewConstMetric(c.total, prometheus.CounterValue, float64(v), name, outcome)
		}
	}
	leader := 0.0
	if c.r.IsLeader() {
		leader = 1
	}
	gauge(c.leader, leader, c.r.Replica())
	up := 0.0
	if snap.Redis == runtime.RedisUp {
		up = 1
	}
	gauge(c.redisUp, up)
}

// manualOutcome labels manual triggers in belfry_schedule_occurrences_total;
// they are counted apart from scheduled enqueues.
const manualOutcome = "manual"

// Handler serves rt's metrics alone, for mounting at /metrics outside the
// admin's authentication or passing as admin.Options.Metrics.
func Handler(rt *runtime.Runtime) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(rt))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

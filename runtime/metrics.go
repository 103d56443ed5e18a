package runtime

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

// collector exports the same Snapshot the admin page shows, read at scrape
// time: a silent stoppage (late=1, last_success aging) becomes an alert.
// Occurrence counts come from the ledger in Redis, so every replica exports
// the cluster's totals; aggregate with max, not sum.
type collector struct {
	r                                           *Runtime
	next, lastEnqueue, lastSuccess, late, total *prometheus.Desc
	leader, redisUp                             *prometheus.Desc
}

// Collector returns a Prometheus collector of the runtime's metrics, to
// register in the host's registry (the admin's /metrics serves it too).
func (r *Runtime) Collector() prometheus.Collector {
	schedule := []string{"schedule"}
	return &collector{
		r:           r,
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
		if st.Status == StatusLate {
			late = 1
		}
		gauge(c.late, late, name)
		for outcome, v := range map[string]int64{
			OutcomeEnqueued: n.Enqueued, "manual": n.Manual, OutcomeMissed: n.Missed,
			OutcomeSkipped: n.Skipped, OutcomeSucceeded: n.Succeeded, OutcomeFailed: n.Failed,
		} {
			ch <- prometheus.MustNewConstMetric(c.total, prometheus.CounterValue, float64(v), name, outcome)
		}
	}
	leader := 0.0
	if c.r.IsLeader() {
		leader = 1
	}
	gauge(c.leader, leader, c.r.opts.Replica)
	up := 0.0
	if snap.Redis == "up" {
		up = 1
	}
	gauge(c.redisUp, up)
}

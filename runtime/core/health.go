package core

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/belfry/belfry/runtime/engine"
)

// healthReadTimeout bounds the Redis reads of one health request.
const healthReadTimeout = 2 * time.Second

// LivezHandler answers 200 while the process serves HTTP. It never depends
// on Redis or on how jobs did, so a liveness probe built on it restarts a
// pod only when the pod itself is stuck, never because a job failed.
func (r *Runtime) LivezHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeHealth(w, http.StatusOK, map[string]string{"status": "alive", "replica": r.opts.Replica})
	})
}

// Health is the scheduler's health as an alert sees it.
type Health struct {
	// Status is "ok", "unhealthy" or "disabled".
	Status string `json:"status"`
	// Engine names the engine ("redis", "postgres"); Redis is its state,
	// whichever it is.
	Engine string     `json:"engine"`
	Redis  RedisState `json:"redis"`
	// Leader is the lease holder's replica name, "" when none holds it.
	Leader  string   `json:"leader"`
	Late    []string `json:"late"`
	Failing []string `json:"failing"`
	Paused  []string `json:"paused"`
	// Unserved are queues of schedules that no worker listens to.
	Unserved []string `json:"unserved"`
	// Problems says in words what makes the status unhealthy.
	Problems []string `json:"problems"`
}

// Engine names the runtime's engine: engine.Named's name, "redis" for an
// engine that gives none.
func (d *Diagnostics) Engine() string { return d.rt.engineName() }

func (r *Runtime) engineName() string {
	if n, ok := r.eng.(engine.Named); ok {
		return n.EngineName()
	}
	return "redis"
}

// storeName is the engine's server as a reason names it: "Redis" for the
// Redis engines, "Postgres" for the Postgres one, else the engine's name.
func (r *Runtime) storeName() string {
	switch name := r.engineName(); {
	case strings.HasPrefix(name, "redis"):
		return "Redis"
	case name == "postgres":
		return "Postgres"
	default:
		return name
	}
}

// Health judges the scheduler: unhealthy when any schedule is late or
// failing, when no replica holds the lease, when Redis is down or too slow
// to tell, or when no worker serves a schedule's queue;
// disabled when no Redis is configured. Paused schedules are listed but are
// not a problem: someone paused them on purpose. It reads the statuses
// (see Statuses) and the cluster, never a schedule's history.
func (r *Runtime) Health(ctx context.Context) Health {
	var statuses Statuses
	var snap Snapshot
	var wg sync.WaitGroup
	wg.Go(func() { statuses, _ = r.Monitor().Statuses(ctx) })
	wg.Go(func() { snap, _ = r.Monitor().SnapshotOf(ctx, nil, 0) })
	wg.Wait()
	h := Health{Status: "ok", Engine: r.engineName(), Redis: snap.Redis, Leader: snap.Cluster.Leader,
		Late: []string{}, Failing: []string{}, Paused: []string{}, Unserved: []string{}, Problems: []string{}}
	if snap.Disabled != "" {
		h.Status = "disabled"
		h.Problems = append(h.Problems, "scheduler disabled: "+snap.Disabled)
		return h
	}
	if statuses.Redis == RedisSlow && h.Redis == RedisUp {
		h.Redis = RedisSlow
	}
	unknown := 0
	for _, st := range statuses.Schedules {
		switch st.Status {
		case StatusLate:
			h.Late = append(h.Late, st.Schedule.Name)
		case StatusFailing:
			h.Failing = append(h.Failing, st.Schedule.Name)
		case StatusPaused:
			h.Paused = append(h.Paused, st.Schedule.Name)
		case StatusUnknown:
			unknown++
		}
	}
	// What could not be read is a problem: health that cannot see the
	// schedules must not say they are fine. On a Redis Cluster nothing
	// reads, and the configuration error below says why once.
	if !r.refusesCluster() {
		for _, m := range append(statuses.Missing, snap.Missing...) {
			h.Problems = append(h.Problems, m.Part+" not read: "+m.Reason)
		}
		if unknown > 0 {
			h.Problems = append(h.Problems, "the status of "+plural(unknown, "schedule is", "schedules are")+" unknown")
		}
	}
	switch unsafe := r.Diagnostics().Unsafe(); {
	case unsafe != "":
		h.Problems = append(h.Problems, unsafe)
	case snap.Redis == RedisDown:
		h.Problems = append(h.Problems, snap.redisDownName+": "+snap.RedisError)
	default:
		if h.Redis == RedisSlow {
			h.Problems = append(h.Problems, strings.ToLower(r.storeName())+" not answering in time: "+cmp.Or(snap.RedisError, statuses.RedisError))
		}
		// Who leads is unknown when the cluster was not read, which is
		// not the same as nobody leading.
		if snap.Cluster.Leader == "" && !slices.ContainsFunc(snap.Missing, func(m Missing) bool { return m.Part == PartCluster }) {
			h.Problems = append(h.Problems, "no replica holds the scheduler lease")
		}
	}
	for _, l := range snap.LostWrites {
		if snap.At.Sub(l.At) < lostRecent {
			h.Problems = append(h.Problems, fmt.Sprintf("%s at %s: slots from %s to %s may not have run",
				l.Reason, l.At.Format(time.RFC3339), l.From.Format(time.RFC3339), l.To.Format(time.RFC3339)))
		}
	}
	if snap.DuplicateReplica != "" {
		h.Problems = append(h.Problems, snap.DuplicateReplica)
	}
	for _, p := range []string{snap.NamespaceContention, snap.LegacyNamespace} {
		if p != "" {
			h.Problems = append(h.Problems, p)
		}
	}
	// Another service's workers on a shared queue stay until someone acts;
	// this service's own older workers lacking a new schedule's handler go
	// away with the rolling deploy that brought it, so they only warn.
	for _, m := range snap.Misrouted {
		if m.Namespace != r.opts.Namespace {
			h.Problems = append(h.Problems, m.String())
		}
	}
	if len(snap.Unserved) > 0 {
		h.Unserved = snap.Unserved
		h.Problems = append(h.Problems, "no worker serves "+plural(len(snap.Unserved), "queue", "queues")+": "+strings.Join(snap.Unserved, ", "))
	}
	if n := len(h.Late); n > 0 {
		h.Problems = append(h.Problems, plural(n, "schedule is", "schedules are")+" late")
	}
	if n := len(h.Failing); n > 0 {
		h.Problems = append(h.Problems, plural(n, "schedule is", "schedules are")+" failing")
	}
	if len(h.Problems) > 0 {
		h.Status = "unhealthy"
	}
	return h
}

// HealthHandler serves Health as JSON for uptime checks and alerts: 200
// when ok, 503 when unhealthy or disabled. It is not a liveness probe (see
// LivezHandler): a failing job is no reason to restart a pod. Mount it
// where the checker can reach it without the admin's authentication.
func (r *Runtime) HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), healthReadTimeout)
		defer cancel()
		h := r.Health(ctx)
		code := http.StatusOK
		if h.Status != "ok" {
			code = http.StatusServiceUnavailable
		}
		writeHealth(w, code, h)
	})
}

func writeHealth(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// plural writes "1 schedule is" or "3 schedules are".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

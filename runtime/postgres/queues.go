package postgres

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

var _ engine.Queues = (*Engine)(nil)

// River's clients say which queues they serve in river_queue: each
// producer writes its queue's row when it starts and again every
// riverQueueReport (River's fixed QueueReportInterval), and keeps jobs it
// works in state running.
const (
	riverQueueReport = 10 * time.Minute
	// unservedAfter is how old a queue's row may be, a report late, before
	// no client is taken to serve it; and how long an available job may
	// wait, with none of its queue running, before the queue is taken to
	// have no worker left.
	unservedAfter = riverQueueReport + time.Minute
	unservedWait  = time.Minute
	// misroutedRecent is how long a job bounced for its kind counts.
	misroutedRecent = 10 * time.Minute
)

// unservedSQL is the queues of $1 that no River client serves: none has
// reported the queue within $2 ms, or a job of it has waited available
// for $3 ms while none of it runs (its clients gone since they last
// reported).
const unservedSQL = `SELECT q FROM unnest($1::text[]) AS q
WHERE NOT EXISTS (SELECT 1 FROM river_queue WHERE name = q AND updated_at > now() - $2 * interval '1 millisecond')
   OR (EXISTS (SELECT 1 FROM river_job WHERE state = 'available' AND queue = q AND scheduled_at < now() - $3 * interval '1 millisecond')
       AND NOT EXISTS (SELECT 1 FROM river_job WHERE state = 'running' AND queue = q))
ORDER BY q`

// misroutedSQL is the newest job of each kind of this namespace's
// occurrences ($1) on queues $2 that a River client attempted within $3
// ms and failed for not having the kind's worker.
const misroutedSQL = `SELECT DISTINCT ON (j.kind) j.kind, j.queue, coalesce(j.attempted_by[cardinality(j.attempted_by)], ''), j.attempted_at
FROM river_job j
WHERE j.state IN ('retryable', 'discarded') AND j.queue = ANY($2) AND j.attempted_at > now() - $3 * interval '1 millisecond'
  AND j.errors[cardinality(j.errors)]->>'error' LIKE 'job kind is not registered%'
  AND (EXISTS (SELECT 1 FROM belfry_slot WHERE namespace = $1 AND occurrence_id = j.metadata->>'belfry_id')
       OR EXISTS (SELECT 1 FROM belfry_manual WHERE namespace = $1 AND occurrence_id = j.metadata->>'belfry_id'))
ORDER BY j.kind, j.attempted_at DESC`

// queues are the distinct River queues of the registry's schedules.
func (e *Engine) queues() []string {
	if e.rt.Registry == nil {
		return nil
	}
	var queues []string
	for _, s := range e.rt.Registry.Schedules() {
		if q := cmp.Or(s.Queue, river.QueueDefault); !slices.Contains(queues, q) {
			queues = append(queues, q)
		}
	}
	return queues
}

// ServeAdvice is engine.Queues': a River client serves the queues its
// Config names.
func (e *Engine) ServeAdvice() string {
	return "add it to river.Config.Queues of a client whose Workers have belfry's (postgres.AddWorkers)"
}

// UnservedQueues returns the queues of the registry's schedules that no
// River client serves, sorted: none reported it lately (River's clients
// report their queues when they start and every ten minutes), or its jobs
// wait with none of it running. The read is bounded by the election's
// call timeout.
func (e *Engine) UnservedQueues(ctx context.Context) ([]string, error) {
	queues := e.queues()
	if len(queues) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.callTimeout())
	defer cancel()
	return engine.Obey(ctx, func(ctx context.Context) ([]string, error) {
		rows, err := e.pool.Query(ctx, unservedSQL, queues, unservedAfter.Milliseconds(), unservedWait.Milliseconds())
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowTo[string])
	})
}

// Misrouted returns this namespace's occurrences that River clients
// serving their queue attempted lately without a worker for their kind,
// the newest of each schedule, sorted by schedule. The read is bounded by
// the election's call timeout.
func (e *Engine) Misrouted(ctx context.Context) ([]engine.Misrouted, error) {
	queues := e.queues()
	if len(queues) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.callTimeout())
	defer cancel()
	return engine.Obey(ctx, func(ctx context.Context) ([]engine.Misrouted, error) {
		rows, err := e.pool.Query(ctx, misroutedSQL, e.ns, queues, misroutedRecent.Milliseconds())
		if err != nil {
			return nil, err
		}
		var out []engine.Misrouted
		var m engine.Misrouted
		_, err = pgx.ForEachRow(rows, []any{&m.Schedule, &m.Queue, &m.Replica, &m.At}, func() error {
			if _, ok := e.rt.Registry.Lookup(m.Schedule); ok {
				m.Namespace, m.Reason = e.ns, "lack its handler"
				out = append(out, m)
			}
			return nil
		})
		return out, err
	})
}

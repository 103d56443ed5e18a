package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/checkpoint"
	"github.com/belfry/belfry/runtime/core"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Recorder is what records a worker's executions: a runtime (its
// Middleware writes each attempt's start and end, a panic and a timeout
// included, to the ledger) and the registry whose handlers it runs.
// *runtime.Runtime is one.
type Recorder interface {
	Registry() *registry.Registry
	Middleware() registry.Middleware
}

// AddWorkers registers a River worker on workers for every schedule of
// rec's registry: the job kind is the schedule's name, the job's timeout
// the schedule's (0: the River client's JobTimeout), and each execution
// runs the schedule's handler through rec's recording middleware and then
// middleware, so every attempt is recorded truthfully. It fails if
// workers already has a worker for one of the kinds (the schedules before
// it stay registered).
func AddWorkers(workers *river.Workers, rec Recorder, middleware ...registry.Middleware) (err error) {
	mw := append([]registry.Middleware{rec.Middleware()}, middleware...)
	// AddWorkerArgs, not AddWorker: every schedule's args are one Go type,
	// told apart by the kind each value carries. It panics on a kind
	// registered twice, which is returned as an error.
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("postgres: registering River workers: %v", v)
		}
	}()
	for _, s := range rec.Registry().Schedules() {
		river.AddWorkerArgs(workers, occurrenceArgs{kind: s.Name}, river.Worker[occurrenceArgs](&scheduleWorker{s: s, mw: mw}))
	}
	return nil
}

// scheduleWorker runs one schedule's River jobs.
type scheduleWorker struct {
	river.WorkerDefaults[occurrenceArgs]
	s  *registry.Schedule
	mw []registry.Middleware
}

// Timeout is the schedule's timeout; 0 leaves the client's JobTimeout.
func (w *scheduleWorker) Timeout(*river.Job[occurrenceArgs]) time.Duration { return w.s.Timeout }

// Work runs the handler on the job's occurrence, with the delivery's
// attempt where the recording middleware reads it (Engine.Attempt) and
// the enqueue's carrier (the job's belfry_headers) where core.Carrier
// reads it, before any middleware runs.
func (w *scheduleWorker) Work(ctx context.Context, job *river.Job[occurrenceArgs]) error {
	ctx = context.WithValue(ctx, deliveryKey{}, delivery{attempt: job.Attempt - 1, maxRetry: job.MaxAttempts - 1})
	ctx = core.WithCarrier(ctx, carrierOf(job.JobRow))
	err := w.s.HandlePayload(ctx, job.Args.payload, w.mw...)
	var interrupted *checkpoint.Interrupted
	if errors.As(err, &interrupted) {
		// A checkpointed handler stopped between batches, its place saved:
		// a snooze makes the job available again at once without counting
		// an attempt (River gives the attempt back), whether its timeout
		// was near or the client is stopping.
		return river.JobSnooze(0)
	}
	return err
}

// carrierOf is what the job's enqueue asked to carry (its metadata's
// belfry_headers), nil for none. Metadata that is not belfry's JSON
// carries nothing rather than failing the job: the occurrence runs as it
// would have without an observer.
func carrierOf(job *rivertype.JobRow) map[string]string {
	var meta jobMetadata
	if json.Unmarshal(job.Metadata, &meta) != nil {
		return nil
	}
	return meta.Headers
}

type deliveryKey struct{}

type delivery struct{ attempt, maxRetry int }

// Attempt is the attempt of the River job ctx's worker runs (0 for the
// first) and its retries (max attempts less one).
func (*Engine) Attempt(ctx context.Context) (attempt, maxRetry int, known bool) {
	d, ok := ctx.Value(deliveryKey{}).(delivery)
	return d.attempt, d.maxRetry, ok
}

// SkipsRetry says whether err is River's JobCancel: the job is not
// retried.
func (*Engine) SkipsRetry(err error) bool {
	var cancel *rivertype.JobCancelError
	return errors.As(err, &cancel)
}

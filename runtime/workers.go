package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/checkpoint"
	"github.com/belfry/belfry/runtime/core"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/redisengine"
	"github.com/hibiken/asynq"
)

// RegisterHandlers registers every schedule's handler on mux, wrapped so the
// runtime records each execution (start, finish, duration, error) in its
// ledger; extra middleware runs inside that recording. The handlers' context
// holds what the enqueue's EnqueueObserver asked to carry with the task
// (Carrier).
//
// asynq routes a task by its queue and type alone, so workers of two
// services that share a queue take each other's tasks: a type the mux does
// not know fails with asynq's "handler not found" and is retried, and a
// schedule of the same name in the other service would run this service's
// handler on the other's occurrence. The handlers therefore refuse an
// occurrence of another service's namespace (one where only replicas of
// another registry beat), handing it back to asynq's retries, which let
// the other service's workers take it; and RegisterHandlers adds a
// middleware to mux that notes, for every belfry occurrence mux has no
// handler for, which workers bounced it. Both are reported to the
// occurrence's own service: its Snapshot (Misrouted), admin page, metrics
// and log, so the fix — a queue per service, or every handler on every
// worker of the queue — is made before a schedule with retry=0 loses an
// occurrence. Every other task passes the middleware unchanged.
func (r *Runtime) RegisterHandlers(mux *asynq.ServeMux, middleware ...registry.Middleware) {
	mw := append([]registry.Middleware{r.Middleware()}, middleware...)
	for _, s := range r.Registry().Schedules() {
		mux.HandleFunc(s.Name, func(ctx context.Context, t *asynq.Task) error {
			if err := r.refuseForeign(ctx, s); err != nil {
				return err
			}
			ctx = redisengine.WithRetriedBefore(ctx, retriedBefore(t.Headers()))
			err := s.HandlePayload(core.WithCarrier(ctx, t.Headers()), t.Payload(), mw...)
			return r.continueInterrupted(ctx, s, t, err)
		})
	}
	mux.Use(r.noteUnhandled)
}

// ErrForeignOccurrence is returned by a handler given an occurrence of
// another service's namespace: asynq retries it, on any worker of the queue.
var ErrForeignOccurrence = errors.New("occurrence of another service")

// foreignCheckEvery bounds how often a worker asks who beats in a foreign
// namespace.
const foreignCheckEvery = 10 * time.Second

// foreignOwners caches, per namespace, whether only other registries beat
// there.
type foreignOwners struct {
	mu     sync.Mutex
	at     map[string]time.Time
	others map[string]bool
	logged map[string]bool // "<namespace>|<schedule>" reported in the log
}

// refuseForeign refuses an occurrence whose ID names another namespace in
// which replicas beat and none of this registry: another service's, which
// its own workers must run. An ID of no namespace (a task enqueued before
// IDs named one), or of a namespace no live replica of another registry
// uses (this service's own, before its Namespace changed), runs here.
func (r *Runtime) refuseForeign(ctx context.Context, s *registry.Schedule) error {
	id, _ := asynq.GetTaskID(ctx)
	ns, ok := registry.NamespaceOfID(id)
	if !ok || ns == r.Namespace() || r.redis == nil || !r.othersOwn(ctx, ns) {
		return nil
	}
	queue, _ := asynq.GetQueueName(ctx)
	r.reportMisrouted(ctx, ns, s.Name, queue, redisengine.ReasonOtherNames)
	return fmt.Errorf("%w: %s belongs to namespace %q, these workers to %q; another service's workers share queue %q with a schedule of the same name, and asynq retries it on any of them",
		ErrForeignOccurrence, id, ns, r.Namespace(), queue)
}

// othersOwn says whether live replicas beat in namespace ns and none is of
// this registry (redisengine.Engine.OthersOwn), as last read within
// foreignCheckEvery.
func (r *Runtime) othersOwn(ctx context.Context, ns string) bool {
	f := &r.foreign
	now := r.redis.Now()
	f.mu.Lock()
	if at, ok := f.at[ns]; ok && now.Sub(at) < foreignCheckEvery {
		defer f.mu.Unlock()
		return f.others[ns]
	}
	f.mu.Unlock()
	others := r.redis.OthersOwn(ctx, ns)
	f.mu.Lock()
	if f.at == nil {
		f.at, f.others = map[string]time.Time{}, map[string]bool{}
	}
	f.at[ns], f.others[ns] = now, others
	f.mu.Unlock()
	return others
}

// noteUnhandled is the mux middleware: it reports a belfry occurrence that
// reached these workers without a handler, and changes nothing.
func (r *Runtime) noteUnhandled(next asynq.Handler) asynq.Handler {
	return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		err := next.ProcessTask(ctx, t)
		if errors.Is(err, asynq.ErrHandlerNotFound) && r.redis != nil {
			id, _ := asynq.GetTaskID(ctx)
			if ns, ok := registry.NamespaceOfID(id); ok {
				queue, _ := asynq.GetQueueName(ctx)
				r.reportMisrouted(ctx, ns, t.Type(), queue, redisengine.ReasonNoHandler)
			}
		}
		return err
	})
}

// reportMisrouted tells the occurrence's service, and this one's log once,
// that these workers bounced an occurrence of schedule in namespace ns.
func (r *Runtime) reportMisrouted(ctx context.Context, ns, schedule, queue, reason string) {
	f := &r.foreign
	f.mu.Lock()
	if f.logged == nil {
		f.logged = map[string]bool{}
	}
	first := !f.logged[ns+"|"+schedule]
	f.logged[ns+"|"+schedule] = true
	f.mu.Unlock()
	if first {
		r.Logger().Error("an occurrence reached workers that cannot run it; asynq retries it, on any worker of its queue",
			"schedule", schedule, "queue", queue, "its_namespace", ns, "reason", reason)
	}
	r.redis.ReportMisrouted(ctx, ns, schedule, queue, reason)
}

// Headers of a continuation task (continueInterrupted).
const (
	// headerContinuation counts the continuations of an occurrence: 1 for
	// the first.
	headerContinuation = "belfry-continuation"
	// headerRetriedBefore is how many retries the occurrence's earlier
	// tasks used, which its continuation's retries add to.
	headerRetriedBefore = "belfry-retried-before"
)

// continuationRetention keeps a continuation's task ID reserved for longer
// than its interrupted task can still be delivered again, so that a
// delivery repeated after the continuation was enqueued enqueues none.
const continuationRetention = time.Hour

// continueInterrupted turns a checkpointed handler's interruption (its
// timeout near, err a *checkpoint.Interrupted) into a continuation: a task
// of the same occurrence, with the retries it has left, enqueued at once,
// and nil for this one, so that asynq neither counts a retry nor archives
// it on its last attempt. Any other err is returned as it is, and so is an
// interruption whose context ended: asynq then handled the task itself (a
// shutdown requeued it, with no retry counted) and ignores the handler's
// error.
func (r *Runtime) continueInterrupted(ctx context.Context, s *registry.Schedule, t *asynq.Task, err error) error {
	var interrupted *checkpoint.Interrupted
	if !errors.As(err, &interrupted) || ctx.Err() != nil || r.redis == nil {
		return err
	}
	id, _ := asynq.GetTaskID(ctx)
	queue, _ := asynq.GetQueueName(ctx)
	retried, _ := asynq.GetRetryCount(ctx)
	maxRetry, _ := asynq.GetMaxRetry(ctx)
	n, _ := strconv.Atoi(t.Headers()[headerContinuation])
	headers := maps.Clone(t.Headers())
	if headers == nil {
		headers = map[string]string{}
	}
	headers[headerContinuation] = strconv.Itoa(n + 1)
	headers[headerRetriedBefore] = strconv.Itoa(retriedBefore(t.Headers()) + retried)
	task := engine.Task{Type: t.Type(), Payload: t.Payload(), ID: redisengine.ContinuationID(redisengine.BaseTaskID(id), n+1), Queue: queue,
		MaxRetry: max(maxRetry-retried, 0), Timeout: s.Timeout, Retention: continuationRetention, Headers: headers}
	res := r.redis.EnqueueAll(context.WithoutCancel(ctx), nil, []engine.Enqueue{{Task: task}})
	if res[0].Err != nil {
		r.Logger().Warn("could not enqueue the continuation of an interrupted occurrence; asynq retries it instead",
			"id", id, "err", res[0].Err)
		return err
	}
	return nil
}

// retriedBefore is the retries used by the tasks of an occurrence before
// the one with headers.
func retriedBefore(headers map[string]string) int {
	n, _ := strconv.Atoi(headers[headerRetriedBefore])
	return n
}

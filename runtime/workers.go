package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/internal/lease"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// unservedCheckEvery bounds how often the leader asks asynq which queues
// its servers listen to.
const unservedCheckEvery = time.Minute

// UnservedQueues returns the queues of the registry's schedules that no
// running asynq server listens to: their occurrences are enqueued and wait
// for ever, and the schedule turns late. asynq's servers announce their
// queues every few seconds, so a server that just started may not be seen
// yet.
func (rd *RedisDiagnostics) UnservedQueues() ([]string, error) {
	r := rd.rt
	if r.redis == nil {
		return nil, nil
	}
	servers, err := r.redis.Inspector.Servers()
	if err != nil {
		return nil, err
	}
	served := map[string]bool{}
	for _, s := range servers {
		for q := range s.Queues {
			served[q] = true
		}
	}
	var unserved []string
	for _, s := range r.reg.Schedules() {
		if !served[s.Queue] && !slices.Contains(unserved, s.Queue) {
			unserved = append(unserved, s.Queue)
		}
	}
	slices.Sort(unserved)
	return unserved, nil
}

// unservedLog logs each unserved queue once, and again once it is served.
type unservedLog struct {
	mu      sync.Mutex
	every   time.Duration // unservedCheckEvery; tests shorten it
	checked time.Time
	warned  map[string]bool
	// misrouted are the reports of misrouted occurrences logged.
	misrouted map[string]bool
}

// checkUnserved is the leader's periodic look at the queues, at most once
// per unservedCheckEvery: which no server serves, and on which workers
// bounced this service's occurrences.
func (r *Runtime) checkUnserved(now time.Time) {
	if r.redis == nil || !r.checkQueues(now) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.redis.CallTimeout())
	defer cancel()
	r.checkMisrouted(ctx)
}

// checkQueues logs the unserved queues, and says whether it was time to.
func (r *Runtime) checkQueues(now time.Time) bool {
	u := &r.unserved
	u.mu.Lock()
	defer u.mu.Unlock()
	if now.Sub(u.checked) < cmp.Or(u.every, unservedCheckEvery) {
		return false
	}
	u.checked = now
	queues, err := r.Redis().UnservedQueues()
	if err != nil {
		return false // the scheduler's own calls report Redis trouble
	}
	if u.warned == nil {
		u.warned = map[string]bool{}
	}
	for q, was := range u.warned {
		if was && !slices.Contains(queues, q) {
			r.log.Info("an asynq server now serves the queue", "queue", q)
			delete(u.warned, q)
		}
	}
	for _, q := range queues {
		if !u.warned[q] {
			u.warned[q] = true
			names, more := r.schedulesOn(q, loggedNames)
			r.log.Warn("no asynq server serves this queue: its occurrences are enqueued but never run; start workers with asynq.Config.Queues including it",
				"queue", q, "schedules", names, "more_schedules", more)
		}
	}
	return true
}

// loggedNames bounds the schedules a log line names: a queue of 100,000
// schedules would otherwise make one line of megabytes.
const loggedNames = 10

// schedulesOn returns up to limit names of the schedules on queue and how
// many more there are.
func (r *Runtime) schedulesOn(queue string, limit int) (names []string, more int) {
	for _, s := range r.reg.Schedules() {
		if s.Queue != queue {
			continue
		}
		if len(names) < limit {
			names = append(names, s.Name)
		} else {
			more++
		}
	}
	return names, more
}

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
	for _, s := range r.reg.Schedules() {
		mux.HandleFunc(s.Name, func(ctx context.Context, t *asynq.Task) error {
			if err := r.refuseForeign(ctx, s, t); err != nil {
				return err
			}
			return s.HandlePayload(withCarrier(ctx, t.Headers()), t.Payload(), mw...)
		})
	}
	mux.Use(r.noteUnhandled)
}

// ErrForeignOccurrence is returned by a handler given an occurrence of
// another service's namespace: asynq retries it, on any worker of the queue.
var ErrForeignOccurrence = errors.New("occurrence of another service")

// misroutedKey is where workers report the occurrences of queue they could
// not run: under asynq's prefix, beside the queue's own keys, so that any
// service's Redis user may write it (see the ACL in docs/redis.md).
func misroutedKey(queue string) string { return "asynq:{" + queue + "}:belfry:misrouted" }

// misroutedTTL is how long a report of a misrouted occurrence lives; it is
// written again at every bounce.
const misroutedTTL = time.Hour

// misroutedRecent is how long a report counts as current: a few of asynq's
// retry delays.
const misroutedRecent = 10 * time.Minute

// Misrouted is an occurrence of this service's that workers of its queue
// could not run: they lack its handler, or they are another service's with
// a schedule of the same name.
type Misrouted struct {
	Schedule string `json:"schedule"`
	Queue    string `json:"queue"`
	// Namespace and Replica are those of the runtime whose workers bounced
	// it.
	Namespace string    `json:"namespace"`
	Replica   string    `json:"replica"`
	Reason    string    `json:"reason"`
	At        time.Time `json:"at"`
}

func (m Misrouted) String() string {
	return fmt.Sprintf("occurrences of %s on queue %q reach workers of replica %s (namespace %q) that %s: they bounce back as retries, and are lost once retries run out; "+
		"serve the queue only with workers that register this service's handlers, or give each service its own queue",
		m.Schedule, m.Queue, m.Replica, m.Namespace, m.Reason)
}

const (
	reasonNoHandler  = "have no handler for it (asynq: handler not found)"
	reasonOtherNames = "serve another service's schedule of the same name"
)

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
func (r *Runtime) refuseForeign(ctx context.Context, s *registry.Schedule, t *asynq.Task) error {
	id, _ := asynq.GetTaskID(ctx)
	ns, ok := registry.NamespaceOfID(id)
	if !ok || ns == r.opts.Namespace || r.redis == nil || !r.othersOwn(ctx, ns) {
		return nil
	}
	queue, _ := asynq.GetQueueName(ctx)
	r.reportMisrouted(ctx, ns, s.Name, queue, reasonOtherNames)
	return fmt.Errorf("%w: %s belongs to namespace %q, these workers to %q; another service's workers share queue %q with a schedule of the same name, and asynq retries it on any of them",
		ErrForeignOccurrence, id, ns, r.opts.Namespace, queue)
}

// othersOwn says whether live replicas beat in namespace ns and none is of
// this registry. On a Redis error it says no: running the occurrence is
// what every worker did before it could tell.
func (r *Runtime) othersOwn(ctx context.Context, ns string) bool {
	f := &r.foreign
	now := r.clock.Now()
	f.mu.Lock()
	if at, ok := f.at[ns]; ok && now.Sub(at) < foreignCheckEvery {
		defer f.mu.Unlock()
		return f.others[ns]
	}
	f.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	stale := (3 * r.opts.LeaseTTL).Milliseconds()
	members, err := lease.Obey(cctx, func(ctx context.Context) ([]string, error) {
		t, err := r.redis.Client.Time(ctx).Result()
		if err != nil {
			return nil, err
		}
		return r.redis.Client.ZRangeByScore(ctx, store.NewKeys(ns).Registries, &redis.ZRangeBy{
			Min: strconv.FormatInt(t.UnixMilli()-stale, 10), Max: "+inf"}).Result()
	})
	if err != nil {
		return false
	}
	others := len(members) > 0
	for _, m := range members {
		if at := strings.LastIndexByte(m, '|'); at >= 0 && m[:at] == r.identity {
			others = false
		}
	}
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
				r.reportMisrouted(ctx, ns, t.Type(), queue, reasonNoHandler)
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
		r.log.Error("an occurrence reached workers that cannot run it; asynq retries it, on any worker of its queue",
			"schedule", schedule, "queue", queue, "its_namespace", ns, "reason", reason)
	}
	m := Misrouted{Schedule: schedule, Queue: queue, Namespace: r.opts.Namespace, Replica: r.opts.Replica, Reason: reason, At: r.clock.Now()}
	b, _ := json.Marshal(m)
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	key := misroutedKey(queue)
	lease.Obey(cctx, func(ctx context.Context) ([]redis.Cmder, error) {
		return r.redis.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, key, ns+"|"+schedule, b)
			p.PExpire(ctx, key, misroutedTTL)
			return nil
		})
	})
}

// Misrouted returns the recent reports, by workers of the
// schedules' queues, of this service's occurrences they could not run,
// sorted by schedule.
func (rd *RedisDiagnostics) Misrouted(ctx context.Context) ([]Misrouted, error) {
	r := rd.rt
	if r.redis == nil {
		return nil, nil
	}
	var queues []string
	for _, s := range r.reg.Schedules() {
		if !slices.Contains(queues, s.Queue) {
			queues = append(queues, s.Queue)
		}
	}
	cmds := make([]*redis.MapStringStringCmd, len(queues))
	_, err := bounded(ctx, func(ctx context.Context) ([]redis.Cmder, error) {
		return r.redis.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, q := range queues {
				cmds[i] = p.HGetAll(ctx, misroutedKey(q))
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	now := r.clock.Now()
	var out []Misrouted
	for _, cmd := range cmds {
		for field, v := range cmd.Val() {
			ns, schedule, _ := strings.Cut(field, "|")
			var m Misrouted
			if ns != r.opts.Namespace || json.Unmarshal([]byte(v), &m) != nil || now.Sub(m.At) > misroutedRecent {
				continue
			}
			if _, ok := r.reg.Lookup(schedule); ok {
				out = append(out, m)
			}
		}
	}
	slices.SortFunc(out, func(a, b Misrouted) int {
		return cmp.Or(cmp.Compare(a.Schedule, b.Schedule), cmp.Compare(a.Replica, b.Replica))
	})
	return out, nil
}

// checkMisrouted logs each current report of a misrouted occurrence once;
// the leader calls it with its look at the queues.
func (r *Runtime) checkMisrouted(ctx context.Context) {
	ms, err := r.Redis().Misrouted(ctx)
	if err != nil {
		return
	}
	u := &r.unserved
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.misrouted == nil {
		u.misrouted = map[string]bool{}
	}
	for _, m := range ms {
		if key := m.Schedule + "|" + m.Replica + "|" + m.Reason; !u.misrouted[key] {
			u.misrouted[key] = true
			r.log.Error("MISROUTED OCCURRENCES: "+m.String(), "schedule", m.Schedule, "queue", m.Queue, "workers_namespace", m.Namespace)
		}
	}
}

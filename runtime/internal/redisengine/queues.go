package redisengine

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/redis/go-redis/v9"
)

var _ engine.Queues = (*Engine)(nil)

// The reasons workers give for bouncing an occurrence (Misrouted.Reason).
const (
	ReasonNoHandler  = "have no handler for it (asynq: handler not found)"
	ReasonOtherNames = "serve another service's schedule of the same name"
)

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

// queues are the distinct queues of the registry's schedules.
func (e *Engine) queues() []string {
	var queues []string
	if e.cfg.Registry == nil {
		return nil
	}
	for _, s := range e.cfg.Registry.Schedules() {
		if !slices.Contains(queues, s.Queue) {
			queues = append(queues, s.Queue)
		}
	}
	return queues
}

// UnservedQueues returns the queues of the registry's schedules that no
// running asynq server listens to. asynq's servers announce their queues
// every few seconds, so a server that just started may not be seen yet.
// ServeAdvice is engine.Queues': asynq's workers serve the queues their
// Config names.
func (e *Engine) ServeAdvice() string {
	return "start workers with asynq.Config.Queues including it"
}

func (e *Engine) UnservedQueues(context.Context) ([]string, error) {
	queues := e.queues()
	if len(queues) == 0 {
		return nil, nil
	}
	servers, err := e.Inspector.Servers()
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
	for _, q := range queues {
		if !served[q] {
			unserved = append(unserved, q)
		}
	}
	slices.Sort(unserved)
	return unserved, nil
}

// Misrouted returns the recent reports, by workers of the schedules'
// queues, of this service's occurrences they could not run, sorted by
// schedule. The read is bounded by the lease's call timeout too.
func (e *Engine) Misrouted(ctx context.Context) ([]engine.Misrouted, error) {
	queues := e.queues()
	if len(queues) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.CallTimeout())
	defer cancel()
	cmds := make([]*redis.MapStringStringCmd, len(queues))
	_, err := engine.Obey(ctx, func(ctx context.Context) ([]redis.Cmder, error) {
		return e.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, q := range queues {
				cmds[i] = p.HGetAll(ctx, misroutedKey(q))
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	now := e.clock.Now()
	var out []engine.Misrouted
	for _, cmd := range cmds {
		for field, v := range cmd.Val() {
			ns, schedule, _ := strings.Cut(field, "|")
			var m engine.Misrouted
			if ns != e.cfg.Namespace || json.Unmarshal([]byte(v), &m) != nil || now.Sub(m.At) > misroutedRecent {
				continue
			}
			if _, ok := e.cfg.Registry.Lookup(schedule); ok {
				out = append(out, m)
			}
		}
	}
	slices.SortFunc(out, func(a, b engine.Misrouted) int {
		return cmp.Or(cmp.Compare(a.Schedule, b.Schedule), cmp.Compare(a.Replica, b.Replica))
	})
	return out, nil
}

// ReportMisrouted tells the service of namespace ns that this engine's
// workers bounced its occurrence of schedule on queue, for reason.
func (e *Engine) ReportMisrouted(ctx context.Context, ns, schedule, queue, reason string) {
	m := engine.Misrouted{Schedule: schedule, Queue: queue, Namespace: e.cfg.Namespace, Replica: e.cfg.Replica,
		Reason: reason, At: e.clock.Now()}
	b, _ := json.Marshal(m)
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	key := misroutedKey(queue)
	engine.Obey(cctx, func(ctx context.Context) ([]redis.Cmder, error) {
		return e.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, key, ns+"|"+schedule, b)
			p.PExpire(ctx, key, misroutedTTL)
			return nil
		})
	})
}

// OthersOwn says whether live replicas beat in namespace ns and none is of
// this engine's service. On a Redis error it says no: running the
// occurrence is what every worker did before it could tell.
func (e *Engine) OthersOwn(ctx context.Context, ns string) bool {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	stale := (3 * e.cfg.LeaseTTL).Milliseconds()
	members, err := engine.Obey(cctx, func(ctx context.Context) ([]string, error) {
		t, err := e.Client.Time(ctx).Result()
		if err != nil {
			return nil, err
		}
		return e.Client.ZRangeByScore(ctx, store.NewKeys(ns).Registries, &redis.ZRangeBy{
			Min: strconv.FormatInt(t.UnixMilli()-stale, 10), Max: "+inf"}).Result()
	})
	if err != nil {
		return false
	}
	others := len(members) > 0
	for _, m := range members {
		if at := strings.LastIndexByte(m, '|'); at >= 0 && m[:at] == e.cfg.Service {
			others = false
		}
	}
	return others
}

// Namespace is the namespace the engine serves.
func (e *Engine) Namespace() string { return e.cfg.Namespace }

// Now is the engine's clock.
func (e *Engine) Now() time.Time { return e.clock.Now() }

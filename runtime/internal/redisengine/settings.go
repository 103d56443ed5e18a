package redisengine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/lease"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/redis/go-redis/v9"
)

var (
	_ engine.Settings    = (*Engine)(nil)
	_ engine.Unavailable = (*Engine)(nil)
)

// MinVersion is the oldest Redis the engine leads on: asynq's scripts
// need 6.2.
const MinVersion = "6.2.0"

// ErrUnsafe: Redis could lose the runtime's state without a failure (it
// evicts keys) or is too old; the runtime does not lead on it.
var ErrUnsafe = errors.New("unsafe Redis")

// ErrCluster: the engine was given a Redis Cluster through a client that
// does not speak cluster — a plain client of a cluster node, or a Redis
// that answers as one (CROSSSLOT, MOVED, ASK: a proxy in front of a
// cluster). A cluster client (*redis.ClusterClient) is what runs there.
var ErrCluster error = refusal("configuration error: a Redis Cluster reached without a cluster client")

// refusal is an error that is engine.ErrRefused: the core then does not
// lead on the server until it is seen down and back.
type refusal string

func (r refusal) Error() string      { return string(r) }
func (refusal) Is(target error) bool { return target == engine.ErrRefused }

// ClusterAdvice ends every ErrCluster message: why, and what to use.
const ClusterAdvice = "a plain client follows none of the cluster's redirects (MOVED, ASK) and a proxy that is not cluster-aware cannot run a script across nodes; " +
	"give the runtime a cluster client: redis.NewClusterClient(&redis.ClusterOptions{Addrs: ...}), or redis.NewUniversalClient with the nodes' addresses"

// Refusal returns the ErrCluster that err means when Redis refused a
// command as only a cluster node does, else nil. These are Redis's own
// replies, so their first word says what they are. Through a cluster
// client a MOVED or ASK that reaches the caller is a redirect the client
// gave up following in a moment of change (a failover, a resharding),
// not a configuration error.
func (e *Engine) Refusal(err error) error {
	if e.Cluster() {
		var reply redis.Error
		if err == nil || !errors.As(err, &reply) || !strings.HasPrefix(reply.Error(), "CROSSSLOT ") {
			return nil
		}
	}
	return ClusterRefusal(err)
}

// Unavailable names a cluster's answer that it cannot serve for now,
// through a cluster client: CLUSTERDOWN (a slot without a master, until a
// replica takes over), TRYAGAIN (a command over keys on both sides of a
// slot being moved), a redirect the client gave up following, or a
// pinned write no node would take (pipeline.ErrSlotMoving). Each passes
// with the failover or the move; none is a configuration error.
func (e *Engine) Unavailable(err error) string {
	if err == nil || !e.Cluster() {
		return ""
	}
	var reply redis.Error
	switch {
	case redis.IsClusterDownError(err):
		return "redis cluster unavailable (CLUSTERDOWN)"
	case redis.IsTryAgainError(err):
		return "redis cluster reconfiguring (TRYAGAIN: a slot is moving between masters)"
	case errors.Is(err, pipeline.ErrSlotMoving):
		return "redis cluster reconfiguring (a slot is moving between masters)"
	case errors.As(err, &reply) && (strings.HasPrefix(reply.Error(), "MOVED ") || strings.HasPrefix(reply.Error(), "ASK ")):
		return "redis cluster reconfiguring (" + strings.Fields(reply.Error())[0] + ": a slot changed masters)"
	}
	return ""
}

// ClusterRefusal is Refusal, of any Redis client's error.
func ClusterRefusal(err error) error {
	var reply redis.Error
	if err == nil || !errors.As(err, &reply) {
		return nil
	}
	msg := reply.Error()
	for _, prefix := range []string{"CROSSSLOT ", "MOVED ", "ASK "} {
		if strings.HasPrefix(msg, prefix) {
			return fmt.Errorf("%w: Redis answered %q, so it is a Redis Cluster node or a proxy in front of a cluster; %s", ErrCluster, msg, ClusterAdvice)
		}
	}
	return nil
}

// CheckSettings reads INFO and TIME in one round trip, bounded by the
// lease's call timeout (on a black-holed connection go-redis would
// otherwise wait for its read timeout, or for ever), and judges INFO
// (JudgeSettings).
func (e *Engine) CheckSettings(ctx context.Context) (engine.SettingsReading, error) {
	ctx, cancel := context.WithTimeout(ctx, e.CallTimeout())
	defer cancel()
	if cc, ok := e.Client.(*redis.ClusterClient); ok {
		return checkClusterSettings(ctx, cc, e.acks.Replicas)
	}
	type reading struct {
		info string
		now  time.Time
	}
	read, err := lease.Obey(ctx, func(ctx context.Context) (reading, error) {
		var info *redis.StringCmd
		var now *redis.TimeCmd
		_, err := e.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
			info, now = p.Info(ctx), p.Time(ctx)
			return nil
		})
		return reading{info: info.Val(), now: now.Val()}, err
	})
	if err != nil {
		return engine.SettingsReading{}, err
	}
	if unsafe := JudgeSettings(read.info); unsafe != nil {
		return engine.SettingsReading{Unsafe: unsafe, Now: read.now}, nil
	}
	if unsafe := JudgeReplicas(read.info, e.acks.Replicas); unsafe != nil {
		return engine.SettingsReading{Unsafe: unsafe, Passing: true, Now: read.now}, nil
	}
	return engine.SettingsReading{Now: read.now}, nil
}

// ErrTooFewReplicas: the leader's writes wait for more replicas'
// acknowledgements than the primary has replicas online, so none would
// count; the runtime does not lead until enough are back.
var ErrTooFewReplicas = errors.New("too few Redis replicas")

// JudgeReplicas reads INFO's replication section: a primary with fewer
// replicas online than want (the writes' ReplicaAcks) cannot acknowledge a
// write. A server whose INFO has no role (an embedded Redis) is not judged,
// nor one that is a replica: the lease's own writes say that it is read-only.
func JudgeReplicas(info string, want int) error {
	if want <= 0 {
		return nil
	}
	fields := infoFields(info)
	if fields["role"] != "master" {
		return nil
	}
	online := 0
	for k, v := range fields {
		if strings.HasPrefix(k, "slave") && strings.Contains(v, "state=online") {
			online++
		}
	}
	if online >= want {
		return nil
	}
	return tooFewReplicas(want, fmt.Sprintf("the primary has %d replica(s) online", online))
}

// tooFewReplicas is the verdict of a server (or masters) short of the
// replicas the writes wait for: what has too few, and how to lead anyway.
func tooFewReplicas(want int, short string) error {
	return fmt.Errorf("%w: the leader's writes wait for %d replica acknowledgement(s) (ReplicaAcks; 1 by default on a Sentinel or cluster client), "+
		"and %s, so no write there would count; belfry leads again once a replica is back "+
		"(or set runtime.Options.ReplicaAcks to runtime.ReplicaAcksOff to lead without: a failover may then run slots twice or lose them)",
		ErrTooFewReplicas, want, short)
}

// checkClusterSettings judges every master of a cluster (each holds a
// share of the keys: one that evicts loses them; one with fewer replicas
// online than the writes wait for acknowledges none, see JudgeReplicas)
// and reads the time of one.
func checkClusterSettings(ctx context.Context, cc *redis.ClusterClient, acks int) (engine.SettingsReading, error) {
	var mu sync.Mutex
	var unsafe, short []string
	_, err := lease.Obey(ctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			info, err := node.Info(ctx).Result()
			if err != nil {
				return err
			}
			if problems := judgeNode(info); len(problems) > 0 {
				mu.Lock()
				unsafe = append(unsafe, node.Options().Addr+": "+strings.Join(problems, "; "))
				mu.Unlock()
			}
			if err := JudgeReplicas(info, acks); err != nil {
				mu.Lock()
				short = append(short, node.Options().Addr)
				mu.Unlock()
			}
			return nil
		})
	})
	if err != nil {
		return engine.SettingsReading{}, err
	}
	now, err := lease.Obey(ctx, func(ctx context.Context) (time.Time, error) { return cc.Time(ctx).Result() })
	if err != nil {
		return engine.SettingsReading{}, err
	}
	if len(unsafe) > 0 {
		slices.Sort(unsafe)
		return engine.SettingsReading{Unsafe: fmt.Errorf("%w: %s", ErrUnsafe, strings.Join(unsafe, "; ")), Now: now}, nil
	}
	if len(short) > 0 {
		slices.Sort(short)
		return engine.SettingsReading{Unsafe: tooFewReplicas(acks, "the cluster's master(s) "+strings.Join(short, ", ")+" have fewer replicas online"),
			Passing: true, Now: now}, nil
	}
	return engine.SettingsReading{Now: now}, nil
}

// JudgeSettings reads INFO's cluster_enabled, redis_version and
// maxmemory_policy, of the one server a plain client talks to: a cluster
// node there is a configuration error (ErrCluster). A server that reports
// none (an embedded Redis such as miniredis) is not judged.
func JudgeSettings(info string) error {
	if infoFields(info)["cluster_enabled"] == "1" {
		return fmt.Errorf("%w: the Redis it was given is a cluster node (cluster_enabled:1); %s", ErrCluster, ClusterAdvice)
	}
	problems := judgeNode(info)
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrUnsafe, strings.Join(problems, "; "))
}

// infoFields are the "key:value" lines of an INFO reply.
func infoFields(info string) map[string]string {
	fields := map[string]string{}
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields
}

// judgeNode says what in a server's INFO makes it unsafe: too old, or
// evicting.
func judgeNode(info string) []string {
	fields := infoFields(info)
	var problems []string
	if v, ok := fields["redis_version"]; ok && versionLess(v, MinVersion) {
		problems = append(problems, fmt.Sprintf("Redis %s is older than %s, which asynq and belfry need", v, MinVersion))
	}
	// A policy other than noeviction evicts only under a memory limit:
	// maxmemory 0 is none.
	if p, ok := fields["maxmemory_policy"]; ok && p != "noeviction" && fields["maxmemory"] != "0" {
		problems = append(problems, fmt.Sprintf("maxmemory-policy is %s: Redis may evict the lease, the fencing token and the cursors, "+
			"which runs slots twice or never; set maxmemory-policy noeviction", p))
	}
	return problems
}

// versionLess compares dotted versions numerically.
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(as), len(bs)) {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

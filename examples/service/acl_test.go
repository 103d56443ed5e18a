package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// serviceACL is the Redis ACL a service's user needs, as docs/redis.md
// states it, for the namespace "belfry" (replace {belfry} by the
// namespace's tag); the replicas of these tests run with -namespace belfry.
// Keys: the runtime's under belfry: (its namespace's, and the names of the
// layout before hash tags, which the first upgraded leader moves: SCAN and
// RENAMENX) and asynq's under asynq:. Channels: the lease handover (without it a graceful
// shutdown silently becomes a lease expiry) and asynq's task cancellation.
// Commands: those of belfry's scripts and calls (INFO for the check that
// Redis is recent enough and does not evict keys), asynq's client, server
// and the Inspector calls belfry makes (GetTaskInfo for overlap=skip, the
// server list, read with HVALS, to name queues no server serves), and
// go-redis's connection handshake.
const serviceACL = "resetkeys resetchannels -@all " +
	"~belfry:* ~asynq:* &belfry:{belfry}:lease:released &asynq:cancel " +
	"+hello +ping +time +info +scan " +
	"+get +set +setex +incr +del +exists +expire +expireat +pexpire +pttl +renamenx +rename +type +sunionstore " +
	"+hget +hset +hsetnx +hdel +hmget +hgetall +hincrby +hkeys +hvals +hlen +hscan +hexists " +
	"+lpush +rpush +lrange +ltrim +lrem +rpoplpush +sadd +srem +smembers " +
	"+zadd +zrem +zcard +zscore +zrange +zrangebyscore +zrevrange +zremrangebyrank +zremrangebyscore +zpopmin " +
	"+multi +exec +watch +unwatch +eval +evalsha +publish +subscribe +unsubscribe"

// TestRedisACL runs two replicas as a Redis user that has exactly the
// rights of serviceACL, through leadership, every heartbeat, a manual
// trigger and a graceful handover (which needs the pub/sub rights: the
// lease TTL is far longer than the takeover deadline), and checks that
// Redis refused nothing: its ACL LOG stays empty. It also checks that
// docs/redis.md states the same rules.
func TestRedisACL(t *testing.T) {
	t.Parallel()
	guide, err := os.ReadFile("../../docs/redis.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(guide), serviceACL) {
		t.Errorf("docs/redis.md does not state the ACL the test grants:\n%s", serviceACL)
	}

	redisURL := startRedis(t)
	admin := redisClient(t, redisURL)
	ctx := context.Background()
	const user, password = "svc", "svc-secret"
	if err := admin.Do(ctx, append([]any{"ACL", "SETUSER", user, "on", ">" + password}, aclArgs(serviceACL)...)...).Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	if err := admin.Do(ctx, "ACL", "LOG", "RESET").Err(); err != nil {
		t.Fatal(err)
	}
	socket := strings.TrimPrefix(redisURL, "unix://")
	checkTwoReplicas(t, fmt.Sprintf("unix://%s:%s@%s", user, password, socket), "-namespace", "belfry")
	if refused := aclLog(t, admin); len(refused) > 0 {
		t.Errorf("Redis refused %d commands, keys or channels to the service's user:\n%s", len(refused), strings.Join(refused, "\n"))
	}
}

// TestRedisACLWithoutChannels checks what the channel rights are for: a
// user without them is refused the subscription a follower makes.
func TestRedisACLWithoutChannels(t *testing.T) {
	t.Parallel()
	redisURL := startRedis(t)
	admin := redisClient(t, redisURL)
	ctx := context.Background()
	rules := strings.NewReplacer("&belfry:{belfry}:lease:released ", "", "&asynq:cancel ", "").Replace(serviceACL)
	if err := admin.Do(ctx, append([]any{"ACL", "SETUSER", "nochan", "on", ">pw"}, aclArgs(rules)...)...).Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	socket := strings.TrimPrefix(redisURL, "unix://")
	startReplica(t, "unix://nochan:pw@"+socket, "nochan", "-namespace", "belfry")
	var refused []string
	waitFor(t, 15*time.Second, "Redis to refuse the lease channel", func() bool {
		refused = aclLog(t, admin)
		return strings.Contains(strings.Join(refused, "\n"), "belfry:{belfry}:lease:released")
	})
	t.Logf("refused: %s", strings.Join(refused, "; "))
}

func redisClient(t *testing.T, url string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

func aclArgs(rules string) []any {
	var args []any
	for _, r := range strings.Fields(rules) {
		args = append(args, r)
	}
	return args
}

// aclLog returns Redis's ACL LOG, one line per refusal: the reason, the
// command and the key or channel refused.
func aclLog(t *testing.T, admin *redis.Client) []string {
	t.Helper()
	entries, err := admin.ACLLog(context.Background(), 100).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, fmt.Sprintf("%s %s %s (%d times)", e.Reason, e.Context, e.Object, e.Count))
	}
	return out
}

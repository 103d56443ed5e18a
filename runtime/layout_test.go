package runtime_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/redis/go-redis/v9"
)

// A namespace whose state is in the key layout before hash tags ("<ns>:")
// is moved to the hash-tagged one by the first leader of the new version,
// once, and not while a replica of the older version still leads from the
// old keys: cursors, records and counters carry on where they were, and
// the old lease is left holding a value no older replica takes for its
// own.
func TestOldKeyLayoutIsMovedByTheFirstLeader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := sharedRedis(t)
	ns := uniq("ns")
	old, cursor := ns+":", time.Now().Add(-time.Hour).Unix()
	// What a replica of the older version leaves, leading still.
	rdb.Set(ctx, old+"lease", "old-1|0f0f|7", time.Minute)
	rdb.HSet(ctx, old+"cursors", "nightly", cursor)
	rdb.HSet(ctx, old+"counters", "nightly", store.FormatCounters(map[string]int64{"succeeded": 41}))
	rdb.HSet(ctx, old+"occ:cron:nightly:1", "id", "cron:nightly:1", "schedule", "nightly", "slot", 1, "outcome", "succeeded")
	rdb.ZAdd(ctx, old+"hist:nightly", redis.Z{Score: 1000, Member: "cron:nightly:1"})
	t.Cleanup(func() { rdb.Del(ctx, old+"lease") })

	var logs syncBuffer
	// Due half a day from now, so that no slot falls between the old
	// cursor, an hour ago, and the end of the test, whatever the time of
	// day: a slot due would raise the cursor past the one moved.
	nightly := idleSchedule()
	far := time.Now().UTC().Add(12 * time.Hour)
	nightly.Expr = fmt.Sprintf("%d %d * * *", far.Minute(), far.Hour())
	rt, err := runtime.New(registry.MustNew(nightly), runtime.Options{Redis: rdb, Namespace: ns, LeaseTTL: time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runUntilTheEnd(t, rt)
	waitFor(t, 10*time.Second, "the wait for the older version", func() bool { return strings.Contains(logs.String(), "older belfry version") })
	newKeys := store.NewKeys(ns)
	if n := rdb.Exists(ctx, newKeys.Cursors).Val(); n != 0 || rt.Scheduling() {
		t.Fatalf("the new version scheduled (%v, cursors %d) while the older one leads", rt.Scheduling(), n)
	}

	rdb.Del(ctx, old+"lease") // the older version's last replica stops
	waitFor(t, 10*time.Second, "the new version to schedule", rt.Scheduling)
	if got := rdb.HGet(ctx, newKeys.Cursors, "nightly").Val(); got != strconv.FormatInt(cursor, 10) {
		t.Errorf("cursor after the move %q, want the old one %d", got, cursor)
	}
	if got := rdb.HGet(ctx, newKeys.Occurrence("cron:nightly:1"), "outcome").Val(); got != "succeeded" {
		t.Errorf("the old record's outcome after the move: %q", got)
	}
	if got := rdb.ZScore(ctx, newKeys.History("nightly"), "cron:nightly:1").Val(); got != 1000 {
		t.Errorf("the old history entry after the move: %v", got)
	}
	if n := rdb.Exists(ctx, old+"cursors", old+"counters", old+"occ:cron:nightly:1", old+"hist:nightly").Val(); n != 0 {
		t.Errorf("%d old keys left after the move", n)
	}
	if v := rdb.Get(ctx, old+"lease").Val(); !strings.HasPrefix(v, "moved-to-hash-tagged-layout|") || rdb.PTTL(ctx, old+"lease").Val() > 0 {
		t.Errorf("old lease %q (TTL %v); want the tombstone, with no expiry", v, rdb.PTTL(ctx, old+"lease").Val())
	}
	counters, err := rt.Monitor().Counters(ctx)
	if err != nil || counters["nightly"].Succeeded != 41 {
		t.Errorf("counters after the move: %+v (%v), want 41 succeeded", counters["nightly"], err)
	}
	if n := strings.Count(logs.String(), "older belfry version"); n != 1 {
		t.Errorf("the wait logged %d times, want once:\n%s", n, logs.String())
	}
}

// scanCounter counts the SCAN commands a client sends.
type scanCounter struct{ n atomic.Int64 }

func (c *scanCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *scanCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "scan") {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *scanCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// The first leader of a namespace no older version ran in looks for the
// old layout's keys by name only: a SCAN for their patterns reads the
// whole keyspace, which on a large Redis holds the leader back from its
// first slots.
func TestAFirstLeaderWithNoOldLayoutScansNothing(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: sharedRedisAddr()})
	t.Cleanup(func() { rdb.Close() })
	var scans scanCounter
	rdb.AddHook(&scans)
	rt, err := runtime.New(registry.MustNew(idleSchedule()), runtime.Options{Redis: rdb, Namespace: uniq("fresh"), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	runUntilTheEnd(t, rt)
	waitFor(t, 10*time.Second, "the first leader to schedule", rt.Scheduling)
	if n := scans.n.Load(); n != 0 {
		t.Errorf("the first leader of a fresh namespace sent %d SCANs, want none", n)
	}
}

// In a rolling deploy the new version's workers write under the new names
// before its first leader moves the old layout: the move merges the old
// state into theirs (counters added, history entries of both kept) rather
// than leave the old behind, and it comes before the check for lost
// writes, so the old epoch is the one kept.
func TestOldKeyLayoutMergesWithWhatTheNewVersionWrote(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := sharedRedis(t)
	ns := uniq("ns")
	old, newKeys := ns+":", store.NewKeys(ns)
	rdb.HSet(ctx, old+"counters", "nightly", store.FormatCounters(map[string]int64{"succeeded": 41, "last_success": 1000}))
	rdb.ZAdd(ctx, old+"hist:nightly", redis.Z{Score: 1000, Member: "cron:nightly:1"})
	rdb.Set(ctx, old+"epoch", "epoch-of-the-old-version", 0)
	rdb.HSet(ctx, newKeys.Counters(), "nightly", store.FormatCounters(map[string]int64{"succeeded": 2, "last_success": 2000}))
	rdb.ZAdd(ctx, newKeys.History("nightly"), redis.Z{Score: 2000, Member: "cron:nightly:2"})

	rt, err := runtime.New(registry.MustNew(idleSchedule()), runtime.Options{Redis: rdb, Namespace: ns, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	runUntilTheEnd(t, rt)
	waitFor(t, 10*time.Second, "the new version to schedule", rt.Scheduling)
	counters, err := rt.Monitor().Counters(ctx)
	if err != nil || counters["nightly"].Succeeded != 43 {
		t.Errorf("counters after the move: %+v (%v), want 43 succeeded (41 + 2)", counters["nightly"], err)
	}
	if got := rdb.ZRange(ctx, newKeys.History("nightly"), 0, -1).Val(); !slices.Equal(got, []string{"cron:nightly:1", "cron:nightly:2"}) {
		t.Errorf("history after the move %v, want both versions' entries", got)
	}
	if got := rdb.Get(ctx, newKeys.Epoch).Val(); got != "epoch-of-the-old-version" {
		t.Errorf("epoch after the move %q, want the old version's", got)
	}
	if n := rdb.Exists(ctx, old+"counters", old+"hist:nightly", old+"epoch").Val(); n != 0 {
		t.Errorf("%d old keys left after the move", n)
	}
}

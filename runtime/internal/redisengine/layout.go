package redisengine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/store"
	"github.com/redis/go-redis/v9"
)

// The key layout before hash tags put a namespace's keys under "<ns>:"
// (store.LegacyKeyPrefix); they are now under "belfry:{<ns>}:"
// (store.KeyPrefix). A deployment upgraded in place finds its state (cursors,
// pauses, counters, records, family members) under the old names, which
// the first leader of the new version moves, once, before it reads
// anything. Only a single Redis can hold the old layout (it never ran on
// a cluster), so the move may touch keys of any slot.

// legacyTombstone is what the old lease key holds once the namespace moved
// to the new layout: a value no replica of an older version takes for its
// own, with no expiry, so that one still running follows it for ever
// rather than leading over the old keys beside the new version's leader.
const legacyTombstone = "moved-to-hash-tagged-layout|belfry|0"

// legacyNames are the namespace's keys that hold state, by their name
// under the prefix; legacyPatterns the families of such keys. What is
// not moved is rebuilt by the new version: the lease, its token and
// channel, the heartbeats and identities, the acknowledgement key.
var (
	legacyNames = []string{"cursors", "lastid", "stats", "counters", "paused", "resumed", "pausever", "epoch", "lost",
		"failing", "failing:backfilled", "active", "owner", "lease:handover", "fam:ver"}
	legacyPatterns = []string{"occ:*", "hist:*", "fam:{*"}
)

// legacyWitnesses are, beside legacyNames, old keys that any replica of
// an older version leaves in its namespace (its lease's token, its
// heartbeats): with none of them there, no older version ran there.
var legacyWitnesses = []string{"lease:token", "replicas", "registries"}

// anyLegacyState reports whether an older version left anything under
// old, by the keys of fixed names that go with every key of
// legacyPatterns (a record or history with the counters, a member with
// the families' version): one call, where the patterns' SCANs read the
// whole keyspace, for as long as a leader waits before its first slot.
func (e *Engine) anyLegacyState(ctx context.Context, old string) (bool, error) {
	keys := make([]string, 0, len(legacyNames)+len(legacyWitnesses))
	for _, name := range slices.Concat(legacyNames, legacyWitnesses) {
		keys = append(keys, old+name)
	}
	n, err := e.Client.Exists(ctx, keys...).Result()
	return n > 0, err
}

// layoutKey marks a namespace whose state is in the new layout.
func layoutKey(k store.Keys) string { return k.Prefix + "layout" }

// claimLegacyScript lets the holder of the new lease move the old layout:
// unless the old lease is held by a replica of an older version, it puts
// the tombstone there.
//
//	KEYS[1] the new lease, KEYS[2] the old lease
//	ARGV[1] the new lease's value, ARGV[2] the tombstone
//	returns {1} if claimed, {0} if the new lease is not held with that
//	value, {-1, holder} if an older version holds the old lease.
var claimLegacyScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0} end
local old = redis.call('GET', KEYS[2])
if old and old ~= ARGV[2] then return {-1, old} end
redis.call('SET', KEYS[2], ARGV[2])
return {1}
`)

// legacyMoveBatch bounds the keys one store.MergeKeysScript moves, so that no
// single call holds Redis for long.
const legacyMoveBatch = 200

// migrateLegacyLayout moves the namespace's state from the old layout
// (see above) if that has not been done: nothing on Redis Cluster, one
// GET once done. While a replica of an older version holds the old lease,
// it waits (an error that is engine.ErrNotLeader): that one still
// schedules, from the old keys.
func (e *Engine) migrateLegacyLayout(ctx context.Context, term string) error {
	if e.Cluster() || e.layoutDone.Load() {
		return nil
	}
	done, err := e.Client.Exists(ctx, layoutKey(e.Keys)).Result()
	if err != nil {
		return err
	}
	if done == 1 {
		e.layoutDone.Store(true)
		return nil
	}
	old := store.LegacyKeyPrefix(e.cfg.Namespace)
	err = e.moveLegacyLayout(ctx, term, old)
	if err != nil && strings.HasPrefix(err.Error(), "NOPERM") {
		// A Redis user kept out of the old names had nothing there.
		e.log.Warn("this Redis user may not touch the namespace's keys of the older layout, so nothing was moved from them; "+
			"grant ~"+old+"*, +scan, +type and +rename until an upgraded replica has led once if an earlier version ran with them",
			"namespace", e.cfg.Namespace, "err", err)
		e.layoutDone.Store(true)
		return nil
	}
	return err
}

// moveLegacyLayout does migrateLegacyLayout's work on the old names under
// old.
func (e *Engine) moveLegacyLayout(ctx context.Context, term, old string) error {
	res, err := claimLegacyScript.Run(ctx, e.Client, []string{e.Keys.Lease, old + "lease"}, term, legacyTombstone).Slice()
	if err != nil {
		return err
	}
	switch code, _ := res[0].(int64); code {
	case 0:
		return engine.ErrNotLeader
	case -1:
		holder, _ := res[1].(string)
		if prev := e.legacyHolder.Swap(&holder); prev == nil || *prev != holder {
			e.log.Warn("an older belfry version schedules this namespace from its old key layout; this replica schedules once it stops",
				"namespace", e.cfg.Namespace, "old_lease", old+"lease", "holder", holder)
		}
		return fmt.Errorf("%w: an older version holds %s (%s)", engine.ErrNotLeader, old+"lease", holder)
	}
	var pending []string
	moved := 0
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		keys := append([]string{e.Keys.Lease}, pending...)
		// Merged, not renamed only: in a rolling deploy, workers and
		// operators of the new version write counters, records, pauses
		// under the new names before the first new leader moves the rest.
		n, err := store.MergeKeysScript.Run(ctx, e.Client, keys, term, e.Keys.Counters()).Int()
		pending = pending[:0]
		if err != nil {
			return err
		}
		if n < 0 {
			return engine.ErrNotLeader
		}
		moved += n
		return nil
	}
	add := func(key string) error {
		pending = append(pending, key, e.Keys.Prefix+strings.TrimPrefix(key, old))
		if len(pending) >= 2*legacyMoveBatch {
			return flush()
		}
		return nil
	}
	olds := make([]string, len(legacyNames))
	for i, name := range legacyNames {
		olds[i] = old + name
	}
	// A deployment of the older version left a cursor, a counter or a
	// family's version: without any, there is nothing under the old names
	// to look for, and no SCAN of the whole keyspace is made.
	found, err := e.Client.Exists(ctx, olds...).Result()
	if err != nil || found == 0 {
		if err == nil {
			err = e.Client.Set(ctx, layoutKey(e.Keys), "hash-tagged", 0).Err()
		}
		if err == nil {
			e.layoutDone.Store(true)
		}
		return err
	}
	for _, key := range olds {
		if err := add(key); err != nil {
			return err
		}
	}
	patterns := legacyPatterns
	if found, err := e.anyLegacyState(ctx, old); err != nil {
		return err
	} else if !found {
		patterns = nil
	}
	for _, pattern := range patterns {
		iter := e.Client.Scan(ctx, 0, old+pattern, 1000).Iterator()
		for iter.Next(ctx) {
			if err := add(iter.Val()); err != nil {
				return err
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if err := e.Client.Set(ctx, layoutKey(e.Keys), "hash-tagged", 0).Err(); err != nil {
		return err
	}
	e.layoutDone.Store(true)
	if moved > 0 {
		e.log.Info("moved this namespace's state to the hash-tagged key layout", "namespace", e.cfg.Namespace,
			"keys", moved, "from", old+"*", "to", e.Keys.Prefix+"*")
	}
	return nil
}

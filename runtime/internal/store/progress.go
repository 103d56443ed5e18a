package store

import (
	"context"
	"strconv"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/redis/go-redis/v9"
)

var _ engine.Progress = (*Store)(nil)

// progressTTL is how long an occurrence's progress outlives its last
// write.
const progressTTL = engine.ProgressRetention

// Progress is the hash of an occurrence's checkpoint: cursor, done ("1"),
// items, total, gen, by, started_at, updated_at.
func (k Keys) Progress(id string) string { return k.Prefix + "progress:" + id }

// Unfinished is the hash scope -> the occurrence ID whose work the scope's
// next occurrence takes up (resume=next).
func (k Keys) Unfinished() string { return k.Prefix + "unfinished" }

// claimProgressScript raises an occurrence's claim generation.
// KEYS[1] the progress hash, KEYS[2] the unfinished hash.
// ARGV: scope ("" for none), by, now (unix ms), TTL (ms), the occurrence ID.
// Returns the hash's fields after the claim, as HGETALL does.
var claimProgressScript = redis.NewScript(`
redis.call('HINCRBY', KEYS[1], 'gen', 1)
redis.call('HSET', KEYS[1], 'by', ARGV[2])
redis.call('HSETNX', KEYS[1], 'started_at', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
if ARGV[1] ~= '' and redis.call('HGET', KEYS[1], 'done') ~= '1' then
	redis.call('HSET', KEYS[2], ARGV[1], ARGV[5])
end
return redis.call('HGETALL', KEYS[1])
`)

// saveProgressScript writes a checkpoint if its generation is the newest
// claim's. KEYS[1] the progress hash, KEYS[2] the unfinished hash.
// ARGV: gen, cursor, done ("1" or "0"), items, total, updated_at (unix ms),
// scope ("" for none), the occurrence ID, TTL (ms).
// Returns 1 when written, 0 when a newer claim fenced it.
var saveProgressScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'gen') ~= ARGV[1] then
	return 0
end
redis.call('HSET', KEYS[1], 'cursor', ARGV[2], 'done', ARGV[3], 'items', ARGV[4], 'total', ARGV[5], 'updated_at', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[9])
if ARGV[3] == '1' and ARGV[7] ~= '' and redis.call('HGET', KEYS[2], ARGV[7]) == ARGV[8] then
	redis.call('HDEL', KEYS[2], ARGV[7])
end
return 1
`)

// ClaimProgress makes this attempt the only writer of id's progress. With
// Acks on it counts once a replica has it (ErrNotAcked otherwise): a
// failover must not hand an older generation back, which would let the
// attempt it fenced save again.
func (s *Store) ClaimProgress(ctx context.Context, id, scope, by string, atMS int64) (engine.Checkpoint, error) {
	v, err := s.Acks.Run(ctx, s.rdb, claimProgressScript, []string{s.Keys.Progress(id), s.Keys.Unfinished()},
		scope, by, atMS, progressTTL.Milliseconds(), id).StringSlice()
	if err != nil {
		return engine.Checkpoint{}, err
	}
	h := make(map[string]string, len(v)/2)
	for i := 0; i+1 < len(v); i += 2 {
		h[v[i]] = v[i+1]
	}
	return parseCheckpoint(h), nil
}

// SaveProgress writes cp as id's progress, fenced by cp.Gen, and like
// ClaimProgress waits for Acks: a failover must not resume from a cursor
// older than work whose effects are already committed.
func (s *Store) SaveProgress(ctx context.Context, id, scope string, cp engine.Checkpoint) error {
	done := "0"
	if cp.Done {
		done = "1"
	}
	n, err := s.Acks.Run(ctx, s.rdb, saveProgressScript, []string{s.Keys.Progress(id), s.Keys.Unfinished()},
		cp.Gen, cp.Cursor, done, cp.Items, cp.Total, cp.UpdatedAt, scope, id, progressTTL.Milliseconds()).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return engine.ErrSuperseded
	}
	return nil
}

// Progresses reads the progress of ids.
func (s *Store) Progresses(ctx context.Context, ids []string) ([]engine.Checkpoint, []bool, error) {
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, s.Keys.Progress(id))
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	cps, ok := make([]engine.Checkpoint, len(ids)), make([]bool, len(ids))
	for i, c := range cmds {
		if h := c.Val(); len(h) > 0 {
			cps[i], ok[i] = parseCheckpoint(h), true
		}
	}
	return cps, ok, nil
}

// Unfinished is the scope's occurrence whose work is not done.
func (s *Store) Unfinished(ctx context.Context, scope string) (string, error) {
	id, err := s.rdb.HGet(ctx, s.Keys.Unfinished(), scope).Result()
	if err == redis.Nil {
		return "", nil
	}
	return id, err
}

func parseCheckpoint(h map[string]string) engine.Checkpoint {
	num := func(k string) int64 {
		n, _ := strconv.ParseInt(h[k], 10, 64)
		return n
	}
	return engine.Checkpoint{Cursor: h["cursor"], Done: h["done"] == "1", Items: num("items"), Total: num("total"),
		Gen: num("gen"), By: h["by"], StartedAt: num("started_at"), UpdatedAt: num("updated_at")}
}

package runtime

import "github.com/redis/go-redis/v9"

// Heartbeats use Redis's clock (TIME), not the replica's: replicas may be
// skewed, and a skewed heartbeat would make a live replica look dead. They
// ride on lease calls, at most once per TTL (ARGV[4] = "1"), and stale
// entries are pruned when the replica list is read, not on every beat: an
// idle replica's cost is a few commands a minute.
const heartbeatLua = `
if ARGV[4] == '1' then
  local now = redis.call('TIME')
  redis.call('ZADD', KEYS[3], now[1] * 1000 + math.floor(now[2] / 1000), ARGV[1])
end
`

// acquireScript takes the lease if it is free, or resumes it if it still
// holds the value this replica last had (a transient error made it step
// down, but nobody else took over). It also records a heartbeat.
//
//	KEYS[1] lease, KEYS[2] token counter, KEYS[3] replicas zset
//	ARGV[1] replica, ARGV[2] TTL ms, ARGV[3] previous value or "", ARGV[4] "1" to heartbeat
//	returns {token, value, pttl}: token > 0 when this replica now holds the
//	lease; otherwise value is the holder's and pttl its remaining life.
var acquireScript = redis.NewScript(heartbeatLua + `
local cur = redis.call('GET', KEYS[1])
if cur then
  if ARGV[3] ~= '' and cur == ARGV[3] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {tonumber(string.match(cur, '|(%d+)$')), cur, tonumber(ARGV[2])}
  end
  return {0, cur, redis.call('PTTL', KEYS[1])}
end
local token = redis.call('INCR', KEYS[2])
local value = ARGV[1] .. '|' .. token
redis.call('SET', KEYS[1], value, 'PX', ARGV[2])
return {token, value, tonumber(ARGV[2])}
`)

// renewScript extends the lease only if this replica still holds it
// (compare-and-PEXPIRE), and records a heartbeat.
//
//	KEYS[1] lease, KEYS[2] unused, KEYS[3] replicas zset
//	ARGV[1] replica, ARGV[2] TTL ms, ARGV[3] lease value, ARGV[4] "1" to heartbeat
//	returns 1 if renewed, 0 if the lease is someone else's or gone.
var renewScript = redis.NewScript(heartbeatLua + `
if redis.call('GET', KEYS[1]) == ARGV[3] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// releaseScript deletes the lease if this replica holds it
// (compare-and-DEL) and tells followers at once, so a graceful shutdown hands
// over without waiting for the TTL. It also removes the replica's heartbeat.
//
//	KEYS[1] lease, KEYS[2] released channel, KEYS[3] replicas zset
//	ARGV[1] replica, ARGV[2] lease value or ""
//	returns 1 if the lease was released.
var releaseScript = redis.NewScript(`
redis.call('ZREM', KEYS[3], ARGV[1])
if ARGV[2] ~= '' and redis.call('GET', KEYS[1]) == ARGV[2] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', KEYS[2], ARGV[1])
  return 1
end
return 0
`)

// liveReplicasScript prunes heartbeats older than the staleness limit and
// returns the live replicas.
//
//	KEYS[1] replicas zset
//	ARGV[1] staleness ms
var liveReplicasScript = redis.NewScript(`
local now = redis.call('TIME')
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now[1] * 1000 + math.floor(now[2] / 1000) - tonumber(ARGV[1]))
return redis.call('ZRANGE', KEYS[1], 0, -1)
`)

// recordLua writes one occurrence into the ledger: a hash per occurrence and
// a per-schedule zset index trimmed to the history limit. The outcome is
// set only if absent because a fast worker may already have recorded
// "running" or a result.
const recordLua = `
local function record(p, limit, ttl, name, r)
  local key = p .. 'occ:' .. r.id
  redis.call('HSET', key, 'id', r.id, 'schedule', name, 'slot', r.slot, 'manual', r.manual,
    'enqueued_at', r.at, 'count', r.count)
  redis.call('HSETNX', key, 'outcome', r.outcome)
  redis.call('EXPIRE', key, ttl)
  local index = p .. 'hist:' .. name
  redis.call('ZADD', index, r.score, r.id)
  local excess = redis.call('ZCARD', index) - limit
  if excess > 0 then
    local old = redis.call('ZPOPMIN', index, excess)
    for i = 1, #old, 2 do redis.call('DEL', p .. 'occ:' .. old[i]) end
  end
end
local function count(p, name, counts)
  for field, n in pairs(counts) do
    if string.sub(field, 1, 5) == 'last_' then
      redis.call('HSET', p .. 'stats', name .. ':' .. field, n)
    else
      redis.call('HINCRBY', p .. 'stats', name .. ':' .. field, n)
    end
  end
end
`

// commitScript is the leader's only write to scheduler state: for a batch of
// schedules it advances each cursor and records what happened to each slot.
// It is fenced: a replica that lost the lease (a paused zombie) changes
// nothing.
//
//	KEYS[1] lease
//	ARGV[1] lease value, ARGV[2] key prefix, ARGV[3] history limit,
//	ARGV[4] occurrence TTL s, ARGV[5] JSON [{name, cursor, last_id, recs, counts}]
//	returns 1 if committed, 0 if the lease is not held with that value.
var commitScript = redis.NewScript(recordLua + `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local p, limit, ttl = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
for _, s in ipairs(cjson.decode(ARGV[5])) do
  redis.call('HSET', p .. 'cursors', s.name, s.cursor)
  if s.last_id ~= '' then redis.call('HSET', p .. 'lastid', s.name, s.last_id) end
  for _, r in ipairs(s.recs) do record(p, limit, ttl, s.name, r) end
  count(p, s.name, s.counts)
end
return 1
`)

// initCursorsScript starts schedules seen for the first time from now (no
// run for the slot that passed just before the deploy), and notes when, so
// that a slot before it is never reported late. Fenced like commit.
//
//	KEYS[1] lease
//	ARGV[1] lease value, ARGV[2] cursors key, ARGV[3] cursor (unix s),
//	ARGV[4] stats key, ARGV[5..] names
//	returns 1 if written, 0 if the lease is not held with that value.
var initCursorsScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
for i = 5, #ARGV do
  if redis.call('HSETNX', ARGV[2], ARGV[i], ARGV[3]) == 1 then
    redis.call('HSET', ARGV[4], ARGV[i] .. ':first_seen', ARGV[3] * 1000)
  end
end
return 1
`)

// triggerRecordScript records a manual occurrence. Any replica may trigger,
// so it is not fenced; the enqueue before it is idempotent by task ID.
//
//	ARGV[1] key prefix, ARGV[2] history limit, ARGV[3] occurrence TTL s,
//	ARGV[4] JSON {name, recs, counts}
var triggerRecordScript = redis.NewScript(recordLua + `
local s = cjson.decode(ARGV[4])
for _, r in ipairs(s.recs) do record(ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), s.name, r) end
count(ARGV[1], s.name, s.counts)
return 1
`)

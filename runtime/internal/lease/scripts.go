package lease

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

// acquireScript takes the lease if it is free, or resumes it if the key
// holds a lease of this very instance: one it stepped down from after a
// transient error while nobody else took over, or one an earlier attempt
// created whose reply was lost (go-redis resends a command whose reply
// never came, and the resend must not mistake the new lease for someone
// else's). It also records a heartbeat.
//
//	KEYS[1] lease, KEYS[2] token counter, KEYS[3] replicas zset
//	ARGV[1] replica, ARGV[2] TTL ms, ARGV[3] instance ID, ARGV[4] "1" to heartbeat
//	returns {token, value, pttl}: token > 0 when this instance now holds the
//	lease; otherwise value is the holder's and pttl its remaining life.
var acquireScript = redis.NewScript(heartbeatLua + `
local mine = ARGV[1] .. '|' .. ARGV[3] .. '|'
local cur = redis.call('GET', KEYS[1])
if cur then
  local token = string.sub(cur, 1, #mine) == mine and string.match(string.sub(cur, #mine + 1), '^%d+$')
  if token then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {tonumber(token), cur, tonumber(ARGV[2])}
  end
  return {0, cur, redis.call('PTTL', KEYS[1])}
end
local token = redis.call('INCR', KEYS[2])
local value = mine .. token
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

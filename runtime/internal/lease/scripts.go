package lease

import "github.com/redis/go-redis/v9"

// Heartbeats use Redis's clock (TIME), not the replica's: replicas may be
// skewed, and a skewed heartbeat would make a live replica look dead. They
// ride on lease calls, at most once per TTL, and stale entries are pruned
// when the replica list is read, not on every beat: an idle replica's cost
// is a few commands a minute.
//
// Each beat also records which instance beat under the replica's name
// (KEYS[4], expiring with the heartbeat) and sets duplicate to the
// instance found there if it is another one and this instance has beaten
// before: another live process wrote under the same name since this one's
// last beat. A first beat does not count, since the other instance may be
// this replica's previous incarnation, now dead.
//
// A beat also records the process (pid and host) behind the replica name
// in KEYS[5], so the admin can name the process an operator would stop.
//
//	KEYS[3] replicas zset, KEYS[4] "<replicas>:<replica>" instance key,
//	KEYS[5] processes hash
//	ARGV[1] replica, ARGV[3] instance ID,
//	ARGV[4] "0" no beat, "1" this instance's first beat, "2" a later beat,
//	ARGV[5] heartbeat staleness ms (the instance key's life),
//	ARGV[6] "<pid> <host>"
const heartbeatLua = `
local duplicate = ''
if ARGV[4] ~= '0' then
  local now = redis.call('TIME')
  redis.call('ZADD', KEYS[3], now[1] * 1000 + math.floor(now[2] / 1000), ARGV[1])
  local other = redis.call('GET', KEYS[4])
  if ARGV[4] == '2' and other and other ~= ARGV[3] then
    duplicate = other
  end
  redis.call('SET', KEYS[4], ARGV[3], 'PX', ARGV[5])
  redis.call('HSET', KEYS[5], ARGV[1], ARGV[6])
end
`

// acquireScript takes the lease if it is free, or resumes it if the key
// holds a lease of this very instance: one it stepped down from after a
// transient error while nobody else took over, or one an earlier attempt
// created whose reply was lost (go-redis resends a command whose reply
// never came, and the resend must not mistake the new lease for someone
// else's). It also records a heartbeat. With ARGV[6] "1" (a replica
// cooling down after a handover) it only heartbeats and reports the holder.
//
//	KEYS[1] lease, KEYS[2] token counter, KEYS[3] replicas zset, KEYS[4] instance key,
//	KEYS[5] processes hash
//	ARGV[1] replica, ARGV[2] TTL ms, ARGV[3] instance ID, ARGV[4..6] heartbeat,
//	ARGV[7] "1" to hold off
//	returns {token, value, pttl, created, duplicate}: token > 0 when this
//	instance now holds the lease; otherwise value is the holder's and pttl
//	its remaining life. created is 1 when the token is new (INCR), 0 for a
//	resumed lease. duplicate is "" or another instance using this name.
var acquireScript = redis.NewScript(heartbeatLua + `
local mine = ARGV[1] .. '|' .. ARGV[3] .. '|'
local cur = redis.call('GET', KEYS[1])
if ARGV[7] == '1' then
  if cur then
    return {0, cur, redis.call('PTTL', KEYS[1]), 0, duplicate}
  end
  return {0, '', -2, 0, duplicate}
end
if cur then
  local token = string.sub(cur, 1, #mine) == mine and string.match(string.sub(cur, #mine + 1), '^%d+$')
  if token then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {tonumber(token), cur, tonumber(ARGV[2]), 0, duplicate}
  end
  return {0, cur, redis.call('PTTL', KEYS[1]), 0, duplicate}
end
local token = redis.call('INCR', KEYS[2])
local value = mine .. token
redis.call('SET', KEYS[1], value, 'PX', ARGV[2])
return {token, value, tonumber(ARGV[2]), 1, duplicate}
`)

// renewScript extends the lease only if this instance still holds it
// (compare-and-PEXPIRE), and records a heartbeat.
//
//	KEYS[1] lease, KEYS[2] unused, KEYS[3] replicas zset, KEYS[4] instance key,
//	KEYS[5] processes hash
//	ARGV[1] replica, ARGV[2] TTL ms, ARGV[3] instance ID, ARGV[4..6] heartbeat,
//	ARGV[7] lease value
//	returns {renewed, duplicate}: renewed is 1 if renewed, 0 if the lease is
//	someone else's or gone; duplicate as for acquireScript.
var renewScript = redis.NewScript(heartbeatLua + `
local renewed = 0
if redis.call('GET', KEYS[1]) == ARGV[7] then
  renewed = redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return {renewed, duplicate}
`)

// releaseScript deletes the lease if it is this instance's, whatever the
// instance believes (compare-and-DEL on the instance, not on the value it
// last held: a holder that stepped down after a failed renewal, or whose
// acquire landed after it gave up waiting, may still hold the key), and
// tells followers at once, publishing the released value, so a graceful
// shutdown hands over without waiting for the TTL. It also removes the
// replica's heartbeat, unless another instance beat under the same name
// since (it is alive, and its heartbeat is its own), and its process.
//
//	KEYS[1] lease, KEYS[2] released channel, KEYS[3] replicas zset, KEYS[4] instance key,
//	KEYS[5] processes hash
//	ARGV[1] replica, ARGV[2] instance ID
//	returns 1 if the lease was released.
var releaseScript = redis.NewScript(`
local owner = redis.call('GET', KEYS[4])
if not owner or owner == ARGV[2] then
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('DEL', KEYS[4])
  redis.call('HDEL', KEYS[5], ARGV[1])
end
local mine = ARGV[1] .. '|' .. ARGV[2] .. '|'
local cur = redis.call('GET', KEYS[1])
if cur and string.sub(cur, 1, #mine) == mine then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', KEYS[2], cur)
  return 1
end
return 0
`)

// liveReplicasScript prunes heartbeats older than the staleness limit,
// with their processes, and returns the live replicas and their processes.
//
//	KEYS[1] replicas zset, KEYS[2] processes hash
//	ARGV[1] staleness ms
//	returns {{replica...}, {process or false...}}
var liveReplicasScript = redis.NewScript(`
local now = redis.call('TIME')
local stale = now[1] * 1000 + math.floor(now[2] / 1000) - tonumber(ARGV[1])
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', stale)
for i = 1, #gone, 1000 do
  local part = {unpack(gone, i, math.min(i + 999, #gone))}
  redis.call('ZREM', KEYS[1], unpack(part))
  redis.call('HDEL', KEYS[2], unpack(part))
end
local live = redis.call('ZRANGE', KEYS[1], 0, -1)
if #live == 0 then return {live, {}} end
return {live, redis.call('HMGET', KEYS[2], unpack(live))}
`)

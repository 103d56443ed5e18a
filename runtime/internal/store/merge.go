package store

import "github.com/redis/go-redis/v9"

// MergeKeysScript moves keys to new names, fenced by a lease, keeping what
// is under both: a key whose new name is free is renamed; otherwise its
// content is merged into the new key, which wins where both hold the same
// thing (it is the newer write), and the old key is deleted. Hash fields
// are set where missing, except in the counters hash (ARGV[2]), whose
// counts are added and times merged as addCounter does; sorted-set members
// are added where missing; list items are appended (the new list's are
// the newer); set members are joined; a string of the new name is kept.
//
//	KEYS[1] the lease, then pairs of old and new names
//	ARGV[1] the lease's value, ARGV[2] the new counters hash's name
//	returns the number of old keys moved, or -1 if the lease is not held.
var MergeKeysScript = redis.NewScript(countersLua + `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local counterName = {}
for c, i in pairs(counterAt) do counterName[i] = c end
local n = 0
for i = 2, #KEYS, 2 do
  local old, new = KEYS[i], KEYS[i + 1]
  local kind = redis.call('TYPE', old)['ok']
  if kind ~= 'none' then
    n = n + 1
    if redis.call('EXISTS', new) == 0 then
      redis.call('RENAME', old, new)
    else
      if kind == 'hash' then
        local h = redis.call('HGETALL', old)
        for j = 1, #h - 1, 2 do
          if new == ARGV[2] then
            local into, from = readCounters(redis.call('HGET', new, h[j])), readCounters(h[j + 1])
            for k = 1, #from do
              if counterName[k] then addCounter(into, counterName[k], from[k]) else into[k] = (into[k] or 0) + from[k] end
            end
            redis.call('HSET', new, h[j], packCounters(into))
          else
            redis.call('HSETNX', new, h[j], h[j + 1])
          end
        end
      elseif kind == 'zset' then
        local z = redis.call('ZRANGE', old, 0, -1, 'WITHSCORES')
        for j = 1, #z - 1, 2 do redis.call('ZADD', new, 'NX', z[j + 1], z[j]) end
      elseif kind == 'list' then
        for _, v in ipairs(redis.call('LRANGE', old, 0, -1)) do redis.call('RPUSH', new, v) end
      elseif kind == 'set' then
        redis.call('SUNIONSTORE', new, new, old)
      end
      redis.call('DEL', old)
    end
  end
end
return n
`)

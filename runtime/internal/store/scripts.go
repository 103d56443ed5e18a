package store

import "github.com/redis/go-redis/v9"

// trimLua keeps a history index at its limit, deleting the records of the
// entries it drops.
const trimLua = `
local function trim(p, index, limit)
  local excess = redis.call('ZCARD', index) - limit
  if excess > 0 then
    local old = redis.call('ZPOPMIN', index, excess)
    for i = 1, #old, 2 do redis.call('DEL', p .. 'occ:' .. old[i]) end
  end
end
`

// atFieldLua names the field that holds a record's time: a missed,
// skipped or paused slot was never enqueued, so its record says when it
// was recorded, never an enqueue time.
const atFieldLua = `
local function atField(outcome)
  if outcome == 'missed' or outcome == 'skipped' or outcome == 'paused' or outcome == 'buffered' then return 'recorded_at' end
  return 'enqueued_at'
end
`

// recordLua writes one occurrence into the ledger: a hash per occurrence and
// a per-schedule zset index trimmed to the history limit. The outcome is
// set only if absent because a fast worker may already have recorded
// "running" or a result.
var recordLua = trimLua + countersLua + atFieldLua + `
local function record(p, limit, ttl, name, r)
  local key = p .. 'occ:' .. r.id
  local manual = '0'
  if r.manual then manual = '1' end
  redis.call('HSET', key, 'id', r.id, 'schedule', name, 'slot', r.slot, 'manual', manual,
    atField(r.outcome), r.at)
  redis.call('HSETNX', key, 'outcome', r.outcome)
  if r.actor then redis.call('HSET', key, 'actor', r.actor) end
  if r.member then redis.call('HSET', key, 'member', r.member) end
  redis.call('EXPIRE', key, ttl)
  local index = p .. 'hist:' .. name
  redis.call('ZADD', index, r.score, r.id)
  trim(p, index, limit)
end
local function count(p, name, counts)
  local t = readCounters(redis.call('HGET', p .. 'counters', name))
  for c, n in pairs(counts) do addCounter(t, c, n) end
  redis.call('HSET', p .. 'counters', name, packCounters(t))
end
`

// commitScript is the leader's write of scheduler state: for a batch of
// schedules it advances each cursor and records what happened to each slot.
// It is fenced: a replica that lost the lease (a paused zombie) changes
// nothing.
//
// It writes the batch's cursors, last IDs and counters with one read and
// one write per hash, and each record with an HSET, an EXPIRE and a ZADD
// (and an HSETNX only when a worker got to some record first), plus a
// ZCARD per schedule: when each schedule read and wrote each hash on its
// own, a commit of the 100k spike's records cost Redis markedly more a
// schedule (BENCHMARKS.md, "Limits in the code").
// A schedule may come more than once in a batch (a per-second schedule
// dispatched again while its last commit ran): each hash's value then
// follows the batch in order, as if each came in its own script.
//
//	KEYS[1] lease
//	ARGV[1] lease value, ARGV[2] key prefix, ARGV[3] unused (each Commit
//	carries its history limit), ARGV[4] occurrence TTL s, ARGV[5] JSON
//	[Commit]
//	returns 1 if committed, 0 if the lease is not held with that value.
var commitScript = redis.NewScript(trimLua + countersLua + atFieldLua + `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local p, ttl = ARGV[2], tonumber(ARGV[4])
local items = cjson.decode(ARGV[5])
if #items == 0 then return 1 end
local names, recKeys = {}, {}
for i, s in ipairs(items) do
  names[i] = s.name
  for _, r in ipairs(s.recs) do recKeys[#recKeys + 1] = p .. 'occ:' .. r.id end
end
local cursors, raised, lastIDs = {}, {}, {}
for i, c in ipairs(redis.call('HMGET', p .. 'cursors', unpack(names))) do cursors[names[i]] = tonumber(c) or false end
for _, s in ipairs(items) do
  -- Never lowered: the enqueue raised it already to the slot it put in
  -- asynq, and a commit that follows a failed enqueue (whose reply was
  -- lost, though it ran) must not send the next holder back before it.
  local cur = cursors[s.name]
  if not cur or s.cursor > cur then
    cursors[s.name], raised[s.name] = s.cursor, s.cursor
  end
  -- Nor is the last ID taken back: a commit that lands after a later
  -- enqueue's mark (the background commit of an earlier batch) carries an
  -- older one, and overlap=skip would then ask about the wrong occurrence.
  if s.last_id ~= '' and (not cur or s.cursor >= cur) then lastIDs[s.name] = s.last_id end
end
local function hsetAll(key, values)
  local args = {}
  for field, v in pairs(values) do
    args[#args + 1] = field
    args[#args + 1] = v
  end
  if #args > 0 then redis.call('HSET', key, unpack(args)) end
end
hsetAll(p .. 'cursors', raised)
hsetAll(p .. 'lastid', lastIDs)
-- A record's outcome is set only if absent, as a fast worker may have
-- recorded "running" or a result already; when no record of the batch
-- exists yet (the usual case) the outcome goes with the record's HSET.
-- In parts: unpack is bounded (a few thousand values), and a batch of
-- schedules catching up many slots each carries more records than that.
local fresh = #recKeys > 0
for i = 1, #recKeys, 1000 do
  if not fresh then break end
  fresh = redis.call('EXISTS', unpack(recKeys, i, math.min(i + 999, #recKeys))) == 0
end
local written = {}
for _, s in ipairs(items) do
  local index = p .. 'hist:' .. s.name
  for _, r in ipairs(s.recs) do
    local key = p .. 'occ:' .. r.id
    local manual = '0'
    if r.manual then manual = '1' end
    if fresh and not written[key] then
      redis.call('HSET', key, 'id', r.id, 'schedule', s.name, 'slot', r.slot, 'manual', manual,
        atField(r.outcome), r.at, 'outcome', r.outcome)
    else
      redis.call('HSET', key, 'id', r.id, 'schedule', s.name, 'slot', r.slot, 'manual', manual,
        atField(r.outcome), r.at)
      redis.call('HSETNX', key, 'outcome', r.outcome)
    end
    written[key] = true
    if r.actor then redis.call('HSET', key, 'actor', r.actor) end
    if r.error then redis.call('HSET', key, 'error', r.error) end
    if r.member then redis.call('HSET', key, 'member', r.member) end
    redis.call('EXPIRE', key, ttl)
    redis.call('ZADD', index, r.score, r.id)
  end
  if #s.recs > 0 then trim(p, index, s.limit) end
end
-- Counters: added, or for a time (last_...) kept at the latest, so that a
-- commit landing after a later one keeps the later; one value a schedule,
-- read and written once however often the schedule comes in the batch.
local counted, changes = {}, {}
for _, s in ipairs(items) do
  if next(s.counts) ~= nil then
    if changes[s.name] == nil then
      counted[#counted + 1] = s.name
      changes[s.name] = {}
    end
    local ch = changes[s.name]
    ch[#ch + 1] = s.counts
  end
end
if #counted > 0 then
  local old = redis.call('HMGET', p .. 'counters', unpack(counted))
  local set = {}
  for i, name in ipairs(counted) do
    local t = readCounters(old[i])
    for _, counts in ipairs(changes[name]) do
      for c, n in pairs(counts) do addCounter(t, c, n) end
    end
    set[name] = packCounters(t)
  end
  hsetAll(p .. 'counters', set)
end
return 1
`)

// initCursorsScript starts schedules seen for the first time from now (no
// run for the slot that passed just before the deploy), and notes when, so
// that a slot before it is never reported late. Fenced like commit.
//
//	KEYS[1] lease
//	ARGV[1] lease value, ARGV[2] cursors key, ARGV[3] cursor (unix s),
//	ARGV[4] counters key, ARGV[5..] names
//	returns 1 if written, 0 if the lease is not held with that value.
var initCursorsScript = redis.NewScript(countersLua + `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
for i = 5, #ARGV do
  if redis.call('HSETNX', ARGV[2], ARGV[i], ARGV[3]) == 1 then
    local t = readCounters(redis.call('HGET', ARGV[4], ARGV[i]))
    setCounter(t, 'first_seen', ARGV[3] * 1000)
    redis.call('HSET', ARGV[4], ARGV[i], packCounters(t))
  end
end
return 1
`)

// manualRecordScript records a manual occurrence. Any replica may trigger,
// so it is not fenced; the enqueue before it is idempotent by task ID.
//
//	KEYS[1] counters (names the namespace's slot)
//	ARGV[1] key prefix, ARGV[2] unused (the Commit carries its history
//	limit), ARGV[3] occurrence TTL s, ARGV[4] JSON Commit (its cursor is
//	ignored)
var manualRecordScript = redis.NewScript(recordLua + `
local s = cjson.decode(ARGV[4])
for _, r in ipairs(s.recs) do record(ARGV[1], s.limit, tonumber(ARGV[3]), s.name, r) end
count(ARGV[1], s.name, s.counts)
return 1
`)

// executionScript records one step of a worker's execution of an
// occurrence. A worker can get there before the leader's commit (the task
// ran at once) or long after the record was trimmed from the history (a
// retry hours later), so it writes the record and puts it in the history
// index itself, then trims the index as the commit does: a late retry's
// record is the oldest, trimmed at once, and never stays in Redis with no
// index pointing to it. An attempt older than the one recorded (a handler
// that outlived its timeout and returned while its retry runs) changes
// nothing but the counters. Counters are bumped either way: the attempt ran.
//
//	KEYS[1] occurrence hash, KEYS[2] counters, KEYS[3] history index
//	ARGV[1] record TTL s, ARGV[2] history limit, ARGV[3] key prefix,
//	ARGV[4] index score (slot, unix ms), ARGV[5] occurrence ID,
//	ARGV[6] counter to increment or "", ARGV[7] and ARGV[8] counters to
//	set to ARGV[9] or "", ARGV[9] unix ms, ARGV[10] attempt (0 for the
//	first), ARGV[11] schedule, ARGV[12..] field, value pairs
//	returns 1 if the record was written, 0 if a newer attempt's stands or
//	it was trimmed at once.
var executionScript = redis.NewScript(trimLua + countersLua + `
if ARGV[6] ~= '' or ARGV[7] ~= '' or ARGV[8] ~= '' then
  local t = readCounters(redis.call('HGET', KEYS[2], ARGV[11]))
  if ARGV[6] ~= '' then addCounter(t, ARGV[6], 1) end
  if ARGV[7] ~= '' then setCounter(t, ARGV[7], tonumber(ARGV[9])) end
  if ARGV[8] ~= '' then setCounter(t, ARGV[8], tonumber(ARGV[9])) end
  redis.call('HSET', KEYS[2], ARGV[11], packCounters(t))
end
local recorded = tonumber(redis.call('HGET', KEYS[1], 'attempt') or '-1')
if recorded > tonumber(ARGV[10]) then return 0 end
redis.call('HSET', KEYS[1], 'attempt', ARGV[10], unpack(ARGV, 12))
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[3], 'NX', ARGV[4], ARGV[5])
trim(ARGV[3], KEYS[3], tonumber(ARGV[2]))
return redis.call('EXISTS', KEYS[1])
`)

// forgetScript removes every trace of a schedule: cursor, last ID,
// counters, history index and records. Used for schedules removed from the
// code, so their state does not stay in Redis for ever. Counters in the
// old layout not yet folded (see settleCounters) are deleted by name:
// that hash holds a dozen fields of every schedule, and looking through it
// (HKEYS) held Redis far past the 5 ms any one call may block it for at
// 100,000 schedules (BENCHMARKS.md, "Limits in the code").
//
//	KEYS[1] cursors (names the namespace's slot)
//	ARGV[1] key prefix, ARGV[2] name, ARGV[3..] counter names
//	returns the number of keys and fields removed.
var forgetScript = redis.NewScript(bumpPausesLua + `
local p, name = ARGV[1], ARGV[2]
local unpaused = redis.call('HDEL', p .. 'paused', name) + redis.call('HDEL', p .. 'resumed', name)
if unpaused > 0 then bumpPauses(p .. 'pausever') end
local n = redis.call('HDEL', p .. 'cursors', name) + redis.call('HDEL', p .. 'lastid', name) + unpaused
  + redis.call('HDEL', p .. 'counters', name)
local fields = {}
for i = 3, #ARGV do fields[#fields + 1] = name .. ':' .. ARGV[i] end
if #fields > 0 then n = n + redis.call('HDEL', p .. 'stats', unpack(fields)) end
local index = p .. 'hist:' .. name
for _, id in ipairs(redis.call('ZRANGE', index, 0, -1)) do n = n + redis.call('DEL', p .. 'occ:' .. id) end
return n + redis.call('DEL', index)
`)

// pauseScript pauses a schedule with ARGV[2], a JSON Pause, and keeps the
// start ("at", its last field) of a pause already in place: pausing again
// to change the reason does not move the start of the window resumeScript
// keeps, so the slots due before the second pause stay paused.
//
//	KEYS[1] paused hash, KEYS[2] pause version
//	ARGV[1] name, ARGV[2] JSON Pause
var pauseScript = redis.NewScript(bumpPausesLua + `
bumpPauses(KEYS[2])
local old = redis.call('HGET', KEYS[1], ARGV[1])
local at = old and string.match(old, '"at":(%d+)}$')
local pause = ARGV[2]
if at then pause = string.gsub(pause, '"at":%d+}$', '"at":' .. at .. '}') end
return redis.call('HSET', KEYS[1], ARGV[1], pause)
`)

// resumeScript ends a pause and records when, in one step, so that a
// reader never sees a schedule unpaused without its resume time, and keeps
// the pause's window, so that a leader that reaches the slots due in it
// only after the resume records them paused rather than running them. It
// keeps every window the schedule's cursor has not yet passed (a schedule
// paused and resumed twice while no replica led has two), at most
// MaxPauseWindows of the newest. A window ends at Redis's time, not the
// resuming replica's: any replica may resume, however far its clock is
// off, and a window ending in the future would have the leader record
// slots due after the resume paused and never run them.
//
//	KEYS[1] paused hash, KEYS[2] counters, KEYS[3] resumed hash, KEYS[4] cursors,
//	KEYS[5] pause version
//	ARGV[1] name, ARGV[2] unix ms, ARGV[3] MaxPauseWindows
//	returns 1 if the schedule was paused.
var resumeScript = redis.NewScript(bumpPausesLua + countersLua + `
local pause = redis.call('HGET', KEYS[1], ARGV[1])
if not pause then return 0 end
bumpPauses(KEYS[5])
redis.call('HDEL', KEYS[1], ARGV[1])
local counters = readCounters(redis.call('HGET', KEYS[2], ARGV[1]))
setCounter(counters, 'last_resume', tonumber(ARGV[2]))
redis.call('HSET', KEYS[2], ARGV[1], packCounters(counters))
local ok, p = pcall(cjson.decode, pause)
if ok and type(p) == 'table' and tonumber(p['at']) then
  local passed = (tonumber(redis.call('HGET', KEYS[4], ARGV[1])) or 0) * 1000
  local keep, nums = {}, {}
  for n in string.gmatch(redis.call('HGET', KEYS[3], ARGV[1]) or '', '%S+') do nums[#nums + 1] = n end
  for i = 1, #nums - 1, 2 do
    if (tonumber(nums[i + 1]) or 0) > passed then keep[#keep + 1] = nums[i] .. ' ' .. nums[i + 1] end
  end
  local t = redis.call('TIME')
  keep[#keep + 1] = string.format('%d', tonumber(p['at'])) .. ' ' .. string.format('%d', t[1] * 1000 + math.floor(t[2] / 1000))
  while #keep > tonumber(ARGV[3]) do table.remove(keep, 1) end
  redis.call('HSET', KEYS[3], ARGV[1], table.concat(keep, ' '))
end
return 1
`)

// epochScript returns the store's epoch, creating it with the candidate if
// there is none (the first leader ever, or the first after Redis lost its
// data). Fenced.
//
//	KEYS[1] lease, KEYS[2] epoch
//	ARGV[1] lease value, ARGV[2] candidate epoch
//	returns {epoch, 1 if created now} or 0 if the lease is not held.
var epochScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local epoch = redis.call('GET', KEYS[2])
if epoch then return {epoch, 0} end
redis.call('SET', KEYS[2], ARGV[2])
return {ARGV[2], 1}
`)

package store

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/pipeline"
	"github.com/redis/go-redis/v9"
)

// A family's members live under "<ns>:fam:{<family>}:", the name in
// braces so that no family's keys are a prefix of another's (a name has
// no braces):
//
//	m        hash member -> "<since>|<paused>|<zone>|<expr>" (since: unix s
//	         before which no slot runs: when the member was created, or the
//	         floor its last change of zone or expression set; paused "1"
//	         or ""; zone and expr as given, empty meaning the family's)
//	b:<zone>|<expr>   zset of the members of one bucket (score 0, read
//	         in lexical pages when the bucket is due)
//	buckets  zset bucket -> version of the last change that put a member
//	         in it; a bucket is removed with its last member
//	c        hash member -> the leader's cursor "<slot> <utc offset>" (the
//	         last slot handled, unix s, and its zone's offset then), plus
//	         " <last enqueued slot>" for overlap=skip families
//	last     hash member -> "<slot> <outcome> <unix ms>[ <id>]", the
//	         member's newest occurrence (id only when not the slot's
//	         scheduled one)
//	paused   hash member -> JSON Pause of a paused member
//	bc       hash bucket -> the slot (unix s) through which every member
//	         of the bucket was handled, so a new leader reads a bucket's
//	         members only for slots after it
//
// and "<ns>:fam:ver" counts every change to any family's members, so the
// leader sees a change with one GET.

// FamilyKeys names one family's keys.
type FamilyKeys struct {
	Prefix  string // "<ns>:fam:{<family>}:"
	Members string
	Buckets string
	Cursors string
	Last    string
}

// Family returns the keys of family name.
func (k Keys) Family(name string) FamilyKeys {
	p := k.Prefix + "fam:{" + name + "}:"
	return FamilyKeys{Prefix: p, Members: p + "m", Buckets: p + "buckets", Cursors: p + "c", Last: p + "last"}
}

// Bucket is the zset of the members of one (zone, expression) bucket.
func (f FamilyKeys) Bucket(bucket string) string { return f.Prefix + "b:" + bucket }

// FamilyVersion counts changes to every family's members.
func (k Keys) FamilyVersion() string { return k.Prefix + "fam:ver" }

func parseMember(key, v string) (MemberValue, bool) {
	parts := strings.SplitN(v, "|", 4)
	if len(parts) != 4 {
		return MemberValue{}, false
	}
	since, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return MemberValue{}, false
	}
	return MemberValue{Key: key, Since: since, Paused: parts[1] == "1", Zone: parts[2], Expr: parts[3]}, true
}

// setMembersScript creates or updates members: each goes into the bucket
// of its zone and expression (leaving its old one, which is dropped from
// the bucket index when it empties), keeps its since (the time it was
// created), and marks its bucket changed for the leader. A member whose
// bucket changes takes the floor the caller computed for the change as
// its since, but only if the member and its cursor are still what the
// caller read; and a member written as keeping its bucket must still be
// in it. Otherwise nothing is written and the script returns {-1}, and
// the caller reads again (a leader handled one of its slots meanwhile, or
// another writer moved it).
//
// A paused member's pause (reason, actor, time) is kept beside it: written
// when it becomes paused, or always when ARGV[3] is "1" (a pause replaces
// the reason of an earlier one), and removed when it runs again.
//
//	KEYS[1] the namespace's family version counter
//	ARGV[1] the family's key prefix, ARGV[2] now (unix s), ARGV[3] "1" to
//	replace pauses, ARGV[4..] per member (setMemberArgs): member, paused
//	("1" or ""), zone, expr, JSON Pause, "1" if its bucket changes, its
//	value and cursor as read ("" if absent), and its Floor: since, task
//	key, since if the task exists (0 keeps since)
//	returns per member 1 if created, 0 if updated; {-1} if a changed
//	member or its cursor is not what was read.
var setMembersScript = redis.NewScript(`
local p, now, replace = ARGV[1], ARGV[2], ARGV[3]
-- A stored member's since and bucket.
local function split(v)
  local a = string.find(v, '|', 1, true)
  local b = string.find(v, '|', a + 1, true)
  return string.sub(v, 1, a - 1), string.sub(v, b + 1)
end
for i = 4, #ARGV, 11 do
  local key = ARGV[i]
  local cur = redis.call('HGET', p .. 'm', key)
  if ARGV[i+5] == '1' then
    if (cur or '') ~= ARGV[i+6] or (redis.call('HGET', p .. 'c', key) or '') ~= ARGV[i+7] then
      return {-1}
    end
  elseif cur then
    -- Written as keeping its bucket: it must still be in that bucket.
    local _, was = split(cur)
    if was ~= ARGV[i+2] .. '|' .. ARGV[i+3] then return {-1} end
  end
end
local ver = redis.call('INCR', KEYS[1])
local out = {}
for i = 4, #ARGV, 11 do
  local key, paused, bucket = ARGV[i], ARGV[i+1], ARGV[i+2] .. '|' .. ARGV[i+3]
  if paused ~= '1' then
    redis.call('HDEL', p .. 'paused', key)
  elseif replace == '1' or redis.call('HEXISTS', p .. 'paused', key) == 0 then
    redis.call('HSET', p .. 'paused', key, ARGV[i+4])
  end
  local since = now
  local old = redis.call('HGET', p .. 'm', key)
  if old then
    local was
    since, was = split(old)
    if was ~= bucket then
      redis.call('ZREM', p .. 'b:' .. was, key)
      if redis.call('EXISTS', p .. 'b:' .. was) == 0 then redis.call('ZREM', p .. 'buckets', was) end
      if ARGV[i+5] == '1' then
        local floor = ARGV[i+8]
        if ARGV[i+9] ~= '' and redis.call('EXISTS', ARGV[i+9]) == 1 then floor = ARGV[i+10] end
        if tonumber(floor) > tonumber(since) then since = floor end
      end
    end
    out[#out + 1] = 0
  else
    out[#out + 1] = 1
  end
  redis.call('HSET', p .. 'm', key, since .. '|' .. paused .. '|' .. bucket)
  redis.call('ZADD', p .. 'b:' .. bucket, 0, key)
  redis.call('ZADD', p .. 'buckets', ver, bucket)
end
return out
`)

// deleteMemberScript removes a member and everything the runtime holds
// about it but the records in the family's history.
//
//	KEYS[1] the family version counter
//	ARGV[1] the family's key prefix, ARGV[2] member
//	returns 1 if the member existed.
var deleteMemberScript = redis.NewScript(`
local p, key = ARGV[1], ARGV[2]
local old = redis.call('HGET', p .. 'm', key)
if not old then return 0 end
local a = string.find(old, '|', 1, true)
local b = string.find(old, '|', a + 1, true)
local was = string.sub(old, b + 1)
redis.call('ZREM', p .. 'b:' .. was, key)
if redis.call('EXISTS', p .. 'b:' .. was) == 0 then redis.call('ZREM', p .. 'buckets', was) end
redis.call('HDEL', p .. 'm', key)
redis.call('HDEL', p .. 'c', key)
redis.call('HDEL', p .. 'last', key)
redis.call('HDEL', p .. 'paused', key)
redis.call('INCR', KEYS[1])
return 1
`)

// setMembersTries bounds the reads and writes of one chunk whose members
// or cursors change in between: a cursor moves once per handled slot, so
// even per-second members settle within a few.
const setMembersTries = 8

// setMemberArgs is how many of setMembersScript's ARGV each member takes.
const setMemberArgs = 11

// MemberChunk bounds the members one script call or one read carries, so
// that no call blocks Redis for more than a few milliseconds, within the
// 5 ms any one call may block it for (BENCHMARKS.md, "Limits in the code").
const MemberChunk = 500

// SetMembers writes members in scripts of at most MemberChunk each and
// reports which were created. now is the creation time of new members;
// replacePauses makes a paused member's Pause replace the one kept. floor
// sets the since of members whose zone or expression changes (see
// ChangeFloor); without one, every member must keep the zone and
// expression it has (ErrMembersBusy if not).
func (s *Store) SetMembers(ctx context.Context, family string, now int64, replacePauses bool, ms []SetMember, floor ChangeFloor) ([]bool, error) {
	fk := s.Keys.Family(family)
	created := make([]bool, 0, len(ms))
	replace := "0"
	if replacePauses {
		replace = "1"
	}
	for start := 0; start < len(ms); start += MemberChunk {
		part := ms[start:min(start+MemberChunk, len(ms))]
		var res []int64
		for try := 0; ; try++ {
			if try == setMembersTries {
				return created, ErrMembersBusy
			}
			args := make([]any, 0, 3+setMemberArgs*len(part))
			args = append(args, fk.Prefix, now, replace)
			var olds, cursors []string
			if floor != nil {
				var err error
				if olds, cursors, err = s.rawMemberStates(ctx, fk, part); err != nil {
					return created, err
				}
			}
			for i, m := range part {
				paused, pause := "", ""
				if m.Paused {
					paused = "1"
					b, err := json.Marshal(m.Pause)
					if err != nil {
						return created, err
					}
					pause = string(b)
				}
				changed, f, oldRaw, curRaw := "", Floor{}, "", ""
				if floor != nil && olds[i] != "" {
					old, ok := parseMember(m.Key, olds[i])
					if ok && BucketOf(old.Zone, old.Expr) != BucketOf(m.Zone, m.Expr) {
						cur, hasCursor := engine.ParseCursor(cursors[i])
						changed, f, oldRaw, curRaw = "1", floor(m, old, cur, hasCursor), olds[i], cursors[i]
					}
				}
				args = append(args, m.Key, paused, m.Zone, m.Expr, pause, changed, oldRaw, curRaw, f.Since, floorTaskKey(f), f.SinceIfTask)
			}
			var err error
			res, err = s.Acks.Run(ctx, s.rdb, setMembersScript, []string{s.Keys.FamilyVersion()}, args...).Int64Slice()
			if err != nil {
				return created, err
			}
			if len(res) != 1 || res[0] != -1 {
				break
			}
			if floor == nil {
				return created, ErrMembersBusy // what the caller read is stale: its to read again
			}
		}
		for _, n := range res {
			created = append(created, n == 1)
		}
	}
	return created, nil
}

// rawMemberStates reads ms's stored values and cursors as they are stored
// ("" where absent), in one round trip.
func (s *Store) rawMemberStates(ctx context.Context, fk FamilyKeys, ms []SetMember) (values, cursors []string, err error) {
	keys := make([]string, len(ms))
	for i, m := range ms {
		keys[i] = m.Key
	}
	var vcmd, ccmd *redis.SliceCmd
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		vcmd, ccmd = p.HMGet(ctx, fk.Members, keys...), p.HMGet(ctx, fk.Cursors, keys...)
		return nil
	}); err != nil {
		return nil, nil, err
	}
	values, cursors = make([]string, len(keys)), make([]string, len(keys))
	for i, v := range vcmd.Val() {
		values[i], _ = v.(string)
	}
	for i, v := range ccmd.Val() {
		cursors[i], _ = v.(string)
	}
	return values, cursors, nil
}

// DeleteMember removes a member and reports whether it existed.
func (s *Store) DeleteMember(ctx context.Context, family, key string) (bool, error) {
	n, err := s.Acks.Run(ctx, s.rdb, deleteMemberScript, []string{s.Keys.FamilyVersion()}, s.Keys.Family(family).Prefix, key).Int()
	return n == 1, err
}

// Members reads members by key, in chunks; ok is false for unknown ones.
func (s *Store) Members(ctx context.Context, family string, keys []string) ([]MemberValue, []bool, error) {
	fk := s.Keys.Family(family)
	out, ok := make([]MemberValue, len(keys)), make([]bool, len(keys))
	for start := 0; start < len(keys); start += MemberChunk {
		vals, err := s.rdb.HMGet(ctx, fk.Members, keys[start:min(start+MemberChunk, len(keys))]...).Result()
		if err != nil {
			return nil, nil, err
		}
		for i, v := range vals {
			if str, isStr := v.(string); isStr {
				out[start+i], ok[start+i] = parseMember(keys[start+i], str)
			}
		}
	}
	return out, ok, nil
}

// ScanMembers returns a page of at most limit members whose keys contain
// substr ("" for all), in no particular order, and the cursor of the
// next page ("" after the last); start with cursor "". Following the
// cursors lists each member present from the first page to the last
// exactly once (memberpages.go says how). A page may hold fewer than
// limit when few keys match: it reads at most memberPageReads times limit
// entries (a compact hash is read whole), in calls that each read at most
// memberPageChunk.
func (s *Store) ScanMembers(ctx context.Context, family, cursor, substr string, limit int) ([]MemberValue, string, error) {
	at, err := parseMemberPageCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	limit = max(limit, 1)
	var page []MemberValue
	for budget := memberPageReads * limit; budget > 0; {
		// Inside a range read in part, one bucket a step: see memberpages.go.
		count := memberScanStep
		if len(at.listed) > 0 {
			count = 1
		}
		reply, err := memberPageScript.Run(ctx, s.rdb, []string{s.Keys.Family(family).Members},
			at.scan, count, substr, limit-len(page), min(budget, memberPageChunk)).Result()
		if err != nil {
			return nil, "", err
		}
		read, steps, err := parseMemberSteps(reply)
		if err != nil {
			return nil, "", err
		}
		var full bool
		if page, full = at.take(page, steps, limit); full || at.done() {
			break
		}
		budget -= max(read, 1)
	}
	if at.done() {
		return page, "", nil
	}
	return page, at.String(), nil
}

// MemberCount is the number of a family's members.
func (s *Store) MemberCount(ctx context.Context, family string) (int64, error) {
	return s.rdb.HLen(ctx, s.Keys.Family(family).Members).Result()
}

// FamilyVersion reads the change counter of every family's members.
func (s *Store) FamilyVersion(ctx context.Context) (int64, error) {
	v, err := s.rdb.Get(ctx, s.Keys.FamilyVersion()).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

// BucketsChangedAfter returns the family's buckets changed after version
// (every bucket for version 0... or -1).
func (s *Store) BucketsChangedAfter(ctx context.Context, family string, version int64) ([]BucketVersion, error) {
	zs, err := s.rdb.ZRangeByScoreWithScores(ctx, s.Keys.Family(family).Buckets, &redis.ZRangeBy{
		Min: "(" + strconv.FormatInt(version, 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, err
	}
	out := make([]BucketVersion, len(zs))
	for i, z := range zs {
		out[i] = BucketVersion{Bucket: z.Member.(string), Version: int64(z.Score)}
	}
	return out, nil
}

// BucketPage returns up to n member keys of a bucket that sort after
// after ("" for the first page).
func (s *Store) BucketPage(ctx context.Context, family, bucket, after string, n int) ([]string, error) {
	min := "-"
	if after != "" {
		min = "(" + after
	}
	return s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: s.Keys.Family(family).Bucket(bucket), Start: min, Stop: "+",
		ByLex: true, Count: int64(n)}).Result()
}

// MemberStates reads the members and their cursors in one pipelined round
// trip (keys at most a few MemberChunks).
func (s *Store) MemberStates(ctx context.Context, family string, keys []string) ([]MemberValue, []bool, []MemberCursor, []bool, error) {
	fk := s.Keys.Family(family)
	var mcmds, ccmds []*redis.SliceCmd
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for start := 0; start < len(keys); start += MemberChunk {
			part := keys[start:min(start+MemberChunk, len(keys))]
			mcmds = append(mcmds, p.HMGet(ctx, fk.Members, part...))
			ccmds = append(ccmds, p.HMGet(ctx, fk.Cursors, part...))
		}
		return nil
	}); err != nil {
		return nil, nil, nil, nil, err
	}
	ms, mok := make([]MemberValue, len(keys)), make([]bool, len(keys))
	cs, cok := make([]MemberCursor, len(keys)), make([]bool, len(keys))
	for chunk := range mcmds {
		base := chunk * MemberChunk
		for i, v := range mcmds[chunk].Val() {
			if str, ok := v.(string); ok {
				ms[base+i], mok[base+i] = parseMember(keys[base+i], str)
			}
		}
		for i, v := range ccmds[chunk].Val() {
			if str, ok := v.(string); ok {
				cs[base+i], cok[base+i] = engine.ParseCursor(str)
			}
		}
	}
	return ms, mok, cs, cok, nil
}

// familyCommitScript is the leader's write of a family's state after it
// enqueued a bucket's page: each member's cursor and newest occurrence,
// the family's records and counters. A member deleted meanwhile gets no
// cursor back. Fenced, like commitScript.
//
//	KEYS[1] lease
//	ARGV[1] lease value, ARGV[2] namespace key prefix, ARGV[3] history
//	limit, ARGV[4] occurrence TTL s, ARGV[5] the family's key prefix,
//	ARGV[6] JSON Commit of the family (records and counts; cursor
//	ignored), ARGV[7] JSON [MemberCommit], ARGV[8] a bucket and ARGV[9]
//	its new cursor, the slot through which every member was handled
//	("" to leave it)
//	returns 1 if committed, 0 if the lease is not held with that value.
var familyCommitScript = redis.NewScript(recordLua + `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local p, limit, ttl, fp = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
for _, m in ipairs(cjson.decode(ARGV[7])) do
  if redis.call('HEXISTS', fp .. 'm', m.m) == 1 then
    redis.call('HSET', fp .. 'c', m.m, m.c)
    if m.l ~= '' then
      local old = redis.call('HGET', fp .. 'last', m.m)
      if not old or tonumber(string.match(old, '^%-?%d+')) < m.s then redis.call('HSET', fp .. 'last', m.m, m.l) end
    end
  end
end
if ARGV[9] ~= '' then redis.call('HSET', fp .. 'bc', ARGV[8], ARGV[9]) end
local s = cjson.decode(ARGV[6])
for _, r in ipairs(s.recs) do record(p, limit, ttl, s.name, r) end
count(p, s.name, s.counts)
return 1
`)

// CommitFamily writes a family's step, in fenced scripts of at most
// MemberChunk members each; the records and counts go with the first, the
// bucket's cursor (when bucketCursor is not "") with the last.
func (s *Store) CommitFamily(ctx context.Context, leaseValue, family string, fam Commit, ms []MemberCommit, bucket, bucketCursor string) error {
	fk := s.Keys.Family(family)
	for start := 0; start == 0 || start < len(ms); start += MemberChunk {
		part := ms[start:min(start+MemberChunk, len(ms))]
		if part == nil {
			part = []MemberCommit{}
		}
		mj, err := json.Marshal(part)
		if err != nil {
			return err
		}
		fj := appendCommitJSON(&fam, nil)
		bc := ""
		if start+MemberChunk >= len(ms) {
			bc = bucketCursor
		}
		ok, err := familyCommitScript.Run(ctx, s.rdb, []string{s.Keys.Lease}, leaseValue, s.Keys.Prefix,
			s.HistoryLimit, int(s.RecordTTL.Seconds()), fk.Prefix, fj, mj, bucket, bc).Int()
		if err != nil {
			return err
		}
		if ok != 1 {
			return ErrNotLeader
		}
		fam = Commit{Name: fam.Name}
	}
	return nil
}

// setLastScript records a member's newest occurrence from a worker or a
// manual run: only for a member that still exists, and only when the slot
// is at least the one recorded.
//
//	KEYS[1] the family's last hash (names the namespace's slot)
//	ARGV[1] the family's key prefix, ARGV[2] member, ARGV[3] slot (unix
//	s), ARGV[4] value
var setLastScript = redis.NewScript(`
local fp, key = ARGV[1], ARGV[2]
if redis.call('HEXISTS', fp .. 'm', key) == 0 then return 0 end
local old = redis.call('HGET', fp .. 'last', key)
if old and tonumber(string.match(old, '^%-?%d+')) > tonumber(ARGV[3]) then return 0 end
redis.call('HSET', fp .. 'last', key, ARGV[4])
return 1
`)

// SetMemberLast records a member's newest occurrence; see setLastScript.
func (s *Store) SetMemberLast(ctx context.Context, family, key string, l MemberLast) error {
	return setLastScript.Run(ctx, s.rdb, []string{s.Keys.Family(family).Last}, s.Keys.Family(family).Prefix, key, l.Slot, EncodeLast(l)).Err()
}

// MemberLasts reads members' newest occurrences; ok is false for none.
func (s *Store) MemberLasts(ctx context.Context, family string, keys []string) ([]MemberLast, []bool, error) {
	out, ok := make([]MemberLast, len(keys)), make([]bool, len(keys))
	for start := 0; start < len(keys); start += MemberChunk {
		vals, err := s.rdb.HMGet(ctx, s.Keys.Family(family).Last, keys[start:min(start+MemberChunk, len(keys))]...).Result()
		if err != nil {
			return nil, nil, err
		}
		for i, v := range vals {
			if str, isStr := v.(string); isStr {
				out[start+i], ok[start+i] = engine.ParseLast(str)
			}
		}
	}
	return out, ok, nil
}

// BucketCursors reads the cursors of buckets; 0 where none.
func (s *Store) BucketCursors(ctx context.Context, family string, buckets []string) ([]int64, error) {
	out := make([]int64, len(buckets))
	fk := s.Keys.Family(family)
	for start := 0; start < len(buckets); start += MemberChunk {
		vals, err := s.rdb.HMGet(ctx, fk.Prefix+"bc", buckets[start:min(start+MemberChunk, len(buckets))]...).Result()
		if err != nil {
			return nil, err
		}
		for i, v := range vals {
			if str, ok := v.(string); ok {
				out[start+i], _ = strconv.ParseInt(str, 10, 64)
			}
		}
	}
	return out, nil
}

// MemberPauses reads the pauses of members; nil where none is kept.
func (s *Store) MemberPauses(ctx context.Context, family string, keys []string) ([]*Pause, error) {
	out := make([]*Pause, len(keys))
	for start := 0; start < len(keys); start += MemberChunk {
		vals, err := s.rdb.HMGet(ctx, s.Keys.Family(family).Prefix+"paused", keys[start:min(start+MemberChunk, len(keys))]...).Result()
		if err != nil {
			return nil, err
		}
		for i, v := range vals {
			if str, ok := v.(string); ok {
				var p Pause
				if json.Unmarshal([]byte(str), &p) == nil {
					out[start+i] = &p
				}
			}
		}
	}
	return out, nil
}

// forgetFamily removes the keys of a family that is no longer declared:
// UNLINK, so that a hash of 100,000 members is freed off Redis's main
// thread.
func (s *Store) forgetFamily(ctx context.Context, family string) (int64, error) {
	fk := s.Keys.Family(family)
	buckets, err := s.rdb.ZRange(ctx, fk.Buckets, 0, -1).Result()
	if err != nil {
		return 0, err
	}
	keys := []string{fk.Members, fk.Buckets, fk.Cursors, fk.Last, fk.Prefix + "paused", fk.Prefix + "bc"}
	for _, b := range buckets {
		keys = append(keys, fk.Bucket(b))
	}
	return s.rdb.Unlink(ctx, keys...).Result()
}

// floorTaskKey is the asynq hash of a floor's task, "" for none.
func floorTaskKey(f Floor) string {
	if f.TaskID == "" {
		return ""
	}
	return pipeline.TaskKey(f.Queue, f.TaskID)
}

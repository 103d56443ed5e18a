package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Every schedule's counters are one field of one hash:
//
//	<ns>:counters  hash schedule -> "<n>,<n>,...": the counters of
//	               CounterLayout, in its order, as decimal integers
//
// One field a schedule, not one a counter: the unpaged schedule list reads
// thirteen counters of every schedule, and at 100,000 schedules the 1.3
// million fields of a hash of "<schedule>:<counter>" (the layout before,
// <ns>:stats) cost Redis several times what the 100,000 fields of this one
// cost, and the replies were 1.3 million strings for the service to
// decode. A write parses and re-forms one short string instead of touching
// two fields, a small part of what a commit costs Redis a schedule
// (BENCHMARKS.md, "Limits in the code").
//
// Decimal, not binary: Redis's struct library would pack faster, but the
// in-process Redis of the demo has none, and redis-cli shows a decimal
// value as it is.
//
// The layout only grows at its end. A value with fewer numbers (written
// before a counter was added) reads 0 for the missing ones; one with more
// (written by a newer version) keeps them when this version rewrites it.

// CounterLayout names the counters of a value, in their order: every
// counter a schedule can have, one per outcome among them (only some are
// counted today). Counters named "last_..." and "first_seen" are times
// (unix ms), the others counts.
var CounterLayout = []string{
	"enqueued", "manual", "missed", "skipped", "paused", "succeeded", "failed",
	"last_enqueue", "last_success", "last_failure", "first_seen", "last_resume", "last_slot_success",
	"running", "retrying", "lost", "buffered", "replaced", "continued",
}

// Counters is the hash of every schedule's counters.
func (k Keys) Counters() string { return k.Prefix + "counters" }

// counterPosition maps a counter's name to its index in CounterLayout; the
// scripts ignore any other name.
var counterPosition = func() map[string]int {
	m := make(map[string]int, len(CounterLayout))
	for i, c := range CounterLayout {
		m[c] = i
	}
	return m
}()

// countersLua reads and writes counter values in scripts:
//
//	readCounters(v)       a table of at least #CounterLayout numbers, 0 for
//	                      a nil v or a missing number
//	packCounters(t)       the value of t
//	addCounter(t, c, n)   a count plus n; a last_... time kept at the later
//	                      of the two, so a commit landing after a later one
//	                      keeps the later; first_seen at the earlier (a
//	                      fold of both layouts' values)
//	setCounter(t, c, n)   c is n
//
// The common case is parsed and formatted by one string.match and one
// string.format; a value of another length takes the slower gmatch.
var countersLua = func() string {
	var at, pattern, format []string
	for i, c := range CounterLayout {
		at = append(at, fmt.Sprintf("[%q] = %d", c, i+1))
		pattern = append(pattern, "(%-?%d+)")
		format = append(format, "%d")
	}
	return fmt.Sprintf(`
local counterAt = {%s}
local counterN = %d
local function readCounters(v)
  local t = {}
  if v then
    t = {string.match(v, '^%s$')}
    if #t == 0 then
      for x in string.gmatch(v, '[^,]+') do t[#t + 1] = x end
    end
  end
  for i = 1, math.max(#t, counterN) do t[i] = tonumber(t[i]) or 0 end
  return t
end
local function packCounters(t)
  local v = string.format('%s', unpack(t, 1, counterN))
  for i = counterN + 1, #t do v = v .. ',' .. string.format('%%d', t[i]) end
  return v
end
local function addCounter(t, c, n)
  local i = counterAt[c]
  if not i then return end
  if string.sub(c, 1, 5) == 'last_' then
    if n > t[i] then t[i] = n end
  elseif c == 'first_seen' then
    if t[i] == 0 or (n ~= 0 and n < t[i]) then t[i] = n end
  else
    t[i] = t[i] + n
  end
end
local function setCounter(t, c, n)
  local i = counterAt[c]
  if i then t[i] = n end
end
`, strings.Join(at, ", "), len(CounterLayout), strings.Join(pattern, ","), strings.Join(format, ","))
}()

// legacyFoldScript moves one HSCAN step of the old counters hash (<ns>:stats,
// "<schedule>:<counter>" -> value) into the counters hash, in one script,
// so that a reader sees each counter in one hash or the other, never both
// or neither. Counts are added, times merged as addCounter does. A counter
// this version does not know is dropped: nothing reads it.
//
//	KEYS[1] the old counters hash (names the namespace's slot)
//	ARGV[1] key prefix, ARGV[2] HSCAN cursor, ARGV[3] HSCAN count
//	returns the next cursor, "0" when the pass is over.
var legacyFoldScript = redis.NewScript(countersLua + `
local legacy, packed = ARGV[1] .. 'stats', ARGV[1] .. 'counters'
local step = redis.call('HSCAN', legacy, ARGV[2], 'COUNT', ARGV[3])
local found, names, byName, seen = step[2], {}, {}, {}
for i = 1, #found - 1, 2 do
  local field, value = found[i], found[i + 1]
  local at = string.find(field, ':[^:]*$')
  if not seen[field] then
    seen[field] = true
    seen[#seen + 1] = field
    if at then
      local name = string.sub(field, 1, at - 1)
      if not byName[name] then
        byName[name] = {}
        names[#names + 1] = name
      end
      local list = byName[name]
      list[#list + 1] = {string.sub(field, at + 1), tonumber(value) or 0}
    end
  end
end
if #names > 0 then
  local old = redis.call('HMGET', packed, unpack(names))
  local set = {}
  for i, name in ipairs(names) do
    local t = readCounters(old[i])
    for _, c in ipairs(byName[name]) do addCounter(t, c[1], c[2]) end
    set[#set + 1] = name
    set[#set + 1] = packCounters(t)
  end
  redis.call('HSET', packed, unpack(set))
end
if #seen > 0 then redis.call('HDEL', legacy, unpack(seen)) end
return step[1]
`)

// legacyFoldCount is the fields one fold step asks HSCAN for. HSCAN
// returns them in the hash's order, a field of about as many schedules,
// each value read and written, so a step costs Redis in proportion to its
// count: legacyFoldCount keeps a step under the 5 ms any one call may
// block Redis for, where 500 went past it (BENCHMARKS.md, "Limits in the
// code").
const legacyFoldCount = 100

// settleCounters folds any counters in the old layout into the counters
// hash before a read of it, so that the read sees every counter written
// before it began (see legacyFoldScript). After an upgrade from the old
// layout the first reads fold them all, in steps that each stay under the
// 5 ms budget (tens of seconds in all at 100,000 schedules): a read whose
// deadline comes first fails as slow, and the next read goes on where the
// fold stopped, the fields already moved being gone from the old hash. A
// replica of an older version still running writes a few, which the next
// read folds. Every read costs one EXISTS more. Folds by several readers
// at once are harmless: each field moves once.
func (s *Store) settleCounters(ctx context.Context) error {
	return s.settleCountersWith(ctx, nil)
}

// settleCountersWith is settleCounters with more commands, queued by also,
// in the round trip of its EXISTS.
func (s *Store) settleCountersWith(ctx context.Context, also func(redis.Pipeliner)) error {
	var exists *redis.IntCmd
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		exists = p.Exists(ctx, s.Keys.Stats)
		if also != nil {
			also(p)
		}
		return nil
	}); err != nil || exists.Val() == 0 {
		return err
	}
	cursor := "0"
	for {
		next, err := legacyFoldScript.Run(ctx, s.rdb, []string{s.Keys.Stats}, s.Keys.Prefix, cursor, legacyFoldCount).Text()
		if err != nil {
			return err
		}
		if cursor = next; cursor == "0" {
			return nil
		}
	}
}

// counterPicker reads some counters out of values: want[i] is the index in
// the result of the layout's i-th counter, -1 if it is not asked for.
type counterPicker struct{ want []int }

func pickCounters(fields []string) counterPicker {
	want := slices.Repeat([]int{-1}, len(CounterLayout))
	for j, f := range fields {
		if i, ok := counterPosition[f]; ok {
			want[i] = j
		}
	}
	return counterPicker{want: want}
}

// into parses value into out (len = the fields asked for), without
// allocating: the unpaged list parses 100,000 of them.
func (p counterPicker) into(value string, out []int64) {
	for i := 0; i < len(p.want) && value != ""; i++ {
		number := value
		if comma := strings.IndexByte(value, ','); comma >= 0 {
			number, value = value[:comma], value[comma+1:]
		} else {
			value = ""
		}
		if j := p.want[i]; j >= 0 {
			out[j], _ = strconv.ParseInt(number, 10, 64)
		}
	}
}

// everyCounter picks every counter of the layout, in its order.
var everyCounter = pickCounters(CounterLayout)

// counterRows returns n rows of len(fields) counters, in one allocation.
func counterRows(n int, fields []string) [][]int64 {
	rows := make([][]int64, n)
	flat := make([]int64, n*len(fields))
	for i := range rows {
		rows[i] = flat[i*len(fields) : (i+1)*len(fields)]
	}
	return rows
}

// ParseCounters reads every counter of a stored value, by name, leaving
// out those at 0.
func ParseCounters(value string) map[string]int64 {
	vals := make([]int64, len(CounterLayout))
	everyCounter.into(value, vals)
	out := map[string]int64{}
	for i, v := range vals {
		if v != 0 {
			out[CounterLayout[i]] = v
		}
	}
	return out
}

// FormatCounters is the stored value of the given counters, by name; for
// tests and tools that write state directly.
func FormatCounters(counters map[string]int64) string {
	parts := make([]string, len(CounterLayout))
	for i, c := range CounterLayout {
		parts[i] = strconv.FormatInt(counters[c], 10)
	}
	return strings.Join(parts, ",")
}

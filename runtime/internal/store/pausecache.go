package store

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// The leader reads every due schedule's pause state when its slot comes
// due: for a 100,000-schedule spike that was 800 HMGETs of 250 fields, and
// a round trip before each dispatch's first enqueue. Pauses are rare and
// change rarely, so the store keeps a copy of the two hashes (Paused and
// Resumed) and checks it with one small call: every script that writes
// either hash sets Keys.PauseVersion anew in the same step, and the copy is
// current while the version and both hashes' lengths are those it was read
// with. A version that cannot come back (Redis's time and a count), read
// with the store's epoch (which a loss of Redis's data changes), keeps a
// copy from passing for current after Redis loses or restores its data; the
// lengths catch a pause or resume written by a replica of a release that
// does not set the version, during a rolling upgrade.
//
// The copy is kept only while the two hashes hold at most
// pauseCacheFields fields between them, so that reading them whole never
// holds Redis long; past that every read goes to the names' fields, as it
// always did.

// bumpPausesLua sets a pause version no earlier one had: Redis's time, and
// a count that grows within the same microsecond.
const bumpPausesLua = `
local function bumpPauses(key)
  local t = redis.call('TIME')
  local n = tonumber(string.match(redis.call('GET', key) or '', '%.(%d+)$') or 0) + 1
  redis.call('SET', key, t[1] .. '.' .. t[2] .. '.' .. n)
end
`

// pauseCacheFields bounds the fields of the two hashes kept in memory, so
// that an HGETALL of them stays far under the 5 ms any one call may block
// Redis for (BENCHMARKS.md, "Limits in the code").
const pauseCacheFields = 2000

// pausesScript answers whether the caller's copy is current and, when it
// is not and the hashes are small, sends them whole, in one atomic step.
//
//	KEYS[1] pause version, KEYS[2] paused, KEYS[3] resumed, KEYS[4] epoch
//	ARGV[1] the copy's version, ARGV[2] and ARGV[3] its lengths, ARGV[4] pauseCacheFields
//	returns {version, paused length, resumed length} when the copy is
//	current or the hashes are too large, else those and both hashes' fields
//	and values; the version is "<pause version>|<epoch>".
var pausesScript = redis.NewScript(`
local v = (redis.call('GET', KEYS[1]) or '') .. '|' .. (redis.call('GET', KEYS[4]) or '')
local np, nr = redis.call('HLEN', KEYS[2]), redis.call('HLEN', KEYS[3])
if (v == ARGV[1] and np == tonumber(ARGV[2]) and nr == tonumber(ARGV[3])) or np + nr > tonumber(ARGV[4]) then
  return {v, np, nr}
end
return {v, np, nr, redis.call('HGETALL', KEYS[2]), redis.call('HGETALL', KEYS[3])}
`)

// pauseCache is the store's copy of the pause hashes.
type pauseCache struct {
	mu sync.Mutex
	// current is the copy, nil before the first read and while the hashes
	// are too large to keep.
	current *pauseCopy
	// pausedLen and resumedLen are the hashes' lengths at the last check.
	pausedLen, resumedLen int64
}

// large says the last check found the hashes past pauseCacheFields: the
// next read sends the names' fields with its check, in one round trip,
// each hash read as its length suggests (see fieldsRead: one of them may
// still be a listpack).
func (c *pauseCache) large() bool { return c.pausedLen+c.resumedLen > pauseCacheFields }

// pauseCopy is the two hashes as one read found them.
type pauseCopy struct {
	version               string
	pausedLen, resumedLen int64
	pauses                map[string]*Pause
	windows               map[string][]PauseWindow
}

// PauseStates returns, for each of names, its pause (nil when not paused)
// and the windows of its past pauses that a leader may not have passed.
// The leader asks at every dispatch, for thousands of names at once: while
// the two hashes are small it answers from the store's copy of them, which
// one call checks is current; while they are large the names' fields are
// read in chunks in the same round trip as the check.
func (s *Store) PauseStates(ctx context.Context, names []string) ([]*Pause, [][]PauseWindow, error) {
	c := &s.pauses
	c.mu.Lock()
	defer c.mu.Unlock()
	have := c.current
	if have == nil {
		have = &pauseCopy{pausedLen: -1} // no length is -1: the reply sends the hashes
	}
	pipe := s.rdb.Pipeline()
	// Eval, not Run: inside a pipeline a NOSCRIPT error cannot fall back.
	check := pausesScript.Eval(ctx, pipe, []string{s.Keys.PauseVersion, s.Keys.Paused, s.Keys.Resumed, s.Keys.Epoch},
		have.version, have.pausedLen, have.resumedLen, pauseCacheFields)
	var paused, resumed fieldsRead
	queueFields := func() {
		paused = queueFieldsRead(ctx, pipe, s.Keys.Paused, names, c.pausedLen)
		resumed = queueFieldsRead(ctx, pipe, s.Keys.Resumed, names, c.resumedLen)
	}
	queued := c.large()
	if queued {
		queueFields()
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, nil, err
	}
	reply, err := check.Slice()
	if err == nil && len(reply) != 3 && len(reply) != 5 {
		err = fmt.Errorf("pause states: a reply of %d parts", len(reply))
	}
	if err != nil {
		return nil, nil, err
	}
	version, _ := reply[0].(string)
	pausedLen, _ := reply[1].(int64)
	resumedLen, _ := reply[2].(int64)
	c.pausedLen, c.resumedLen = pausedLen, resumedLen
	switch {
	case len(reply) == 5:
		c.current = &pauseCopy{version: version, pausedLen: pausedLen, resumedLen: resumedLen,
			pauses: pausesOf(reply[3]), windows: windowsOf(reply[4])}
	case c.large():
		c.current = nil
	}
	if cp := c.current; cp != nil {
		pauses, windows := make([]*Pause, len(names)), make([][]PauseWindow, len(names))
		for i, name := range names {
			pauses[i], windows[i] = cp.pauses[name], cp.windows[name]
		}
		return pauses, windows, nil
	}
	if !queued {
		// The hashes grew past the copy's bound since the last read.
		queueFields()
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, nil, err
		}
	}
	pauses, windows := make([]*Pause, len(names)), make([][]PauseWindow, len(names))
	if err := paused.each(ctx, s, names, func(i int, v string) { pauses[i] = ParsePause(v) }); err != nil {
		return nil, nil, err
	}
	if err := resumed.each(ctx, s, names, func(i int, v string) { windows[i] = parseWindow(v) }); err != nil {
		return nil, nil, err
	}
	return pauses, windows, nil
}

// pausesOf reads an HGETALL of the paused hash.
func pausesOf(reply any) map[string]*Pause {
	out := map[string]*Pause{}
	eachPair(reply, func(name, v string) {
		if p := ParsePause(v); p != nil {
			out[name] = p
		}
	})
	return out
}

// windowsOf reads an HGETALL of the resumed hash.
func windowsOf(reply any) map[string][]PauseWindow {
	out := map[string][]PauseWindow{}
	eachPair(reply, func(name, v string) {
		if w := parseWindow(v); len(w) > 0 {
			out[name] = w
		}
	})
	return out
}

// eachPair calls each with the fields and values of a script's HGETALL
// reply.
func eachPair(reply any, each func(field, value string)) {
	flat, _ := reply.([]any)
	for i := 0; i+1 < len(flat); i += 2 {
		f, _ := flat[i].(string)
		v, _ := flat[i+1].(string)
		each(f, v)
	}
}

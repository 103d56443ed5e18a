package store

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Pages of a family's members come from HSCAN, whose steps do not stop at
// a page's limit: a hash in Redis's compact encoding (up to
// hash-max-listpack-entries members) comes whole in one step, and a step
// of a hash table brings every member of each bucket it visits. A page is
// therefore cut at its limit inside a step: the members of that step are
// put in key order (bytes), those up to the page's last are listed, and
// the next cursor says "read again from the step's start, skipping, up to
// where that step ended, the keys up to this one".
//
// The skip holds for the range of the hash the step covered, not for the
// entries it brought: a count or a list of keys would go wrong once
// members are added or removed. HSCAN's cursor is the position reached,
// a bucket index read with its bits reversed, so it keeps its meaning
// while the table grows or rehashes, and no bucket straddles a cursor
// that ended a step at the same or a smaller size. The range is read
// again with COUNT 1, where Redis stops a step at the first bucket with
// entries: a step that ends inside the range gets the skip, and one that
// ends past it brings only a bucket beyond it, and gets none. So a member
// present throughout is listed once, whatever was added or removed in
// between, and ranges cut inside ranges (a range read again in smaller
// buckets after the table grew) keep a skip each, nearest first.
//
// What HSCAN cannot promise, neither can this: a table that shrinks (Redis
// shrinks one that falls under a tenth full) may merge a bucket across a
// range's end, and such a step, listed whole, may repeat a member; and a
// cursor means nothing to another server or after a restart (the hash
// seed changes), where paging may repeat or miss members.

// memberPageReads bounds the entries one page reads, in multiples of its
// limit, so that a search whose substring few keys contain answers a
// short page (or an empty one, with a cursor to go on from) instead of
// reading the whole family.
const memberPageReads = 16

// memberPageChunk bounds the entries one call of memberPageScript reads
// (but a compact hash's one step), as MemberChunk bounds a call's
// members: half as many, since the script also steps HSCAN, matches each
// entry and returns it within its step.
const memberPageChunk = MemberChunk / 2

// memberScanStep is the HSCAN COUNT of a step outside a range read in
// part: small, so that a step cut at a page's limit is short to read
// again a bucket at a time, yet large enough that a step's entries, not
// the call, are most of its cost.
const memberScanStep = 32

// memberPageScript reads a family's members for a page, in HSCAN steps.
//
//	KEYS[1] the family's members hash
//	ARGV[1] the HSCAN cursor to start at, ARGV[2] the COUNT of each step,
//	ARGV[3] a substring the keys must contain ("" for every key),
//	ARGV[4] stop once this many keys matched, ARGV[5] stop once this
//	many entries were read (a compact hash's one step reads them all)
//	returns {entries read, step, step, ...}, each step, in order, being
//	{the cursor after it, key, value, key, value, ...} with its matching
//	entries.
var memberPageScript = redis.NewScript(`
local cursor, count, sub = ARGV[1], ARGV[2], ARGV[3]
local want, budget = tonumber(ARGV[4]), tonumber(ARGV[5])
local out, matched, read = {0}, 0, 0
repeat
  local r = redis.call('HSCAN', KEYS[1], cursor, 'COUNT', count)
  cursor = r[1]
  local step, kv = {cursor}, r[2]
  for i = 1, #kv, 2 do
    if sub == '' or string.find(kv[i], sub, 1, true) then
      step[#step + 1] = kv[i]
      step[#step + 1] = kv[i + 1]
      matched = matched + 1
    end
  end
  read = read + #kv / 2
  out[#out + 1] = step
until cursor == '0' or matched >= want or read >= budget or #out > budget
out[1] = read
return out
`)

// memberPageCursor is where the next page of members starts.
type memberPageCursor struct {
	scan uint64 // the HSCAN cursor of the next step
	// listed are the ranges from scan read in part by earlier pages,
	// nearest first; each one's listedTo is greater than the next's.
	listed []listedRange
}

// listedRange is a range of the hash from a page cursor's scan up to end
// (an HSCAN cursor; 0 for the end of the hash) whose members with keys up
// to listedTo, in byte order, have been listed.
type listedRange struct {
	end      uint64
	listedTo string
}

// scanOrder orders HSCAN cursors that end a step by how far into the
// hash they are: Redis moves the cursor on by incrementing its bits read
// in reverse, and 0 ends the scan.
func scanOrder(end uint64) uint64 {
	if end == 0 {
		return math.MaxUint64
	}
	return bits.Reverse64(end)
}

// memberStep is one HSCAN step: the cursor after it and its matching
// members.
type memberStep struct {
	end     uint64
	members []MemberValue
}

// take appends to page the members of steps, read in order from c.scan,
// up to limit, and moves c past what it appended. It reports whether the
// page is full or was cut inside a step; otherwise c.scan is the end of
// the last step.
func (c *memberPageCursor) take(page []MemberValue, steps []memberStep, limit int) ([]MemberValue, bool) {
	for _, st := range steps {
		if len(page) >= limit {
			return page, true
		}
		// Ranges this step went past skip nothing in it.
		for len(c.listed) > 0 && scanOrder(c.listed[0].end) < scanOrder(st.end) {
			c.listed = c.listed[1:]
		}
		ms := st.members
		if len(c.listed) > 0 {
			listedTo := c.listed[0].listedTo
			ms = slices.DeleteFunc(ms, func(m MemberValue) bool { return m.Key <= listedTo })
		}
		rest := c.listed
		if len(rest) > 0 && rest[0].end == st.end {
			rest = rest[1:]
		}
		if room := limit - len(page); len(ms) > room {
			slices.SortFunc(ms, func(a, b MemberValue) int { return strings.Compare(a.Key, b.Key) })
			ms = ms[:room]
			c.listed = append([]listedRange{{end: st.end, listedTo: ms[room-1].Key}}, rest...)
			return append(page, ms...), true
		}
		page = append(page, ms...)
		c.scan, c.listed = st.end, rest
	}
	return page, len(page) >= limit
}

// done reports whether c is past the last step of the hash (a cursor
// that took no step yet is at its first).
func (c memberPageCursor) done() bool { return c.scan == 0 && len(c.listed) == 0 }

// String is the cursor as a page hands it out: the HSCAN cursor alone
// when no range is read in part (which is also what pages handed out
// before they were cut at their limit), else that and the ranges,
// "<scan>-<base64url of (uvarint end, uvarint length, key)...>".
func (c memberPageCursor) String() string {
	s := strconv.FormatUint(c.scan, 10)
	if len(c.listed) == 0 {
		return s
	}
	var b []byte
	for _, r := range c.listed {
		b = binary.AppendUvarint(b, r.end)
		b = binary.AppendUvarint(b, uint64(len(r.listedTo)))
		b = append(b, r.listedTo...)
	}
	return s + "-" + base64.RawURLEncoding.EncodeToString(b)
}

// parseMemberPageCursor reads a cursor String made ("" for the first
// page), or fails with ErrBadCursor.
func parseMemberPageCursor(s string) (memberPageCursor, error) {
	if s == "" {
		return memberPageCursor{}, nil
	}
	scan, ranges, hasRanges := strings.Cut(s, "-")
	var c memberPageCursor
	var err error
	if c.scan, err = strconv.ParseUint(scan, 10, 64); err != nil {
		return memberPageCursor{}, ErrBadCursor
	}
	if !hasRanges {
		return c, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(ranges)
	if err != nil || len(b) == 0 {
		return memberPageCursor{}, ErrBadCursor
	}
	for len(b) > 0 {
		end, n := binary.Uvarint(b)
		if n <= 0 {
			return memberPageCursor{}, ErrBadCursor
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size == 0 || size > uint64(len(b)-n) {
			return memberPageCursor{}, ErrBadCursor
		}
		r := listedRange{end: end, listedTo: string(b[n : n+int(size)])}
		b = b[n+int(size):]
		if last := len(c.listed) - 1; last >= 0 && (scanOrder(c.listed[last].end) >= scanOrder(end) || c.listed[last].listedTo <= r.listedTo) {
			return memberPageCursor{}, ErrBadCursor
		}
		c.listed = append(c.listed, r)
	}
	return c, nil
}

// parseMemberSteps reads memberPageScript's reply: the entries read and
// the steps.
func parseMemberSteps(reply any) (read int, steps []memberStep, err error) {
	out, ok := reply.([]any)
	if !ok || len(out) < 2 {
		return 0, nil, fmt.Errorf("member page: unexpected reply %T", reply)
	}
	n, ok := out[0].(int64)
	if !ok {
		return 0, nil, fmt.Errorf("member page: unexpected count %T", out[0])
	}
	steps = make([]memberStep, 0, len(out)-1)
	for _, o := range out[1:] {
		st, ok := o.([]any)
		if !ok || len(st)%2 != 1 {
			return 0, nil, fmt.Errorf("member page: unexpected step %v", o)
		}
		end, _ := st[0].(string)
		var step memberStep
		if step.end, err = strconv.ParseUint(end, 10, 64); err != nil {
			return 0, nil, fmt.Errorf("member page: step cursor %v: %w", st[0], err)
		}
		for i := 1; i < len(st); i += 2 {
			k, _ := st[i].(string)
			v, _ := st[i+1].(string)
			if m, ok := parseMember(k, v); ok {
				step.members = append(step.members, m)
			}
		}
		steps = append(steps, step)
	}
	return int(n), steps, nil
}

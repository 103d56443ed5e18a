package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A start mark is a field of an asynq task's own hash in which the worker
// running an attempt of the task names it: the attempt, a token unique to
// that delivery, and how far it got. It is for the deliveries asynq makes
// twice. A worker's dequeue is a write like any other; a failover can lose
// it while keeping the enqueue (acknowledged by a replica), and the new
// primary then hands the same attempt, still pending, to a second worker,
// though the first has run it or is running it. With the mark written and
// acknowledged by a replica before the handler starts, the second delivery
// finds it and does not run the attempt again.
//
// The mark lives in the task's hash, so it lives exactly as long as the
// task, costs no key of its own, and sits under asynq's prefix, which every
// worker's Redis user may write. asynq's scripts set only the fields they
// own and delete the hash when they are done with it.
const startField = "belfry_start"

// Start states.
const (
	StartRunning   = "running"
	StartSucceeded = "succeeded"
	StartFailed    = "failed"
)

// Start is a start mark as read: "attempt token state expiry", the expiry
// (unix ms, Redis's clock) that of a running mark, which its holder renews
// while the handler runs; 0 once the attempt ended.
type Start struct {
	Attempt int
	Token   string
	State   string // StartRunning, StartSucceeded or StartFailed
}

// Finished reports whether the attempt that holds the mark has ended.
func (s Start) Finished() bool { return s.State != StartRunning }

func parseStart(v string) (Start, error) {
	f := strings.Fields(v)
	if len(f) != 4 {
		return Start{}, fmt.Errorf("start mark %q: want attempt, token, state and expiry", v)
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 0 {
		return Start{}, fmt.Errorf("start mark %q: bad attempt", v)
	}
	return Start{Attempt: n, Token: f[1], State: f[2]}, nil
}

// startMarkLua writes the caller's mark, running until ARGV[4] ms from
// Redis's now, or ended (expiry 0) in state ARGV[5].
const startMarkLua = `
local function markOf(attempt, token, state, ttl)
  local expiry = 0
  if state == 'running' then
    local now = redis.call('TIME')
    expiry = now[1] * 1000 + math.floor(now[2] / 1000) + tonumber(ttl)
  end
  return attempt .. ' ' .. token .. ' ' .. state .. ' ' .. expiry
end
local function stale(expiry)
  local now = redis.call('TIME')
  return tonumber(expiry) < now[1] * 1000 + math.floor(now[2] / 1000)
end
`

// claimStartScript marks an attempt as the caller's and returns the mark
// that stands: the caller's (new, or renewed from an earlier try), or the
// other delivery's. Another delivery's mark stands when it names this
// attempt or a later one (a running one only until its expiry: its holder
// stopped renewing it, its worker is gone) or says an attempt succeeded. A
// later attempt replaces an earlier one that failed or never ended (its
// worker died and asynq's recoverer retries the task), not one that
// succeeded: that later attempt is asynq's retry of a task whose "done" a
// failover lost. It creates nothing when the task's hash is gone.
//
//	KEYS[1] task hash
//	ARGV[1] field, ARGV[2] attempt, ARGV[3] token, ARGV[4] TTL ms
//	returns the standing mark, or nil if the task's hash does not exist.
var claimStartScript = redis.NewScript(startMarkLua + `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
  local attempt, token, state, expiry = string.match(cur, '^(%d+) (%S+) (%S+) (%d+)$')
  if attempt and token ~= ARGV[3] then
    if state == 'succeeded' then return cur end
    if tonumber(attempt) > tonumber(ARGV[2]) then return cur end
    if tonumber(attempt) == tonumber(ARGV[2]) and not (state == 'running' and stale(expiry)) then return cur end
  end
end
local mark = markOf(ARGV[2], ARGV[3], 'running', ARGV[4])
redis.call('HSET', KEYS[1], ARGV[1], mark)
return mark
`)

// updateStartScript renews the caller's running mark, records how its
// attempt ended, or (state "") removes it, if the mark is still the
// caller's.
//
//	KEYS[1] task hash
//	ARGV[1] field, ARGV[2] attempt, ARGV[3] token, ARGV[4] TTL ms,
//	ARGV[5] state
//	returns 1 if done, 0 if the mark is another's or gone.
var updateStartScript = redis.NewScript(startMarkLua + `
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local mine = ARGV[2] .. ' ' .. ARGV[3] .. ' '
if not cur or string.sub(cur, 1, #mine) ~= mine then return 0 end
if ARGV[5] == '' then return redis.call('HDEL', KEYS[1], ARGV[1]) end
redis.call('HSET', KEYS[1], ARGV[1], markOf(ARGV[2], ARGV[3], ARGV[5], ARGV[4]))
return 1
`)

// ErrNoTask is ClaimStart's error when the task's hash is gone.
var ErrNoTask = errors.New("the task's hash is gone")

// ClaimStart marks attempt of the task at key as token's, running for ttl
// unless renewed (UpdateStart), unless another delivery's mark stands
// (see claimStartScript); it returns the mark that stands. The write
// counts once a is satisfied: an error wrapping ErrNotAcked comes with the
// standing mark, which a failover may still lose; ErrNoTask when the
// task's hash does not exist.
func (a Acks) ClaimStart(ctx context.Context, rdb redis.UniversalClient, key string, attempt int, token string, ttl time.Duration) (Start, error) {
	cmd := a.Run(ctx, rdb, claimStartScript, []string{key}, startField, attempt, token, ttl.Milliseconds())
	err := cmd.Err()
	switch {
	case errors.Is(err, redis.Nil):
		return Start{}, ErrNoTask
	case err != nil && !errors.Is(err, ErrNotAcked):
		return Start{}, err
	}
	v, _ := cmd.Val().(string) // Text would drop the value with the error
	s, perr := parseStart(v)
	if perr != nil {
		return Start{}, perr
	}
	return s, err
}

// UpdateStart renews token's running mark for ttl (state StartRunning),
// records how its attempt ended (StartSucceeded, StartFailed), or removes
// it (""), so that the attempt's next delivery runs it: for an attempt
// interrupted without a verdict (its worker shutting down; asynq puts the
// task back as it was). Nothing changes unless the mark is token's.
// Acknowledged as ClaimStart's write is.
func (a Acks) UpdateStart(ctx context.Context, rdb redis.UniversalClient, key string, attempt int, token, state string, ttl time.Duration) error {
	return a.Run(ctx, rdb, updateStartScript, []string{key}, startField, attempt, token, ttl.Milliseconds(), state).Err()
}

// ReadStart returns the task's start mark; ok is false when it has none
// (or the task's hash is gone).
func ReadStart(ctx context.Context, rdb redis.UniversalClient, key string) (s Start, ok bool, err error) {
	v, err := rdb.HGet(ctx, key, startField).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return Start{}, false, nil
	case err != nil:
		return Start{}, false, err
	}
	s, err = parseStart(v)
	return s, err == nil, err
}

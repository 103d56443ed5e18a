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

// Start states. A mark is running while its holder runs the handler;
// then it says how the attempt ended, as asynq will treat it.
const (
	StartRunning   = "running"
	StartSucceeded = "succeeded"
	StartFailed    = "failed"  // asynq retries it, or archives it once retries are spent
	StartFinal     = "final"   // failed with asynq.SkipRetry: archived
	StartRevoked   = "revoked" // asynq.RevokeTask: done, neither retried nor archived
)

// Start is a start mark as read. Stored as "attempt token state expiry
// digest": the expiry (unix ms, Redis's clock) that of a running mark,
// which its holder renews while the handler runs, 0 once it ended; the
// digest, of the task's message as the holder's delivery found it.
type Start struct {
	Attempt int
	Token   string
	State   string
}

// Finished reports whether the attempt that holds the mark has ended.
func (s Start) Finished() bool { return s.State != StartRunning }

func parseStart(v string) (Start, error) {
	f := strings.Fields(v)
	if len(f) != 5 {
		return Start{}, fmt.Errorf("start mark %q: want attempt, token, state, expiry and digest", v)
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 0 {
		return Start{}, fmt.Errorf("start mark %q: bad attempt", v)
	}
	return Start{Attempt: n, Token: f[1], State: f[2]}, nil
}

// startMarkLua has the scripts' helpers: markOf writes a mark, running
// until ttl ms from Redis's now or ended (expiry 0); stale says whether a
// running mark's expiry has passed.
const startMarkLua = `
local function nowMS()
  local now = redis.call('TIME')
  return now[1] * 1000 + math.floor(now[2] / 1000)
end
local function markOf(attempt, token, state, ttl, digest)
  local expiry = 0
  if state == 'running' then expiry = nowMS() + tonumber(ttl) end
  return attempt .. ' ' .. token .. ' ' .. state .. ' ' .. expiry .. ' ' .. digest
end
local function stale(expiry) return tonumber(expiry) < nowMS() end
`

// claimStartScript marks an attempt as the caller's and returns the mark
// that stands — the caller's (new, or renewed from its earlier try) or
// another delivery's — with the digest of the caller's delivery: the
// task's message when the caller first claimed (ARGV[5] ""), which it
// passes back on its later tries.
//
// Another delivery's mark stands when it
//   - says an attempt succeeded, unless the caller has the same attempt
//     from a rewritten message (an operator running the completed task
//     again): a later attempt is asynq retrying a task whose "done" a
//     failover lost;
//   - is running and not expired, whatever its attempt: its holder renews
//     it while the handler runs (asynq's recoverer retries a task only
//     after its own 30 s lease lapsed, by which time a dead holder's mark
//     has expired unless the runtime's LeaseTTL is longer: then the retry
//     waits for it);
//   - ended otherwise, for a later attempt than the caller's, or for the
//     same one from the same message: the caller is a second delivery of
//     that attempt and ends as it did. A message asynq rewrote since (its
//     retry, or an operator running an archived task again) runs anew.
//
// It creates nothing when the task's hash is gone.
//
//	KEYS[1] task hash
//	ARGV[1] field, ARGV[2] attempt, ARGV[3] token, ARGV[4] TTL ms,
//	ARGV[5] the caller's digest, or "" on its first claim
//	returns {standing mark, the caller's digest}, or nil if the task's
//	hash does not exist.
var claimStartScript = redis.NewScript(startMarkLua + `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local digest = ARGV[5]
if digest == '' then digest = redis.sha1hex(redis.call('HGET', KEYS[1], 'msg') or '') end
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
  local attempt, token, state, expiry, held = string.match(cur, '^(%d+) (%S+) (%S+) (%d+) (%x+)$')
  if attempt and token ~= ARGV[3] then
    attempt = tonumber(attempt)
    local mine = tonumber(ARGV[2])
    if state == 'succeeded' then
      if attempt ~= mine or held == digest then return {cur, digest} end
    elseif state == 'running' then
      if not stale(expiry) then return {cur, digest} end
    elseif attempt > mine or (attempt == mine and held == digest) then
      return {cur, digest}
    end
  end
end
local mark = markOf(ARGV[2], ARGV[3], 'running', ARGV[4], digest)
redis.call('HSET', KEYS[1], ARGV[1], mark)
return {mark, digest}
`)

// updateStartScript renews the caller's running mark, records how its
// attempt ended, or (state "") removes it, if the mark is still the
// caller's.
//
//	KEYS[1] task hash
//	ARGV[1] field, ARGV[2] "attempt token ", ARGV[3] TTL ms, ARGV[4] state
//	returns 1 if done, 0 if the mark is another's or gone.
var updateStartScript = redis.NewScript(startMarkLua + `
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur or string.sub(cur, 1, #ARGV[2]) ~= ARGV[2] then return 0 end
if ARGV[4] == '' then return redis.call('HDEL', KEYS[1], ARGV[1]) end
local attempt, token, digest = string.match(cur, '^(%d+) (%S+) %S+ %d+ (%x+)$')
redis.call('HSET', KEYS[1], ARGV[1], markOf(attempt, token, ARGV[4], ARGV[3], digest))
return 1
`)

// ErrNoTask is ClaimStart's error when the task's hash is gone.
var ErrNoTask = errors.New("the task's hash is gone")

// ClaimStart marks attempt of the task at key as token's, running for ttl
// unless renewed, unless another delivery's mark stands (see
// claimStartScript). digest is "" on the delivery's first claim, then the
// digest that claim returned. It returns the mark that stands and the
// delivery's digest. The write counts once a is satisfied: an error
// wrapping ErrNotAcked comes with the standing mark, which a failover may
// still lose; ErrNoTask when the task's hash does not exist.
func (a Acks) ClaimStart(ctx context.Context, rdb redis.UniversalClient, key string, attempt int, token, digest string, ttl time.Duration) (Start, string, error) {
	cmd := a.Run(ctx, rdb, claimStartScript, []string{key}, startField, attempt, token, ttl.Milliseconds(), digest)
	err := cmd.Err()
	switch {
	case errors.Is(err, redis.Nil):
		return Start{}, "", ErrNoTask
	case err != nil && !errors.Is(err, ErrNotAcked):
		return Start{}, "", err
	}
	// cmd.Slice would drop the reply with ErrNotAcked.
	reply, _ := cmd.Val().([]any)
	if len(reply) != 2 {
		return Start{}, "", fmt.Errorf("start mark claim: unexpected reply %v", cmd.Val())
	}
	v, _ := reply[0].(string)
	d, _ := reply[1].(string)
	s, perr := parseStart(v)
	if perr != nil {
		return Start{}, "", perr
	}
	return s, d, err
}

// RenewStart extends token's running mark by ttl. It does not wait for
// replicas: the renewal keeps the mark alive on the primary, where the
// attempt's other deliveries read it, and replication carries it within
// moments. ours is false when the mark is no longer token's.
func RenewStart(ctx context.Context, rdb redis.UniversalClient, key string, attempt int, token string, ttl time.Duration) (ours bool, err error) {
	n, err := updateStartScript.Run(ctx, rdb, []string{key}, startField, holderPrefix(attempt, token), ttl.Milliseconds(), StartRunning).Int()
	return n == 1, err
}

// EndStart records state as the end of token's attempt, or with state ""
// removes the mark, so that the attempt's next delivery runs it (an
// attempt interrupted without a verdict: its worker shut down, and asynq
// put the task back as it was). Acknowledged as ClaimStart's write is;
// ours is false when the mark is no longer token's.
func (a Acks) EndStart(ctx context.Context, rdb redis.UniversalClient, key string, attempt int, token, state string) (ours bool, err error) {
	cmd := a.Run(ctx, rdb, updateStartScript, []string{key}, startField, holderPrefix(attempt, token), 0, state)
	if err := cmd.Err(); err != nil && !errors.Is(err, ErrNotAcked) {
		return false, err
	}
	n, _ := cmd.Val().(int64) // cmd.Int would drop the reply with ErrNotAcked
	return n == 1, cmd.Err()
}

func holderPrefix(attempt int, token string) string { return strconv.Itoa(attempt) + " " + token + " " }

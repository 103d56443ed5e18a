// Package pipeline sends the enqueues that asynq's Client makes at the same
// moment as go-redis pipelines, since asynq has no batch enqueue.
package pipeline

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Client is the Redis client that asynq's Client enqueues
// through. asynq has no batch enqueue: each task is one EVALSHA of its
// enqueue script, one round trip. When many enqueue workers call at the
// same moment (the midnight spike), this client sends their EVALSHAs
// together as go-redis pipelines, so a burst costs a round trip and a pair
// of system calls per batch instead of per task. Every other command goes
// straight to the wrapped client, and a shared client's hooks see these
// enqueues as pipelines.
//
// A caller that finds a free sending slot sends its own command at once: a
// lone enqueue waits for nothing. Callers that find every slot busy queue,
// and the first sender to finish hands the queue to a goroutine that sends
// it in batches until it is empty, while the sender returns with its own
// reply. There are two slots so that one slow round trip does not hold up
// every enqueue; one, two and four measured the same on the spike.
//
// Each caller gets its own command back, with its own reply or error, as the
// pipeline reports it. A caller whose context ends while it is queued leaves
// the queue, so its command is never sent; once sent, it waits for the
// reply, which is the truth about whether its task went in.
type Client struct {
	redis.UniversalClient
	// Acks, when on, makes each fenced transaction count only once
	// replicas acknowledge it (see sendFenced). Set it before use.
	Acks Acks

	mu      sync.Mutex
	waiting []*pipelinedCall
	sending int // slots in use, at most pipelinesInFlight
}

const pipelinesInFlight = 2

// fencedChunk bounds the scripts of one MULTI/EXEC: Redis runs a
// transaction as one step, and 128 enqueues with their marks keep it near
// 1-2 ms, under the 5 ms any one call may block Redis for.
const fencedChunk = 128

var errNoReply = errors.New("redis pipeline ended without a reply")

type pipelinedCall struct {
	ctx   context.Context
	sha   string
	body  string // for Eval: the script itself, sent instead of sha
	keys  []string
	args  []any
	fence *Fence // nil: unconditional
	mark  *Mark  // nil: none; only with a fence
	cmd   *redis.Cmd
	done  chan struct{}
}

// NewClient wraps c.
func NewClient(c redis.UniversalClient) *Client {
	return &Client{UniversalClient: c}
}

func (c *Client) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	call := &pipelinedCall{ctx: ctx, sha: sha, keys: keys, args: args, fence: fenceOf(ctx), mark: markOf(ctx), done: make(chan struct{})}
	if err := ctx.Err(); err != nil {
		return call.fail(err)
	}
	c.mu.Lock()
	if c.sending < pipelinesInFlight {
		// A slot is only freed when nothing waits, so nothing is queued
		// ahead of this call.
		c.sending++
		c.mu.Unlock()
		defer c.handOff() // deferred: a panicking hook must not keep the slot
		c.send([]*pipelinedCall{call})
		return call.cmd
	}
	c.waiting = append(c.waiting, call)
	c.mu.Unlock()
	select {
	case <-call.done:
	case <-ctx.Done():
		if c.withdraw(call) {
			return call.fail(ctx.Err())
		}
		<-call.done
	}
	return call.cmd
}

// handOff frees a sending slot, or gives it to a goroutine that sends
// whatever queued meanwhile.
func (c *Client) handOff() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waiting) == 0 {
		c.sending--
		return
	}
	go c.drain()
}

func (c *Client) drain() {
	for {
		c.mu.Lock()
		batch := c.waiting
		c.waiting = nil
		if len(batch) == 0 {
			c.sending--
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		c.send(batch)
	}
}

// withdraw takes a queued call out of the queue, and reports whether it was
// still there (not yet sent).
func (c *Client) withdraw(call *pipelinedCall) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.waiting, call)
	if i < 0 {
		return false
	}
	c.waiting = slices.Delete(c.waiting, i, i+1)
	return true
}

// send runs one pipeline. It is detached from the callers' contexts, which
// differ (the scheduler's, a trigger's HTTP request), so that one caller
// giving up does not fail the others; go-redis's timeouts bound it as they
// bound any command. Trace spans from the context belong to the batch's
// first caller.
func (c *Client) send(batch []*pipelinedCall) {
	execErr := errNoReply
	defer func() {
		// A hook that fails the pipeline without running it, or panics,
		// leaves commands with neither reply nor error: no caller may
		// read that as success.
		for _, call := range batch {
			if call.cmd == nil {
				call.cmd = redis.NewCmd(call.ctx, call.cmdArgs()...)
			}
			if call.cmd.Err() == nil && call.cmd.Val() == nil {
				call.cmd.SetErr(execErr)
			}
			close(call.done)
		}
	}()
	ctx := context.WithoutCancel(batch[0].ctx)
	var plain []*pipelinedCall
	fenced := map[Fence][]*pipelinedCall{}
	var fences []*Fence
	for _, call := range batch {
		if call.fence == nil {
			plain = append(plain, call)
			continue
		}
		k := Fence{Key: call.fence.Key, Value: call.fence.Value}
		if fenced[k] == nil {
			fences = append(fences, call.fence)
		}
		fenced[k] = append(fenced[k], call)
	}
	for _, f := range fences {
		calls := fenced[Fence{Key: f.Key, Value: f.Value}]
		for start := 0; start < len(calls); start += fencedChunk {
			if err := c.sendFenced(ctx, f, calls[start:min(start+fencedChunk, len(calls))]); err != nil {
				execErr = err
			}
		}
	}
	if len(plain) == 0 {
		return
	}
	pipe := c.UniversalClient.Pipeline()
	for _, call := range plain {
		call.cmd = pipe.EvalSha(ctx, call.sha, call.keys, call.args...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		execErr = err
	}
}

func (call *pipelinedCall) cmdArgs() []any {
	args := []any{"evalsha", call.sha, len(call.keys)}
	if call.body != "" {
		args = []any{"eval", call.body, len(call.keys)}
	}
	for _, k := range call.keys {
		args = append(args, k)
	}
	return append(args, call.args...)
}

// fail returns the call's command failed with err, never sent.
func (call *pipelinedCall) fail(err error) *redis.Cmd {
	cmd := redis.NewCmd(call.ctx, call.cmdArgs()...)
	cmd.SetErr(err)
	return cmd
}

// Waiting counts the calls waiting for a sending slot.
func (c *Client) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiting)
}

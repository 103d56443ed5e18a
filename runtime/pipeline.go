package runtime

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// pipeliningClient is the Redis client that asynq's Client enqueues
// through. asynq has no batch enqueue: each task is one EVALSHA of its
// enqueue script, one round trip. When the enqueue workers call at the same
// moment (the midnight spike), this client sends their EVALSHAs together in
// one go-redis pipeline, so a burst costs a round trip and a pair of system
// calls per batch instead of per task. Every other command goes straight to
// the wrapped client.
//
// There is no flushing goroutine and no delay: a caller that finds fewer
// than pipelinesInFlight pipelines out sends everything waiting, then
// whatever arrived meanwhile, until nothing waits (flat combining). A lone
// call therefore goes out at once, as a pipeline of one. Two pipelines in
// flight let Redis run one batch while this process writes the next.
//
// Each caller gets its own command back, with its own reply or error, as
// the pipeline reports it; a pipeline that fails fails every command in it,
// and the scheduler retries those occurrences, whose task IDs make a repeat
// harmless.
type pipeliningClient struct {
	redis.UniversalClient

	mu      sync.Mutex
	waiting []*pipelinedCall
	sending int // callers sending pipelines now, at most pipelinesInFlight
}

const pipelinesInFlight = 2

type pipelinedCall struct {
	ctx  context.Context
	sha  string
	keys []string
	args []any
	cmd  *redis.Cmd
	done chan struct{}
}

func newPipeliningClient(c redis.UniversalClient) *pipeliningClient {
	return &pipeliningClient{UniversalClient: c}
}

// EvalSha joins the next pipeline. It returns when its reply is in, or
// with ctx's error if ctx ends first while it waits its turn (the command
// may still run; an enqueue is idempotent by task ID).
func (c *pipeliningClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	call := &pipelinedCall{ctx: ctx, sha: sha, keys: keys, args: args, done: make(chan struct{})}
	c.mu.Lock()
	c.waiting = append(c.waiting, call)
	if c.sending == pipelinesInFlight {
		c.mu.Unlock()
		select {
		case <-call.done:
			return call.cmd
		case <-ctx.Done():
			cmd := redis.NewCmd(ctx, "evalsha", sha)
			cmd.SetErr(ctx.Err())
			return cmd
		}
	}
	c.sending++
	for len(c.waiting) > 0 {
		batch := c.waiting
		c.waiting = nil
		c.mu.Unlock()
		c.send(batch)
		c.mu.Lock()
	}
	c.sending--
	c.mu.Unlock()
	return call.cmd
}

// send runs one pipeline. It is detached from the callers' contexts, which
// may differ (the scheduler's, a trigger's HTTP request), so that one
// caller giving up does not fail the others; go-redis's read and write
// timeouts still bound it.
func (c *pipeliningClient) send(batch []*pipelinedCall) {
	ctx := context.WithoutCancel(batch[0].ctx)
	pipe := c.UniversalClient.Pipeline()
	for _, call := range batch {
		call.cmd = pipe.EvalSha(ctx, call.sha, call.keys, call.args...)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	for _, call := range batch {
		close(call.done)
	}
}

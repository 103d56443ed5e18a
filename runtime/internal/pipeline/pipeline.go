// Package pipeline writes the scheduler's asynq tasks: many at once, each
// fenced by the lease and carrying its schedule's cursor (task.go).
package pipeline

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Client enqueues asynq tasks for callers that come at the same moment
// (the midnight spike, a round of the scheduler), sending them together:
// a script per queue and chunk of tasks (task.go), so a burst costs a
// round trip and a pair of system calls per chunk instead of per task.
//
// A caller that finds a free sending slot sends its tasks at once: a lone
// enqueue waits for nothing. Callers that find every slot busy queue, and
// the first sender to finish hands the queue to a goroutine that sends it
// until it is empty, while the sender returns with its own replies. There
// are two slots so that one slow round trip does not hold up every
// enqueue.
//
// Each task gets its own reply or error. A caller whose context ends while
// its tasks are queued takes them out of the queue, so they are never
// sent; once sent, it waits for the reply, which is the truth about
// whether its task went in.
type Client struct {
	rdb redis.UniversalClient
	// Acks, when on, makes each fenced task count only once replicas
	// acknowledge it (see sendTaskChunk). Set it before use.
	Acks Acks

	mu      sync.Mutex
	waiting []*pipelinedCall
	sending int // slots in use, at most pipelinesInFlight

	// listed is when each queue was last added to asynq's set of queues
	// (listQueue).
	listedMu sync.Mutex
	listed   map[string]time.Time
}

const pipelinesInFlight = 2

var errNoReply = errors.New("redis pipeline ended without a reply")

// pipelinedCall is one task on its way.
type pipelinedCall struct {
	ctx   context.Context
	task  *Task
	fence *Fence // nil: unconditional
	mark  *Mark  // nil: none; only with a fence
	done  chan struct{}
	// The outcome: answered once the call has its reply or its error.
	answered, inserted bool
	err                error
	// unacked: Redis ran the task's write, too few replicas acknowledged it
	unacked bool
}

// NewClient returns a Client that writes through c.
func NewClient(c redis.UniversalClient) *Client {
	return &Client{rdb: c}
}

// runAll sends calls, with whatever else is being sent, and returns once
// each has its reply (or its error).
func (c *Client) runAll(ctx context.Context, calls []*pipelinedCall) {
	if len(calls) == 0 {
		return
	}
	if err := ctx.Err(); err != nil {
		for _, call := range calls {
			call.fail(err)
		}
		return
	}
	c.mu.Lock()
	if c.sending < pipelinesInFlight {
		// A slot is only freed when nothing waits, so nothing is queued
		// ahead of these calls.
		c.sending++
		c.mu.Unlock()
		defer c.handOff() // deferred: a panicking hook must not keep the slot
		c.send(calls)
		return
	}
	c.waiting = append(c.waiting, calls...)
	c.mu.Unlock()
	for _, call := range calls {
		select {
		case <-call.done:
		case <-ctx.Done():
			if c.withdraw(call) {
				call.fail(ctx.Err())
				continue
			}
			<-call.done
		}
	}
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

// send sends one batch of calls, those of each fence together. It is
// detached from the callers' contexts, which differ (the scheduler's, a
// trigger's HTTP request), so that one caller giving up does not fail the
// others; go-redis's timeouts bound it as they bound any command. Trace
// spans from the context belong to the batch's first caller.
func (c *Client) send(batch []*pipelinedCall) {
	execErr := errNoReply
	defer func() {
		// A hook that fails a command without running it, or panics,
		// leaves calls with neither reply nor error: no caller may read
		// that as success.
		for _, call := range batch {
			if !call.answered {
				call.fail(execErr)
			}
			close(call.done)
		}
	}()
	ctx := context.WithoutCancel(batch[0].ctx)
	byFence := map[Fence][]*pipelinedCall{}
	var fences []*Fence // nil for the unfenced
	for _, call := range batch {
		var k Fence
		if call.fence != nil {
			k = Fence{Key: call.fence.Key, Value: call.fence.Value}
		}
		if byFence[k] == nil {
			fences = append(fences, call.fence)
		}
		byFence[k] = append(byFence[k], call)
	}
	for _, f := range fences {
		var k Fence
		if f != nil {
			k = Fence{Key: f.Key, Value: f.Value}
		}
		if err := c.sendTasks(ctx, f, byFence[k]); err != nil {
			execErr = err
		}
	}
}

// fail answers the call with err.
func (call *pipelinedCall) fail(err error) {
	call.answered, call.err = true, err
}

// Waiting counts the calls waiting for a sending slot.
func (c *Client) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiting)
}

// Package checkpoint lets a scheduled handler do long work in batches and
// keep its place: a retry of the occurrence, or its continuation after a
// timeout or a worker's shutdown, resumes after the last saved batch
// instead of starting over.
//
//	func Prune(ctx context.Context, occ registry.Occurrence) error {
//		return checkpoint.Run(ctx, func(ctx context.Context, cursor string) (string, bool, error) {
//			last, n, err := deleteBatch(ctx, cursor, 1000)
//			checkpoint.Add(ctx, n)
//			return last, n < 1000, err
//		})
//	}
//
// Progress belongs to the occurrence (its ID) and lives in the engine
// (engine.Progress). Each attempt claims it when Run starts, which fences
// every older attempt: a stale copy (a worker presumed dead, a delivery
// repeated) cannot move the cursor, and its Run stops at its next save.
//
// Interruption is not failure. Run stops between batches when the
// occurrence's deadline is near (less than twice its longest batch left,
// and at least MinMargin or a quarter of the time the attempt had), or
// when its context is cancelled (the worker
// shuts down); it saves, and returns an *Interrupted error, which the
// runtime's workers turn into a continuation of the occurrence that does
// not use up its retries (asynq: a continuation task; River: a snooze),
// recorded "continued" rather than "failed".
//
// Per batch: on Redis, a batch's effects and its save are two writes, so a
// crash between them runs that batch again (at least once per batch). On
// Postgres a handler that saves its cursor in its own transaction
// (postgres.SaveCheckpoint) commits the batch and its progress together:
// exactly once per batch.
package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/belfry/belfry/runtime/engine"
)

// Step processes one batch from cursor ("" at the start) and returns the
// cursor after it, and done when nothing is left. It runs again with the
// returned cursor until done.
type Step func(ctx context.Context, cursor string) (next string, done bool, err error)

// MinMargin is the least time before the occurrence's deadline at which
// Run still starts a batch, for an attempt given more than four times it.
const MinMargin = time.Second

// saveTimeout bounds a save made after ctx ended.
const saveTimeout = 5 * time.Second

// Binding is what the runtime's workers give Run through a handler's
// context: where progress is kept and whose it is. Handlers do not set it.
type Binding struct {
	Store engine.Progress
	// Key is the occurrence's ID, Scope (not "" for resume=next) the
	// schedule and member whose unfinished work the next occurrence takes
	// up.
	Key, Scope string
	Now        func() time.Time
	// Saved, when not nil, is told each checkpoint saved.
	Saved func(key string, cp engine.Checkpoint)

	started atomic.Bool
}

// Started reports whether a Run under this binding started: its worker
// then waits for it to save its place when the context ends.
func (b *Binding) Started() bool { return b.started.Load() }

type bindingKey struct{}
type batchKey struct{}

// Bind returns ctx carrying b for Run.
func Bind(ctx context.Context, b *Binding) context.Context {
	if b.Now == nil {
		b.Now = time.Now
	}
	return context.WithValue(ctx, bindingKey{}, b)
}

// Interrupted is Run's error when it stopped between batches, its place
// saved, because the occurrence's deadline was near or its context ended.
type Interrupted struct {
	Key    string
	Cursor string
	Items  int64
	Reason string // "timeout" or "shutdown"
}

func (e *Interrupted) Error() string {
	return fmt.Sprintf("checkpoint: interrupted (%s) at cursor %q after %d items; the occurrence continues from there", e.Reason, e.Cursor, e.Items)
}

// Superseded is Run's error when a newer attempt claimed the progress it
// was saving: it stopped, its last batch unsaved. By is the occurrence
// whose attempt took over (the same occurrence, or with resume=next the
// next one).
type Superseded struct {
	Key, By string
}

func (e *Superseded) Error() string {
	return fmt.Sprintf("checkpoint: progress of %s taken over by %s; this attempt stopped", e.Key, e.By)
}

func (e *Superseded) Unwrap() error { return engine.ErrSuperseded }

// Batch is the batch under way: what an engine that saves inside the
// handler's own transaction (postgres.SaveCheckpoint) needs.
type Batch struct {
	Store      engine.Progress
	Key, Scope string

	mu    sync.Mutex
	base  engine.Checkpoint // saved before the batch
	items int64
	total int64
	now   func() time.Time
	saved *engine.Checkpoint // saved by the batch itself
}

// CurrentBatch is the batch ctx's step runs, if any.
func CurrentBatch(ctx context.Context) (*Batch, bool) {
	b, ok := ctx.Value(batchKey{}).(*Batch)
	return b, ok
}

// Checkpoint is what saving cursor after this batch writes.
func (b *Batch) Checkpoint(cursor string, done bool) engine.Checkpoint {
	b.mu.Lock()
	defer b.mu.Unlock()
	cp := b.base
	cp.Cursor, cp.Done, cp.Items = cursor, done, b.base.Items+b.items
	if b.total > 0 {
		cp.Total = b.total
	}
	cp.UpdatedAt = b.now().UnixMilli()
	return cp
}

// MarkSaved notes that the batch saved cp itself, in its own transaction:
// Run does not save it again.
func (b *Batch) MarkSaved(cp engine.Checkpoint) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.saved = &cp
}

// Add counts n items done by the batch ctx's step runs; saved with its
// cursor. Outside a step it does nothing.
func Add(ctx context.Context, n int64) {
	if b, ok := CurrentBatch(ctx); ok {
		b.mu.Lock()
		b.items += n
		b.mu.Unlock()
	}
}

// SetTotal says how many items the whole run has, so that the admin can
// estimate when it ends. Outside a step it does nothing.
func SetTotal(ctx context.Context, n int64) {
	if b, ok := CurrentBatch(ctx); ok {
		b.mu.Lock()
		b.total = n
		b.mu.Unlock()
	}
}

// Run runs step batch after batch from the occurrence's saved cursor until
// step says done, saving the cursor after each batch. It returns nil when
// done (at once for an occurrence already done), step's error when a batch
// fails (its retry resumes from the last save), *Interrupted when it stopped
// for the deadline or a shutdown, and *Superseded when a newer attempt took
// the progress over.
//
// With resume=next, an occurrence whose schedule's previous occurrence
// left work unfinished first runs step from that one's cursor to done,
// then its own from the start.
//
// Without a runtime's worker around it (a test calling the handler), Run
// keeps the cursor in memory and runs to done.
func Run(ctx context.Context, step Step) error {
	b, ok := ctx.Value(bindingKey{}).(*Binding)
	if !ok || b.Store == nil {
		return runUnsaved(ctx, step)
	}
	b.started.Store(true)
	if b.Scope != "" {
		prev, err := b.Store.Unfinished(ctx, b.Scope)
		if err != nil {
			return fmt.Errorf("checkpoint: reading the unfinished work of %s: %w", b.Scope, err)
		}
		if prev != "" && prev != b.Key {
			// Another occurrence taking the previous one's work over
			// finishes it; this one goes on with its own.
			var sup *Superseded
			if err := b.run(ctx, prev, step); err != nil && !errors.As(err, &sup) {
				return err
			}
		}
	}
	return b.run(ctx, b.Key, step)
}

func runUnsaved(ctx context.Context, step Step) error {
	cursor := ""
	for {
		bctx := context.WithValue(ctx, batchKey{}, &Batch{now: time.Now})
		next, done, err := step(bctx, cursor)
		if err != nil || done {
			return err
		}
		cursor = next
	}
}

// run runs key's progress to done under a new claim.
func (b *Binding) run(ctx context.Context, key string, step Step) error {
	cp, err := b.Store.ClaimProgress(ctx, key, b.Scope, b.Key, b.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("checkpoint: claiming the progress of %s: %w", key, err)
	}
	var longest time.Duration
	floor := MinMargin
	if deadline, ok := ctx.Deadline(); ok {
		floor = min(floor, time.Until(deadline)/4)
	}
	for batches := 0; !cp.Done; batches++ {
		// An attempt runs at least one batch, however near its deadline, so
		// that its continuations always make progress.
		if reason := stopReason(ctx, max(2*longest, floor)); reason != "" && (batches > 0 || reason != "timeout") {
			return &Interrupted{Key: key, Cursor: cp.Cursor, Items: cp.Items, Reason: reason}
		}
		batch := &Batch{Store: b.Store, Key: key, Scope: b.Scope, base: cp, now: b.Now}
		began := time.Now()
		next, done, err := step(context.WithValue(ctx, batchKey{}, batch), cp.Cursor)
		longest = max(longest, time.Since(began))
		if err != nil {
			if errors.Is(err, engine.ErrSuperseded) {
				return b.superseded(ctx, key)
			}
			if ctx.Err() != nil {
				// The batch was cut short: it is not saved, and runs again.
				return &Interrupted{Key: key, Cursor: cp.Cursor, Items: cp.Items, Reason: reasonOf(ctx)}
			}
			return err
		}
		saved := batch.saved
		if saved == nil {
			c := batch.Checkpoint(next, done)
			if err := b.save(ctx, key, c); err != nil {
				if errors.Is(err, engine.ErrSuperseded) {
					return b.superseded(ctx, key)
				}
				return fmt.Errorf("checkpoint: saving the progress of %s: %w", key, err)
			}
			saved = &c
		}
		cp = *saved
		if b.Saved != nil {
			b.Saved(key, cp)
		}
	}
	return nil
}

// save writes cp, after ctx ended too (a batch that completed as the
// worker stopped keeps its place).
func (b *Binding) save(ctx context.Context, key string, cp engine.Checkpoint) error {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
		defer cancel()
	}
	return b.Store.SaveProgress(ctx, key, b.Scope, cp)
}

func (b *Binding) superseded(ctx context.Context, key string) error {
	by := "a newer attempt"
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	if cps, ok, err := b.Store.Progresses(rctx, []string{key}); err == nil && ok[0] && cps[0].By != "" {
		by = cps[0].By
	}
	return &Superseded{Key: key, By: by}
}

// stopReason says why no batch may start now: "shutdown" once ctx ended,
// "timeout" when its deadline is nearer than margin; "" to go on.
func stopReason(ctx context.Context, margin time.Duration) string {
	if ctx.Err() != nil {
		return reasonOf(ctx)
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < margin {
		return "timeout"
	}
	return ""
}

func reasonOf(ctx context.Context) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "timeout"
	}
	return "shutdown"
}

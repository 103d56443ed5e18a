package engine

import (
	"context"
	"errors"
	"time"
)

// ProgressRetention is how long an occurrence's progress is kept after
// its last write: longer than any retry or continuation of it, and than
// the gap to the next occurrence that takes up its unfinished work.
const ProgressRetention = 30 * 24 * time.Hour

// Progress keeps the place of checkpointed handlers (runtime/checkpoint):
// a cursor per occurrence, written only by the newest attempt that claimed
// it. The core type-asserts it; an engine without it runs a checkpointed
// handler from the start on every attempt.
type Progress interface {
	// ClaimProgress makes this attempt the occurrence's only writer of its
	// progress: it raises the claim generation, which fences every save
	// of an older claim, and returns the progress saved so far with the
	// new generation in Gen. With scope not "" (resume=next) the scope's
	// unfinished occurrence becomes key until it is done. by is the
	// occurrence whose attempt claims (key itself, or with resume=next the
	// next occurrence); atMS is now, which starts a first claim.
	ClaimProgress(ctx context.Context, key, scope, by string, atMS int64) (Checkpoint, error)
	// SaveProgress writes cp's cursor, done, items, total and UpdatedAt as
	// key's progress if cp.Gen is still the newest claim, and ErrSuperseded
	// otherwise. A save with Done clears the scope's unfinished occurrence
	// when it is key.
	SaveProgress(ctx context.Context, key, scope string, cp Checkpoint) error
	// Progresses reads the saved progress of keys; ok is false for a key
	// with none.
	Progresses(ctx context.Context, keys []string) ([]Checkpoint, []bool, error)
	// Unfinished is the scope's occurrence that claimed progress and has
	// not finished, "" for none.
	Unfinished(ctx context.Context, scope string) (string, error)
}

// Checkpoint is an occurrence's saved progress.
type Checkpoint struct {
	Cursor string `json:"cursor"`
	Done   bool   `json:"done,omitempty"`
	// Items is how many items the saved batches processed, as the handler
	// reported them; Total how many there are in all, 0 when unknown.
	Items int64 `json:"items,omitempty"`
	Total int64 `json:"total,omitempty"`
	// Gen is the generation of the claim that wrote it: one more per
	// attempt that claimed the occurrence.
	Gen int64 `json:"gen"`
	// By is the occurrence whose attempt made the newest claim.
	By string `json:"by,omitempty"`
	// StartedAt is when the first attempt claimed it, UpdatedAt when a
	// batch was last saved (unix ms).
	StartedAt int64 `json:"started_at"`
	UpdatedAt int64 `json:"updated_at,omitempty"`
}

// Resumptions is how many attempts took the occurrence up again after the
// first.
func (c Checkpoint) Resumptions() int64 { return max(c.Gen-1, 0) }

// ErrSuperseded is the error of a save by an attempt whose claim a newer
// attempt of the same occurrence has replaced (a worker presumed dead, a
// delivery repeated): its batch is not recorded, and it must stop.
var ErrSuperseded = errors.New("another attempt of this occurrence has taken over its progress")

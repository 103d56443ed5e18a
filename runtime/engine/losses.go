package engine

import (
	"context"
	"time"
)

// Losses is what an engine that can lose acknowledged writes without an
// error (Redis: FLUSHALL, a restart without persistence, eviction, a
// failover to a replica that was behind) tells the core, which then moves
// every cursor past the loss, so that no slot runs twice, and records the
// window of slots that may not have run. An engine whose acknowledged
// writes stay need not have it: the core type-asserts it and, without it,
// finds no loss.
type Losses interface {
	// FindLoss runs when this replica gains the lease of term, before it
	// schedules: it compares the store with what this replica saw of it
	// before, and returns the loss (Found) nobody has recorded yet. accept
	// takes the store as it is now as the normal; the core calls it once
	// the loss is handled (the cursors moved past it, the loss recorded),
	// or at once when none was found. Until then FindLoss finds the same
	// loss again.
	FindLoss(ctx context.Context, term string) (loss Loss, accept func(), err error)
	// LossSeen returns a loss this replica saw as a follower (the
	// holder's store went back) that nobody has recorded within wait of
	// its sighting; Found is false when none is due. The holder may be a
	// replica with no memory of the store before the loss, which finds
	// nothing. The core records it and calls accept.
	LossSeen(ctx context.Context, wait time.Duration) (loss Loss, accept func(), err error)
	// Learn has a follower note what it needs of the store to find, when
	// it leads later, a loss that happened before; it costs a call only
	// until it knows that.
	Learn(ctx context.Context)
}

// Loss is a loss of acknowledged writes an engine found.
type Loss struct {
	Found  bool
	Reason string
	// Now is the engine's clock when the loss was found.
	Now time.Time
	// IntactAt is when this replica last saw the store still holding what
	// it knew: the loss happened after it. Zero when unknown.
	IntactAt time.Time
	// Epoch and Token go into the loss's record (LostWrites), by which
	// a replica that finds the same loss knows it handled.
	Epoch string
	Token int64
}

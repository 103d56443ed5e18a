package engine

import (
	"context"
	"errors"
)

// PausesAhead is an engine whose leader may read the pauses of the
// schedules due at a slot before the slot comes due, so that nothing but
// the enqueue's own transaction lies between the slot and its insert.
// What it read is checked again in that transaction: the read comes with
// a token of the namespace's pauses, which a fenced enqueue names
// (Fence.Pauses), and an enqueue that finds a pause or resume committed
// since the token was read inserts nothing and fails with
// ErrPausesChanged. The core then reads the pauses again and plans those
// slots anew. Without it the core reads pauses when the slots come due.
type PausesAhead interface {
	// PauseStatesAhead is PauseStates with the token of the namespace's
	// pauses, read no later than the pauses themselves: a pause or resume
	// the states do not show changes the token.
	PauseStatesAhead(ctx context.Context, names []string) (pauses []*Pause, windows [][]PauseWindow, token string, err error)
}

// ErrPausesChanged is the result of a fenced enqueue whose Fence.Pauses
// token is out of date: a schedule of the namespace was paused or resumed
// since the token was read. The enqueue inserted nothing; the slots are
// planned again with the pauses read anew.
var ErrPausesChanged = errors.New("the namespace's pauses changed since they were read")

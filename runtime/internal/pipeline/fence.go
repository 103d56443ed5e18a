package pipeline

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// ErrFenced is the error of a fenced command that Redis did not run: the
// lease key no longer held the fence's value.
var ErrFenced = errors.New("fenced out: the lease is no longer this replica's")

// Fence makes the tasks sent with its context conditional on a key (the
// scheduler lease) holding a value (this holder's), checked by Redis in
// the script that writes them (task.go). A write that reaches Redis after
// its sender lost the lease (a connection held by a middlebox, a pause
// between the sender's own check and the write) is refused however late
// it arrives.
type Fence struct {
	Key, Value string
	rejected   atomic.Bool
}

// Rejected reports whether Redis refused a command of this fence because
// the key held another value.
func (f *Fence) Rejected() bool { return f.rejected.Load() }

type fenceKey struct{}

// WithFence returns a context whose tasks the Client sends under f.
func WithFence(ctx context.Context, f *Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

func fenceOf(ctx context.Context) *Fence {
	f, _ := ctx.Value(fenceKey{}).(*Fence)
	return f
}

// ackedSuffix names the key (beside the lease) that a fenced write
// writes when it must be acknowledged; it lives ackedLife. Redis 7 WAITs
// for the primary's offset at the time of the WAIT; Redis 6.2 for the
// connection's last write only, so a script that writes nothing (a task
// ID conflict: the task an earlier, unacknowledged attempt inserted
// through another connection) would be "acknowledged" at once. This write
// makes the acknowledgement cover what is already there on both.
const (
	ackedSuffix = ":acked"
	ackedLife   = time.Minute
)

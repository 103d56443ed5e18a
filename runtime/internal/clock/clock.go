// Package clock is the one source of "now" for the lease, the scheduler and
// the ledger, so tests can place a runtime at any instant (the day before a
// fall-back, a replica running ahead) without waiting for real time.
//
// Time read from the real clock carries Go's monotonic reading, and an
// offset clock keeps it (time.Time.Add preserves it), so the lease's trust
// window is measured on the monotonic clock whichever clock is used.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// Real is the host's clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// Offset is the host's clock shifted by a fixed amount: a replica whose
// clock runs ahead (positive) or behind (negative).
type Offset time.Duration

// Now returns the host's time shifted by the offset.
func (o Offset) Now() time.Time { return time.Now().Add(time.Duration(o)) }

// Stub is a clock that moves only when told to. Its zero value is not
// usable: make one with NewStub.
type Stub struct {
	mu  sync.Mutex
	now time.Time
}

// NewStub returns a clock stopped at t.
func NewStub(t time.Time) *Stub { return &Stub{now: t} }

// Now returns the stub's current time.
func (s *Stub) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// Set moves the clock to t.
func (s *Stub) Set(t time.Time) {
	s.mu.Lock()
	s.now = t
	s.mu.Unlock()
}

// Advance moves the clock forward by d and returns the new time.
func (s *Stub) Advance(d time.Duration) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.now.Add(d)
	return s.now
}

// Backoff is capped exponential backoff for retrying Redis calls.
type Backoff struct {
	min, max, cur time.Duration
}

// NewBackoff returns a backoff from min doubling to at most max.
func NewBackoff(min, max time.Duration) *Backoff { return &Backoff{min: min, max: max} }

// Next returns the next wait.
func (b *Backoff) Next() time.Duration {
	b.cur = min(max(b.cur*2, b.min), b.max)
	return b.cur
}

// Reset starts again from min.
func (b *Backoff) Reset() { b.cur = 0 }

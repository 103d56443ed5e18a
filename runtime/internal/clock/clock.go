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

// Timer fires once on C when its clock reaches its deadline, as a
// time.Timer does.
type Timer interface {
	C() <-chan time.Time
	// Reset makes the timer fire d from now, on its clock, discarding a
	// firing not yet received.
	Reset(d time.Duration)
	Stop()
}

// timerMaker is a clock that makes its own timers: one whose time does
// not follow the host's.
type timerMaker interface {
	newTimer(d time.Duration) Timer
}

// NewTimer returns a timer that fires d from now on clk: on the host's
// timers for a clock that moves with the host's, on clk's own for a Stub.
func NewTimer(clk Clock, d time.Duration) Timer {
	if m, ok := clk.(timerMaker); ok {
		return m.newTimer(d)
	}
	return realTimer{time.NewTimer(d)}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time   { return r.t.C }
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }
func (r realTimer) Stop()                 { r.t.Stop() }

// Stub is a clock that moves only when told to. Its timers fire when a
// Set or an Advance reaches their deadlines, so a test moves a loop from
// one wake-up to the next without waiting for real time. Its zero value
// is not usable: make one with NewStub.
type Stub struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*stubTimer]struct{} // the armed ones
}

// NewStub returns a clock stopped at t.
func NewStub(t time.Time) *Stub { return &Stub{now: t, timers: map[*stubTimer]struct{}{}} }

// Now returns the stub's current time.
func (s *Stub) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// Set moves the clock to t, firing the timers due by then.
func (s *Stub) Set(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = t
	s.fireDue()
}

// Advance moves the clock forward by d, fires the timers due by then and
// returns the new time.
func (s *Stub) Advance(d time.Duration) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.now.Add(d)
	s.fireDue()
	return s.now
}

// fireDue fires and disarms every timer whose deadline is not after now.
// s.mu is held.
func (s *Stub) fireDue() {
	for t := range s.timers {
		if !t.deadline.After(s.now) {
			delete(s.timers, t)
			select {
			case t.c <- s.now:
			default: // a firing not yet received stands for this one
			}
		}
	}
}

func (s *Stub) newTimer(d time.Duration) Timer {
	t := &stubTimer{s: s, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// stubTimer is a Timer on a Stub.
type stubTimer struct {
	s        *Stub
	c        chan time.Time
	deadline time.Time // guarded by s.mu
}

func (t *stubTimer) C() <-chan time.Time { return t.c }

func (t *stubTimer) Reset(d time.Duration) {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	select {
	case <-t.c:
	default:
	}
	t.deadline = t.s.now.Add(d)
	t.s.timers[t] = struct{}{}
	t.s.fireDue()
}

func (t *stubTimer) Stop() {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	delete(t.s.timers, t)
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

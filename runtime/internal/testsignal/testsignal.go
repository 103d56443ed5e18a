// Package testsignal lets a test wait for a named event inside a running
// loop ("the leader stepped") instead of polling for its effects or
// sleeping. A Signal's zero value is what production holds: Signal on it
// is one nil check and does nothing. A test calls Init before the loop
// starts, then waits with WaitOrTimeout.
package testsignal

import "time"

// TB is the part of testing.TB a signal reports through.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
}

// WaitTimeout bounds WaitOrTimeout: a signal that does not come this long
// is a hang, not a slow machine.
const WaitTimeout = 10 * time.Second

// BufferSize is how many signals a test may leave unreceived before the
// sender reports a full channel.
const BufferSize = 100

// Signal carries values of T from the code under test to a test.
type Signal[T any] struct {
	c  chan T
	tb TB
}

// Init makes the signal deliver; only tests call it, before the code that
// signals starts.
func (s *Signal[T]) Init(tb TB) {
	s.c = make(chan T, BufferSize)
	s.tb = tb
}

// Signal sends v to a test that called Init, and does nothing otherwise.
// It never blocks: a full channel is a test's error.
func (s *Signal[T]) Signal(v T) {
	if s.c == nil {
		return
	}
	select {
	case s.c <- v:
	default:
		s.tb.Errorf("test signal channel full (%d unreceived): a test stopped receiving", BufferSize)
	}
}

// WaitOrTimeout returns the next value signalled, or fails the test after
// WaitTimeout and returns the zero value.
func (s *Signal[T]) WaitOrTimeout() T {
	s.tb.Helper()
	select {
	case v := <-s.c:
		return v
	case <-time.After(WaitTimeout):
		s.tb.Errorf("no test signal within %s", WaitTimeout)
		var zero T
		return zero
	}
}

// WaitFor receives signals until one satisfies ok and returns it, or
// fails the test once WaitTimeout has passed without one.
func (s *Signal[T]) WaitFor(what string, ok func(T) bool) T {
	s.tb.Helper()
	deadline := time.NewTimer(WaitTimeout)
	defer deadline.Stop()
	for {
		select {
		case v := <-s.c:
			if ok(v) {
				return v
			}
		case <-deadline.C:
			s.tb.Errorf("no test signal for %s within %s", what, WaitTimeout)
			var zero T
			return zero
		}
	}
}

// Drain discards the values signalled so far.
func (s *Signal[T]) Drain() {
	for {
		select {
		case <-s.c:
		default:
			return
		}
	}
}

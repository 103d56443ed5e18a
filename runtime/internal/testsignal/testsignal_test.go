package testsignal

import (
	"fmt"
	"testing"
)

// A signal no test initialised, as production holds it, does nothing.
func TestAZeroSignalDoesNothing(t *testing.T) {
	var s Signal[int]
	s.Signal(1)
	if s.c != nil {
		t.Fatal("a zero signal made a channel")
	}
}

// An initialised signal delivers in order; WaitFor passes over values
// that do not satisfy it.
func TestAnInitialisedSignalDeliversInOrder(t *testing.T) {
	var s Signal[int]
	s.Init(t)
	for i := range 5 {
		s.Signal(i)
	}
	if got := s.WaitOrTimeout(); got != 0 {
		t.Errorf("first value %d, want 0", got)
	}
	if got := s.WaitFor("a value over 2", func(v int) bool { return v > 2 }); got != 3 {
		t.Errorf("WaitFor returned %d, want 3, the first over 2", got)
	}
	s.Drain()
	select {
	case v := <-s.c:
		t.Errorf("value %d left after Drain", v)
	default:
	}
}

// recorder is a TB that keeps what it was told.
type recorder struct{ errors []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// A sender never blocks: past the buffer, it reports a test that stopped
// receiving.
func TestAFullSignalReportsInsteadOfBlocking(t *testing.T) {
	var s Signal[int]
	var r recorder
	s.Init(&r)
	for i := range BufferSize + 1 {
		s.Signal(i)
	}
	if len(r.errors) != 1 {
		t.Errorf("%d errors reported for one value past the buffer, want 1: %q", len(r.errors), r.errors)
	}
}

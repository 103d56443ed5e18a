package clock

import (
	"testing"
	"time"
)

// A stub's timer fires when the clock reaches its deadline, not before,
// and only once; Reset re-arms it from the stub's time, Stop disarms it.
func TestStubTimerFiresWhenTheClockReachesItsDeadline(t *testing.T) {
	start := time.Date(2026, 3, 8, 1, 59, 0, 0, time.UTC)
	s := NewStub(start)
	tm := NewTimer(s, 10*time.Second)
	fired := func() (time.Time, bool) {
		select {
		case at := <-tm.C():
			return at, true
		default:
			return time.Time{}, false
		}
	}
	s.Advance(9 * time.Second)
	if at, ok := fired(); ok {
		t.Fatalf("fired at %s, before its deadline", at)
	}
	s.Advance(time.Second)
	if at, ok := fired(); !ok || !at.Equal(start.Add(10*time.Second)) {
		t.Fatalf("fired %v at %s, want at its deadline %s", ok, at, start.Add(10*time.Second))
	}
	s.Advance(time.Hour)
	if _, ok := fired(); ok {
		t.Fatal("fired twice for one deadline")
	}

	tm.Reset(time.Minute)
	s.Set(s.Now().Add(2 * time.Minute)) // a jump past the deadline fires it too
	if _, ok := fired(); !ok {
		t.Fatal("a Set past the deadline did not fire the timer")
	}

	tm.Reset(time.Second)
	tm.Stop()
	s.Advance(time.Minute)
	if _, ok := fired(); ok {
		t.Fatal("a stopped timer fired")
	}

	tm.Reset(0) // due at once, as time.Timer's is
	if _, ok := fired(); !ok {
		t.Fatal("a timer reset to 0 did not fire at once")
	}
}

// A firing not yet received is dropped by Reset, so a loop that re-arms
// its timer never wakes for a deadline it replaced.
func TestStubTimerResetDropsAnUnreceivedFiring(t *testing.T) {
	s := NewStub(time.Unix(0, 0))
	tm := NewTimer(s, time.Second)
	s.Advance(time.Second)
	tm.Reset(time.Hour)
	select {
	case <-tm.C():
		t.Fatal("received the firing of the deadline that Reset replaced")
	default:
	}
}

// On a clock that moves with the host's, NewTimer is a real timer.
func TestNewTimerOnTheRealClockWaitsRealTime(t *testing.T) {
	for _, clk := range []Clock{Real{}, Offset(time.Hour)} {
		tm := NewTimer(clk, time.Millisecond)
		select {
		case <-tm.C():
		case <-time.After(10 * time.Second):
			t.Fatalf("%T: a 1ms timer did not fire within 10s", clk)
		}
		tm.Stop()
	}
}

package chaoskit

import (
	"slices"
	"testing"
	"time"
)

// The environment tunes a run; unset, the defaults hold, every fault
// kind selected.
func TestFromEnv(t *testing.T) {
	kinds := []string{"kill", "pause", "restart"}
	for _, v := range []string{"CHAOS_FAULTS", "CHAOS_REPLICAS", "CHAOS_DURATION", "CHAOS_SEED", "CHAOS_SKEW", "CHAOS_KEEP"} {
		t.Setenv(v, "")
	}
	c := FromEnv(t, kinds)
	if c.Replicas != 3 || c.Duration != time.Minute || c.Seed != 1 || c.Skew != 3*time.Second || c.Keep {
		t.Errorf("defaults = %+v", c)
	}
	if got := c.Selected(kinds); !slices.Equal(got, kinds) {
		t.Errorf("Selected = %v, want every kind", got)
	}
	t.Setenv("CHAOS_FAULTS", "restart, kill")
	t.Setenv("CHAOS_REPLICAS", "5")
	t.Setenv("CHAOS_DURATION", "300s")
	c = FromEnv(t, kinds)
	if got := c.Selected(kinds); !slices.Equal(got, []string{"kill", "restart"}) {
		t.Errorf("Selected = %v, want kill and restart in the kinds' order", got)
	}
	if c.Replicas != 5 || c.Duration != 300*time.Second {
		t.Errorf("replicas %d, duration %s; want 5 and 300s", c.Replicas, c.Duration)
	}
}

// The clocks run on true time, then alternately ahead and behind; from
// the fourth replica on by half the skew.
func TestOffset(t *testing.T) {
	c := Config{Skew: 3 * time.Second}
	want := []time.Duration{0, 3 * time.Second, -3 * time.Second, 1500 * time.Millisecond, -1500 * time.Millisecond}
	for i, w := range want {
		if got := c.Offset(i); got != w {
			t.Errorf("Offset(%d) = %s, want %s", i, got, w)
		}
	}
	if got := (Config{}).Offset(1); got != 0 {
		t.Errorf("Offset with no skew = %s, want 0", got)
	}
}

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

// The long job's logs count each item's processings across replicas; a
// line a SIGKILL cut short counts nothing, and an item processed again
// counts as a duplicate.
func TestBatchLogsCountEachProcessing(t *testing.T) {
	dir := t.TempDir()
	a, err := OpenBatchLog(dir, "r0.1")
	if err != nil {
		t.Fatal(err)
	}
	a.Attempt()
	a.Batch(0, 20)
	a.Batch(20, 40)
	a.f.WriteString("batch 40 6") // cut short by a SIGKILL
	a.Close()
	b, err := OpenBatchLog(dir, "r1.1")
	if err != nil {
		t.Fatal(err)
	}
	b.Attempt()
	b.Batch(20, 40) // the batch the crash left unsaved, again
	b.Batch(40, 50)
	b.Done()
	b.Close()
	rec, err := ReadBatchLogs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Attempts != 2 || !rec.Done || rec.Batches["r0.1"] != 2 || rec.Batches["r1.1"] != 2 {
		t.Errorf("record %+v; want 2 attempts, done, 2 batches each", rec)
	}
	c := CountBatch(60, func(i int) int { return rec.Processed[i] })
	if c.Items != 60 || c.Dups != 20 || c.Missing != 10 {
		t.Errorf("counts %+v; want 60 items, 20 dups, 10 missing", c)
	}
}

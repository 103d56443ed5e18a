// Package chaoskit is what the chaos harnesses of every engine share
// (`make chaos`, CHAOS_ENGINE=postgres for the Postgres one): the run's
// settings from the environment, the replicas' clock offsets, the replica
// processes' lifecycle and the harness's waits. Each engine's harness
// keeps its own faults and its own judgement.
package chaoskit

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Config is a chaos run's settings, read from the environment so that a
// run can be tuned without editing code.
type Config struct {
	Replicas int
	Duration time.Duration
	Seed     uint64
	// Skew is how far the replicas' clocks run apart (see Offset).
	Skew  time.Duration
	TTL   time.Duration
	Grace time.Duration
	// Faults are the fault kinds the run injects (CHAOS_FAULTS).
	Faults map[string]bool
	// Keep keeps the logs and records of a passing run (CHAOS_KEEP=1).
	Keep bool
}

// FromEnv reads CHAOS_REPLICAS, CHAOS_DURATION, CHAOS_SEED, CHAOS_SKEW,
// CHAOS_KEEP and CHAOS_FAULTS (a comma list of kinds; by default every
// one), failing t on a value it cannot use.
func FromEnv(t testing.TB, kinds []string) Config {
	t.Helper()
	c := Config{Replicas: 3, Duration: 60 * time.Second, Seed: 1, Skew: 3 * time.Second,
		TTL: 2 * time.Second, Grace: 30 * time.Second, Faults: map[string]bool{},
		Keep: os.Getenv("CHAOS_KEEP") == "1"}
	for _, f := range kinds {
		c.Faults[f] = true
	}
	if v := os.Getenv("CHAOS_FAULTS"); v != "" {
		c.Faults = map[string]bool{}
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			if !slices.Contains(kinds, f) {
				t.Fatalf("CHAOS_FAULTS=%q: unknown fault %q; want a comma list of %s", v, f, strings.Join(kinds, ", "))
			}
			c.Faults[f] = true
		}
	}
	var err error
	if v := os.Getenv("CHAOS_REPLICAS"); v != "" {
		if c.Replicas, err = strconv.Atoi(v); err != nil || c.Replicas < 2 {
			t.Fatalf("CHAOS_REPLICAS=%q: want an integer of at least 2", v)
		}
	}
	if v := os.Getenv("CHAOS_DURATION"); v != "" {
		if c.Duration, err = time.ParseDuration(v); err != nil || c.Duration < 10*time.Second {
			t.Fatalf("CHAOS_DURATION=%q: want a duration of at least 10s, e.g. 60s", v)
		}
	}
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		if c.Seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("CHAOS_SEED=%q: want a non-negative integer", v)
		}
	}
	if v := os.Getenv("CHAOS_SKEW"); v != "" {
		if c.Skew, err = time.ParseDuration(v); err != nil || c.Skew < 0 || c.Skew >= c.Grace/2 {
			t.Fatalf("CHAOS_SKEW=%q: want a duration between 0 and %s", v, c.Grace/2)
		}
	}
	return c
}

// Selected lists the kinds the run injects, in kinds' order.
func (c Config) Selected(kinds []string) []string {
	var out []string
	for _, f := range kinds {
		if c.Faults[f] {
			out = append(out, f)
		}
	}
	return out
}

// Offset gives replica i its clock offset: the first runs on true time,
// the others alternate ahead and behind, so leadership moves between
// clocks that disagree by up to twice the skew.
func (c Config) Offset(i int) time.Duration {
	if i == 0 || c.Skew == 0 {
		return 0
	}
	d := c.Skew
	if i > 2 {
		d = c.Skew / 2
	}
	if i%2 == 0 {
		return -d
	}
	return d
}

// State is a replica process's state as the harness made it.
type State int

const (
	Dead State = iota
	Running
	Paused
)

// Proc is one incarnation of a replica process.
type Proc struct {
	Name   string
	Cmd    *exec.Cmd
	Exited chan struct{} // closed when the process has been waited for
	State  State
}

// Start starts cmd as the process's new incarnation.
func (p *Proc) Start(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	p.Cmd, p.Exited, p.State = cmd, make(chan struct{}), Running
	exited := p.Exited
	go func() { cmd.Wait(); close(exited) }()
	return nil
}

// StopAll stops every process the way a deploy does: SIGTERM, after which
// each releases its lease and stops its worker before exiting. A process
// that exits with an error, or not within 20 s, fails t.
func StopAll(t testing.TB, procs []*Proc) {
	for _, p := range procs {
		if p.State == Paused {
			p.Cmd.Process.Signal(syscall.SIGCONT)
			p.State = Running
		}
		if p.State == Running {
			p.Cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, p := range procs {
		if p.State != Running {
			continue
		}
		timer := time.NewTimer(20 * time.Second)
		select {
		case <-p.Exited:
			if code := p.Cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("chaos: replica %s exited with status %d on SIGTERM; see replica-%s.log", p.Name, code, p.Name)
			}
		case <-timer.C:
			t.Errorf("chaos: replica %s did not exit within 20s of SIGTERM; killing it", p.Name)
			p.Cmd.Process.Kill()
			<-p.Exited
		}
		timer.Stop()
		p.State = Dead
	}
}

// KillAll is the failure-path cleanup: it ends only the processes the
// harness started.
func KillAll(procs []*Proc) {
	for _, p := range procs {
		if p.State != Dead && p.Cmd != nil {
			p.Cmd.Process.Signal(syscall.SIGCONT)
			p.Cmd.Process.Kill()
			<-p.Exited
			p.State = Dead
		}
	}
}

// WaitUntil polls cond, which reads state other processes change, and
// fails t, saying why, if it is not true within within; the interval only
// paces the polling.
func WaitUntil(t testing.TB, within time.Duration, what string, cond func() bool, why ...func() string) bool {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("chaos: timed out after %s waiting for %s", within, what)
			for _, f := range why {
				msg += ": " + f()
			}
			t.Error(msg)
			return false
		}
		<-tick.C
	}
	return true
}

// EvidenceDir makes the run's directory of logs and records: not
// t.TempDir, since they are the evidence when the run fails, so they are
// kept unless it passes (or c.Keep). Readable by all, so that servers the
// run starts as another user can use it.
func (c Config) EvidenceDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || c.Keep {
			t.Logf("chaos: logs and execution records kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// WriteSummary writes the summary line to path, if set, for make to print
// after go test's own trailer.
func WriteSummary(t testing.TB, path, line string) {
	if path == "" {
		return
	}
	if err := os.WriteFile(path, []byte(line+"\n"), 0o644); err != nil {
		t.Errorf("writing %s: %v", path, err)
	}
}

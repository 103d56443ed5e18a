package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime"
)

// The parted, parallel array writes exactly what json.Encoder with the
// admin's indentation writes for the whole slice, at every size around a
// part's edge, so the unpaged list's bytes did not change.
func TestWriteIndentedArrayMatchesTheEncoder(t *testing.T) {
	t.Parallel()
	type row struct {
		Name   string            `json:"name"`
		Next   *string           `json:"next_run"`
		Counts map[string]int    `json:"counts,omitempty"`
		Nested []map[string]bool `json:"nested"`
	}
	// The last size has four times as many parts as can be in flight
	// (2 x GOMAXPROCS), plus some, so most parts are written into a
	// recycled buffer whatever the number of cores.
	recycled := (8*goruntime.GOMAXPROCS(0)+5)*512 + 7
	for _, n := range []int{0, 1, 2, 511, 512, 513, 1025, 3000, recycled} {
		items := make([]any, n)
		for i := range items {
			next := fmt.Sprintf("2026-12-0%dT03:17:00+01:00", i%9+1)
			r := row{Name: fmt.Sprintf("job-%06d <&>", i), Nested: []map[string]bool{{"x": i%2 == 0}}}
			if i%3 == 0 {
				r.Next, r.Counts = &next, map[string]int{"failed": i}
			}
			items[i] = r
		}
		checkArrayIsTheEncoders(t, fmt.Sprintf("%d items", n), items)
	}
}

// checkArrayIsTheEncoders fails t unless writeIndentedArray writes for
// items what json.Encoder with the admin's indentation writes.
func checkArrayIsTheEncoders(t *testing.T, what string, items []any) {
	t.Helper()
	var want, got bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetIndent("", "  ")
	if err := enc.Encode(items); err != nil {
		t.Fatal(err)
	}
	if err := writeIndentedArray(&got, items); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("%s: the parted array differs from the encoder's\ngot  %.400q\nwant %.400q", what, got.String(), want.String())
	}
}

// A value that does not marshal is an error, not a truncated array that
// looks whole.
func TestWriteIndentedArrayReportsAnUnmarshallableItem(t *testing.T) {
	t.Parallel()
	items := make([]any, 1500)
	for i := range items {
		items[i] = i
	}
	items[700] = func() {}
	var got bytes.Buffer
	err := writeIndentedArray(&got, items)
	var unsupported *json.UnsupportedTypeError
	if !errors.As(err, &unsupported) {
		t.Errorf("error %v, want json's UnsupportedTypeError", err)
	}
	if strings.HasSuffix(got.String(), "]\n") {
		t.Error("the array was closed as if whole")
	}
}

// A writer that fails (a client gone) stops the marshalling and returns,
// without a goroutine left behind (the package's TestMain checks leaks).
func TestWriteIndentedArrayStopsWhenTheWriterFails(t *testing.T) {
	t.Parallel()
	items := make([]any, 20000)
	for i := range items {
		items[i] = map[string]int{"n": i}
	}
	err := writeIndentedArray(&failingWriter{after: 100 << 10}, items)
	if !errors.Is(err, errGone) {
		t.Errorf("error %v, want the writer's", err)
	}
}

var errGone = errors.New("client gone")

// failingWriter accepts after bytes, then fails.
type failingWriter struct{ after int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.after {
		return 0, errGone
	}
	w.after -= len(p)
	return len(p), nil
}

// The unpaged list's writing at 100,000 schedules, rows as the bench's
// admin step seeds them, for BENCHMARKS.md:
// go test -run '^$' -bench WriteIndentedArray -benchmem ./runtime/admin
func BenchmarkWriteIndentedArray(b *testing.B) {
	at := time.Date(2026, 12, 2, 3, 17, 0, 123456789, time.UTC)
	next := "2026-12-02T04:20:00+01:00"
	items := make([]any, 100_000)
	for i := range items {
		name := fmt.Sprintf("job-%06d", i)
		items[i] = apiSchedule{Name: name, Expression: "*/5 * * * *", Zone: "Europe/Berlin", Queue: "default",
			Timeout: "30m0s", Grace: "5m0s", Overlap: "allow", Misfire: "skip", Status: runtime.StatusOK,
			NextRun: &next, NextRunUTC: &next,
			Counters: &apiCounters{Enqueued: 120, Succeeded: 118, Failed: 2, LastEnqueue: &at, LastSuccess: &at, LastFailure: &at},
			LastRun: &runtime.Record{ID: "cron:admin/" + name + ":1764645300", Schedule: name, Slot: at,
				Outcome: runtime.OutcomeSucceeded, EnqueuedAt: at, StartedAt: at, FinishedAt: at, DurationMS: 247,
				MaxRetry: 3, Replica: "web-1"}}
	}
	for b.Loop() {
		if err := writeIndentedArray(io.Discard, items); err != nil {
			b.Fatal(err)
		}
	}
}

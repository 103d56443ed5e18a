package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/belfry/belfry/internal/jsontest"
)

// plainCommit is Commit without any methods, so that the reference stays
// encoding/json's own even if Commit gains a MarshalJSON.
type plainCommit Commit

// referenceJSON is encoding/json's array of items, nil lists and maps
// written as [] and {} as the scripts need them.
func referenceJSON(t testing.TB, items []Commit) []byte {
	t.Helper()
	plain := make([]plainCommit, len(items))
	for i, c := range items {
		if c.Recs == nil {
			c.Recs = []Rec{}
		}
		if c.Counts == nil {
			c.Counts = map[string]int64{}
		}
		plain[i] = plainCommit(c)
	}
	b, err := json.Marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sampleCommits covers every field of Commit and Rec, each string field
// with every escape, the empty and nil lists and maps, and more counts
// than appendJSON's sort keeps on the stack.
func sampleCommits() []Commit {
	var out []Commit
	for i, s := range jsontest.AwkwardStrings {
		rec := Rec{ID: s, Slot: int64(i) * 1_700_000_000, Manual: i%2 == 0, At: -int64(i), Outcome: s,
			Score: int64(i) << 40, Actor: s, Member: s, Error: s}
		out = append(out, Commit{Name: s, Cursor: int64(i) - 3, LastID: s, Recs: []Rec{rec, {ID: "plain"}},
			Counts: map[string]int64{s: int64(i), "enqueued": 1, "last_enqueue": 1_764_000_000_000}, Limit: i})
	}
	many := map[string]int64{}
	for i := range 20 {
		many[fmt.Sprintf("counter-%02d", 19-i)] = int64(i)
	}
	out = append(out,
		Commit{Name: "nil lists"},
		Commit{Name: "empty lists", Recs: []Rec{}, Counts: map[string]int64{}},
		Commit{Name: "many counts", Counts: many},
	)
	return out
}

func TestAppendCommitsMatchesEncodingJSON(t *testing.T) {
	items := sampleCommits()
	var commits, recs []any
	for _, c := range items {
		commits = append(commits, c)
		for _, r := range c.Recs {
			recs = append(recs, r)
		}
		one := []Commit{c}
		if got, want := appendCommits(nil, one), referenceJSON(t, one); !bytes.Equal(got, want) {
			t.Errorf("commit %q:\n got %s\nwant %s", c.Name, got, want)
		}
	}
	jsontest.EveryFieldSetSomewhere(t, commits)
	jsontest.EveryFieldSetSomewhere(t, recs)
	if got, want := appendCommits([]byte("kept"), items), referenceJSON(t, items); !bytes.Equal(got[4:], want) || string(got[:4]) != "kept" {
		t.Errorf("the whole batch differs from encoding/json's:\n got %s\nwant %s", got, want)
	}
	if got := appendCommits(nil, nil); string(got) != "[]" {
		t.Errorf("no commits: got %s, want []", got)
	}
}

// spikeCommits is a commit chunk as the 100k spike writes it: one
// enqueued record and two counts a schedule.
func spikeCommits() []Commit {
	items := make([]Commit, CommitChunk)
	for i := range items {
		name := fmt.Sprintf("daily-%06d", i)
		id := "cron:bench-spike/" + name + ":1764633600"
		items[i] = Commit{Name: name, Cursor: 1764633600, LastID: id, Limit: 50,
			Recs:   []Rec{{ID: id, Slot: 1764633600, At: 1764633600123, Outcome: "enqueued", Score: 1764633600000}},
			Counts: map[string]int64{"enqueued": 1, "last_enqueue": 1764633600123}}
	}
	return items
}

// The commit's JSON, hand-written and through encoding/json, for the
// ratio in BENCHMARKS.md: go test -run '^$' -bench CommitJSON ./runtime/internal/store
func BenchmarkCommitJSON(b *testing.B) {
	items := spikeCommits()
	b.Run("appendCommits", func(b *testing.B) {
		b.ReportAllocs()
		size := len(appendCommits(nil, items))
		for b.Loop() {
			// As Commit does after its first chunk: a buffer sized by
			// the one before.
			appendCommits(make([]byte, 0, size), items)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			referenceJSON(b, items)
		}
	})
}

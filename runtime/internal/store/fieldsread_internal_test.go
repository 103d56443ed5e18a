package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/belfry/belfry/internal/redistest"
)

// A hash that grew past one HSCAN step between its HLEN and its whole read
// (100,000 schedules due at once are all running for a moment) is scanned
// on to its end, each step bounded, and every name's field is found.
func TestAWholeReadOfAHashThatGrewScansOn(t *testing.T) {
	t.Parallel()
	rdb := redistest.Shared(t)
	ctx := context.Background()
	key := redistest.Uniq("grown") + ":active"
	const fields = 5 * listpackFields
	names := make([]string, fields)
	p := rdb.Pipeline()
	for i := range names {
		names[i] = fmt.Sprintf("job-%05d", i)
		p.HSet(ctx, key, names[i], "running")
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Del(context.Background(), key) })
	const sizeAtHLEN = 10
	if !readsWhole(sizeAtHLEN, len(names)) {
		t.Fatal("a 10-field hash is not read whole for 5,000 names")
	}
	pipe := rdb.Pipeline()
	read := queueFieldsRead(ctx, pipe, key, names, sizeAtHLEN)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if _, cursor := read.scan.Val(); cursor == 0 {
		t.Fatalf("the first step read all %d fields; the test needs a hash past one step", fields)
	}
	seen := make([]bool, len(names))
	if err := read.each(ctx, New(rdb, redistest.Uniq("grown"), 3, 0), names, func(i int, v string) { seen[i] = v == "running" }); err != nil {
		t.Fatal(err)
	}
	for i, ok := range seen {
		if !ok {
			t.Fatalf("%s: not found running", names[i])
		}
	}
}

package pipeline

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/belfry/belfry/runtime/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// markSetup returns a client and a fence its holder holds.
func markSetup(t *testing.T) (context.Context, redis.UniversalClient, *Client, *Fence) {
	t.Helper()
	ctx := context.Background()
	rdb := redistest.Shared(t)
	lease := redistest.Uniq("lease")
	if err := rdb.Set(ctx, lease, "r0|1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	return ctx, rdb, NewClient(rdb), &Fence{Key: lease, Value: "r0|1"}
}

// The marks of one transaction are written by one script, and each only if
// its own call left its task key in Redis: a call that failed beside calls
// that succeeded (the case the script's one EXISTS of every key does not
// cover) marks nothing, whichever place it has in the transaction.
func TestMarksOfOneTransactionAreEachWrittenOnlyWhereTheTaskExists(t *testing.T) {
	t.Parallel()
	ctx, rdb, c, f := markSetup(t)
	task, cursors, lastID := redistest.Uniq("task"), redistest.Uniq("cursors"), redistest.Uniq("lastid")
	const insert = `if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1`
	const failing = `return redis.error_reply('OOM command not allowed')`
	rdb.Set(ctx, task+":there", "x", time.Minute) // a conflict: handled, so marked
	cases := []struct {
		name, body string
		marked     bool
	}{
		{"first-fails", failing, false},
		{"inserted", insert, true},
		{"there", insert, true},
		{"middle-fails", failing, false},
		{"inserted-too", insert, true},
		{"last-fails", failing, false},
	}
	var calls []*pipelinedCall
	for i, tc := range cases {
		key := task + ":" + tc.name
		if tc.name == "there" {
			key = task + ":there"
		}
		calls = append(calls, &pipelinedCall{ctx: ctx, body: tc.body, keys: []string{key}, args: []any{"x"}, fence: f,
			mark: &Mark{Exists: key, Hash: cursors, Field: tc.name, Value: int64(10 + i), Also: lastID, AlsoValue: key}})
	}
	if err := c.sendFenced(ctx, f, calls); err != nil {
		t.Fatal(err)
	}
	for i, tc := range cases {
		cursor, _ := rdb.HGet(ctx, cursors, tc.name).Result()
		last, _ := rdb.HGet(ctx, lastID, tc.name).Result()
		want, wantLast := "", ""
		if tc.marked {
			want, wantLast = fmt.Sprint(10+i), calls[i].keys[0]
		}
		if cursor != want || last != wantLast {
			t.Errorf("%s: cursor %q, last ID %q; want %q, %q", tc.name, cursor, last, want, wantLast)
		}
	}
}

// Marks of one field in one transaction end at the last, as a schedule's
// slots come in rising order; marks without an Also leave the Also hash
// alone, and a transaction whose tasks all exist writes each one.
func TestMarksOfOneTransactionKeepTheLastOfAField(t *testing.T) {
	t.Parallel()
	ctx, rdb, c, f := markSetup(t)
	task, cursors, lastID := redistest.Uniq("task"), redistest.Uniq("cursors"), redistest.Uniq("lastid")
	var calls []*pipelinedCall
	for i := range 5 {
		key := fmt.Sprintf("%s:%d", task, i)
		rdb.Set(ctx, key, "x", time.Minute)
		m := &Mark{Exists: key, Hash: cursors, Field: "tick", Value: int64(i)}
		if i == 4 {
			m.Field = "skip"
			m.Also, m.AlsoValue = lastID, key
		}
		calls = append(calls, &pipelinedCall{ctx: ctx, body: `return 0`, keys: []string{key}, fence: f, mark: m})
	}
	if err := c.sendFenced(ctx, f, calls); err != nil {
		t.Fatal(err)
	}
	got := rdb.HGetAll(ctx, cursors).Val()
	if len(got) != 2 || got["tick"] != "3" || got["skip"] != "4" {
		t.Errorf("cursors %v, want tick 3 and skip 4", got)
	}
	if got := rdb.HGetAll(ctx, lastID).Val(); len(got) != 1 || got["skip"] != task+":4" {
		t.Errorf("last IDs %v, want only skip's", got)
	}
}

package admin

import (
	"testing"
	"time"

	"github.com/belfry/belfry/runtime/core"
)

func TestProgressWords(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 5, 3, 30, 0, 0, time.UTC)
	for _, c := range []struct {
		p    core.Progress
		want string
	}{
		{core.Progress{Cursor: "48210", Items: 1200, Total: 10000, Resumptions: 2, Rate: 85.25, Estimate: now.Add(4 * time.Minute)},
			`1200 of 10000 items · at "48210" · 2 resumptions · 85.2/s · ends in 4 min`},
		{core.Progress{Cursor: "9", Done: true, Items: 1, Resumptions: 1, Rate: 3}, "1 item · 1 resumption · 3.0/s"},
		{core.Progress{}, "0 items"},
	} {
		if got := progressWords(&c.p, time.UTC, now); got != c.want {
			t.Errorf("progressWords(%+v) = %q, want %q", c.p, got, c.want)
		}
	}
}

package core

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/belfry/belfry/registry"
)

func nilMapHandler(context.Context, registry.Occurrence) error {
	var m map[string]int
	m["boom"]++ // assignment to entry in nil map
	return nil
}

// repanicking is a middleware that notes a panic and lets it go on, as a
// tracing or error-reporting middleware does.
func repanicking(next registry.HandlerFunc) registry.HandlerFunc {
	return func(ctx context.Context, occ registry.Occurrence) error {
		defer func() {
			if p := recover(); p != nil {
				panic(p)
			}
		}()
		return next(ctx, occ)
	}
}

// A panic's recorded stack starts where the handler panicked, also when a
// middleware between the recorder and the handler recovered it and
// panicked again: its frames come above the handler's.
func TestPanicsStackStartsAtTheHandlerThroughARepanickingMiddleware(t *testing.T) {
	for name, h := range map[string]registry.HandlerFunc{
		"handler alone":         nilMapHandler,
		"through a re-panic":    repanicking(nilMapHandler),
		"through two re-panics": repanicking(repanicking(nilMapHandler)),
	} {
		err := callRecovering(context.Background(), h, registry.Occurrence{})
		var p *panicError
		if !errors.As(err, &p) {
			t.Fatalf("%s: %v, want a panic", name, err)
		}
		if first, _, _ := strings.Cut(p.stack, "\n"); !strings.Contains(first, "nilMapHandler") {
			t.Errorf("%s: the stack starts at %q, want the handler's frame:\n%s", name, first, p.stack)
		}
	}
}

package core

import (
	"context"
	"fmt"
	"time"

	"github.com/belfry/belfry/runtime/engine"
)

type actorKey struct{}

// WithActor returns a context that names who acts: the admin sets it from
// the host's authentication, and triggers, re-runs, backfills, pauses and
// resumes made with it record the actor.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorFrom returns the actor WithActor put in ctx, or "".
func ActorFrom(ctx context.Context) string {
	a, _ := ctx.Value(actorKey{}).(string)
	return a
}

// maxReasonLen bounds a pause's reason.
const maxReasonLen = 500

// Pause is why, when and by whom a schedule was paused.
type Pause struct {
	Reason string    `json:"reason"`
	Actor  string    `json:"actor,omitempty"`
	At     time.Time `json:"at"`
}

// Pause pauses a schedule until Resume, on every replica: whichever replica
// leads records the slots that come due meanwhile as paused and runs none
// of them. The pause is stored in Redis, so it survives restarts and leader
// changes. Pausing a paused schedule replaces its reason and actor; it
// stays paused since the first pause.
func (r *Runtime) Pause(ctx context.Context, name, reason string) error {
	if _, ok := r.reg.Lookup(name); !ok {
		return fmt.Errorf("%w %q", ErrUnknownSchedule, name)
	}
	if r.disabled != "" {
		return ErrDisabled
	}
	if len(reason) > maxReasonLen {
		reason = reason[:maxReasonLen] + "…"
	}
	p := engine.Pause{Reason: reason, Actor: ActorFrom(ctx), At: r.clock.Now().UnixMilli()}
	if err := r.eng.SetPause(ctx, name, p); err != nil {
		return err
	}
	r.log.Info("schedule paused", "schedule", name, "reason", reason, "actor", p.Actor)
	return nil
}

// Resume ends a pause. The next slot runs; slots that came due while paused
// are not run (re-run one deliberately with Rerun). Resuming a schedule that
// is not paused does nothing.
func (r *Runtime) Resume(ctx context.Context, name string) error {
	if _, ok := r.reg.Lookup(name); !ok {
		return fmt.Errorf("%w %q", ErrUnknownSchedule, name)
	}
	if r.disabled != "" {
		return ErrDisabled
	}
	was, err := r.eng.ClearPause(ctx, name, r.clock.Now().UnixMilli())
	if err == nil && was {
		r.log.Info("schedule resumed", "schedule", name, "actor", ActorFrom(ctx))
	}
	return err
}

// Paused returns the pauses of every paused schedule of the registry, in
// reads whose cost is the number paused (see engine.AllPauses).
func (r *Runtime) Paused(ctx context.Context) (map[string]Pause, error) {
	out := map[string]Pause{}
	if r.disabled != "" {
		return out, nil
	}
	pauses, err := bounded(ctx, r.eng.AllPauses)
	if err != nil {
		return nil, err
	}
	for name, p := range pauses {
		if _, ok := r.reg.Lookup(name); ok {
			out[name] = pauseOf(*p)
		}
	}
	return out, nil
}

func pauseOf(p engine.Pause) Pause {
	return Pause{Reason: p.Reason, Actor: p.Actor, At: unixMilli(p.At)}
}

// names lists the registry's schedule names in its order.
func (r *Runtime) names() []string {
	scheds := r.reg.Schedules()
	names := make([]string, len(scheds))
	for i, s := range scheds {
		names[i] = s.Name
	}
	return names
}

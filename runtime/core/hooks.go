package core

import (
	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/engine"
	"github.com/belfry/belfry/runtime/internal/clock"
	"github.com/belfry/belfry/runtime/internal/corehook"
)

func init() {
	corehook.NewWithClock = func(reg *registry.Registry, opts any, clk clock.Clock) (any, error) {
		return newRuntime(reg, opts.(Options), clk)
	}
	corehook.Validate = func(reg *registry.Registry, opts any) error {
		o := opts.(Options)
		return validate(reg, &o)
	}
	corehook.Of = func(rt any) corehook.Hooks { return rt.(*Runtime).hooks() }
}

// hooks are what package runtime's New reaches through corehook.
func (r *Runtime) hooks() corehook.Hooks {
	return corehook.Hooks{
		Disable: func(reason string, deliveries engine.Deliveries) {
			r.disabled, r.deliveries = reason, deliveries
		},
		Engine: func() engine.Engine {
			if r.disabled != "" {
				return nil
			}
			return r.eng
		},
	}
}

package engine

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/belfry/belfry/registry"
)

// Configurable is an engine that takes its settings from the runtime it
// is given to: core.New calls Configure once, before any other call, and
// uses the engine it returns (which may be the receiver) from then on. An
// engine built whole by its own package need not implement it.
//
// Configure returns an error when the engine cannot serve the runtime:
// refused settings, or an engine that already serves another runtime.
type Configurable interface {
	Engine
	Configure(cfg Config) (Engine, error)
}

// Config is what the core tells a Configurable engine about the runtime
// it serves.
type Config struct {
	// Registry is the schedules the runtime serves.
	Registry *registry.Registry
	// Namespace prefixes every key or row the engine writes and every
	// occurrence ID; the replicas of one service share it.
	Namespace string
	// Replica names this process in the election and the heartbeats.
	Replica string
	// Service tells this registry's replicas from another service's that
	// share the namespace (the registry's package paths).
	Service string
	// LeaseTTL is how long a lease outlives its holder.
	LeaseTTL time.Duration
	// HistoryLimit is the records kept per schedule; Limits the schedules
	// that keep fewer, by name.
	HistoryLimit int
	Limits       map[string]int
	// RecordTTL bounds how long a record outlives its index entry.
	RecordTTL time.Duration
	Logger    *slog.Logger
	// Clock is the runtime's clock, which the engine's lease shares.
	Clock Clock
	// MayLead is asked before each attempt to take the lease: an error
	// (the namespace is another service's, the store's settings are
	// unsafe) keeps this replica from leading.
	MayLead func(context.Context) error
}

// Clock tells the time; the runtime's, shared with its engine so that a
// test clock moves both.
type Clock interface {
	Now() time.Time
}

// Queues is what an engine whose workers serve queues by name can say of
// them. The core asks for it when the engine offers it: the leader logs
// what it says, the snapshot, health and admin page show it.
type Queues interface {
	// UnservedQueues returns the queues of the registry's schedules that
	// no running worker serves: their tasks wait for ever.
	UnservedQueues(ctx context.Context) ([]string, error)
	// ServeAdvice says, in the engine's terms, how to make a worker
	// serve an unserved queue, for the warning the core logs about one
	// ("start workers with asynq.Config.Queues including it").
	ServeAdvice() string
	// Misrouted returns the recent reports of this service's tasks that
	// workers of their queue could not run, sorted by schedule.
	Misrouted(ctx context.Context) ([]Misrouted, error)
}

// Misrouted is an occurrence of this service's that workers of its queue
// could not run: they lack its handler, or they are another service's with
// a schedule of the same name.
type Misrouted struct {
	Schedule string `json:"schedule"`
	Queue    string `json:"queue"`
	// Namespace and Replica are those of the runtime whose workers bounced
	// it.
	Namespace string    `json:"namespace"`
	Replica   string    `json:"replica"`
	Reason    string    `json:"reason"`
	At        time.Time `json:"at"`
}

func (m Misrouted) String() string {
	return fmt.Sprintf("occurrences of %s on queue %q reach workers of replica %s (namespace %q) that %s: they bounce back as retries, and are lost once retries run out; "+
		"serve the queue only with workers that register this service's handlers, or give each service its own queue",
		m.Schedule, m.Queue, m.Replica, m.Namespace, m.Reason)
}

// Redactor is an engine whose errors may quote a secret of its settings
// (a password in a URL): the core passes every engine error it shows, on
// a page or in a snapshot, through Redact.
type Redactor interface {
	Redact(msg string) string
}

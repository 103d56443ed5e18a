package core

import "time"

// Leadership says how this replica takes part in scheduling: whether it
// holds the lease now, why its scheduler is off, and how its enqueues
// kept up while it led.
type Leadership struct{ rt *Runtime }

// Leadership returns this replica's view of the lease and its scheduler.
func (r *Runtime) Leadership() *Leadership { return &Leadership{rt: r} }

// Leading reports whether this replica holds the lease and trusts it.
func (ld *Leadership) Leading() bool { return ld.rt.isLeader() }

// Disabled returns why the scheduler is disabled, or "" if it is not.
func (ld *Leadership) Disabled() string { return ld.rt.disabled }

// EnqueueLateness is how late this replica's newest dispatch was enqueued
// after its slot (zero before it has led).
func (ld *Leadership) EnqueueLateness() time.Duration { return ld.rt.enqueueLateness() }

// HandoversForLateness counts the times this replica handed the lease over
// because its enqueues fell behind.
func (ld *Leadership) HandoversForLateness() int { return ld.rt.handoversForLateness() }

package core

import (
	"errors"

	"github.com/belfry/belfry/runtime/engine"
)

// Outcome is what happened to one occurrence, as the ledger records it.
type Outcome string

// Outcomes recorded in the ledger.
const (
	OutcomeEnqueued  Outcome = "enqueued"  // in asynq, not yet started
	OutcomeRunning   Outcome = "running"   // a worker is running it
	OutcomeSucceeded Outcome = "succeeded" // the handler returned nil
	OutcomeRetrying  Outcome = "retrying"  // an attempt failed; asynq runs it again
	OutcomeFailed    Outcome = "failed"    // the last attempt failed (or panicked, or timed out); asynq archived it
	OutcomeMissed    Outcome = "missed"    // older than grace when the leader got to it; never run
	OutcomeSkipped   Outcome = "skipped"   // overlap=skip and the previous occurrence still ran, or overlap=buffer_one and one waited already
	// OutcomeBuffered is a slot of an overlap=buffer_one schedule that
	// came due while its previous occurrence ran: it waits, and is
	// enqueued once that one ends (the record then goes on to running).
	OutcomeBuffered Outcome = "buffered"
	// OutcomeReplaced is an occurrence of an overlap=replace schedule
	// cancelled for a newer one: its handler's ctx was cancelled, and it
	// is not retried. The record's error names the newer occurrence.
	OutcomeReplaced Outcome = "replaced"
	OutcomePaused   Outcome = "paused" // came due while the schedule was paused; never run
	// OutcomeContinued: a checkpointed handler stopped between batches
	// before its timeout or at a worker's shutdown, its place saved; the
	// occurrence continues in a new attempt that uses no retry.
	OutcomeContinued Outcome = "continued"
	// OutcomeLost is an Event of a detected loss of Redis data (see
	// LostWrites), and the outcome of an occurrence whose enqueue no
	// replica acknowledged and a failover then lost: it may have run on the
	// old primary, and is not enqueued again (the engine's replica acks:
	// runtime.Options.ReplicaAcks on Redis).
	OutcomeLost Outcome = "lost"
)

// enqueued reports whether an occurrence with this outcome was put in
// asynq: a missed, skipped or paused slot never was, and a buffered one
// not yet (its record turns "enqueued" when it is).
func (o Outcome) enqueued() bool {
	switch o {
	case OutcomeMissed, OutcomeSkipped, OutcomePaused, OutcomeBuffered:
		return false
	}
	return true
}

// Status is a schedule's health as the admin page, the JSON API, metrics
// and the health check show it.
type Status string

// Schedule statuses.
const (
	StatusOK       Status = "ok"
	StatusLate     Status = "late"     // the newest due slot has no success within grace + timeout
	StatusFailing  Status = "failing"  // the last occurrence to finish failed, and none succeeded since
	StatusRunning  Status = "running"  // the newest occurrence is running or waiting to retry
	StatusPaused   Status = "paused"   // paused by an operator: slots are recorded, not run
	StatusDisabled Status = "disabled" // no Redis configured: nothing is scheduled
	StatusUnknown  Status = "unknown"  // Redis did not answer in time: the status could not be read
)

// RedisState is the runtime's view of its Redis.
type RedisState string

// Redis states.
const (
	RedisDisabled RedisState = "disabled" // no Redis configured
	RedisUnknown  RedisState = "unknown"  // no call has completed yet
	RedisUp       RedisState = "up"       // the last call succeeded
	RedisDown     RedisState = "down"     // the last call failed
	RedisSlow     RedisState = "slow"     // the last call got no answer within its deadline (a stall, a slow or cut link): Redis is reachable, but slow
)

// Errors callers branch on with errors.Is.
var (
	// ErrUnknownSchedule: the name is not in the registry.
	ErrUnknownSchedule = errors.New("unknown schedule")
	// ErrDisabled: the operation needs Redis and none is configured.
	ErrDisabled = errors.New("scheduler disabled: no Redis configured")
	// ErrBadRequestKey: a manual run's request key is malformed.
	ErrBadRequestKey = errors.New("bad request key")
	// ErrNotASlot: Rerun was given an instant that is not one of the
	// schedule's slots, or is in the future (see NotASlotError).
	ErrNotASlot = errors.New("not a slot of the schedule")
	// ErrTooManySlots: a Backfill range holds more than MaxBackfillSlots.
	ErrTooManySlots = errors.New("too many slots")
	// ErrBadRange: a Backfill range is empty, reversed or in the future.
	ErrBadRange = errors.New("bad range")
	// ErrScheduleInUse: Forget was asked to remove a schedule the registry
	// still declares.
	ErrScheduleInUse = errors.New("schedule is still in the registry")
	// ErrNotAcked: with the engine's replica acks (runtime.Options.ReplicaAcks
	// on Redis), the engine ran the write (a pause, a resume, a member's
	// change, a manual run's enqueue) but too few replicas acknowledged it
	// in time, so a failover may still undo it.
	// Repeating the call is safe: a manual run with the same request key is
	// enqueued once.
	ErrNotAcked = engine.ErrNotAcked
	// ErrNotLeader: the scheduler's enqueue found its lease taken by
	// another replica, and wrote nothing; the replica that holds the lease
	// enqueues the occurrence. An EnqueueObserver's done may hear it.
	ErrNotLeader = engine.ErrNotLeader
	// ErrPausesChanged: the scheduler's enqueue found that a pause or
	// resume had committed since the leader read the pauses ahead of the
	// slot, and wrote nothing; the leader plans the occurrence again at
	// once, with the pauses as they are. No failure: an EnqueueObserver's
	// done may hear it, and the occurrence may then be enqueued again, or
	// recorded paused.
	ErrPausesChanged = engine.ErrPausesChanged
)

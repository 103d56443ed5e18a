package runtime

import (
	"context"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
)

// The names below are package core's, kept here so that a Redis service
// names everything through package runtime, as before core was split out.

// Defaults and limits (see core).
const (
	EnqueueConcurrencyDefault = core.EnqueueConcurrencyDefault
	HistoryLimitDefault       = core.HistoryLimitDefault
	LeaseTTLDefault           = core.LeaseTTLDefault
	SkewMarginDefault         = core.SkewMarginDefault
	MaxBackfillSlots          = core.MaxBackfillSlots
	NamespaceLegacy           = core.NamespaceLegacy
)

// What happened to an occurrence (core.Outcome).
const (
	OutcomeBuffered  = core.OutcomeBuffered
	OutcomeContinued = core.OutcomeContinued
	OutcomeEnqueued  = core.OutcomeEnqueued
	OutcomeFailed    = core.OutcomeFailed
	OutcomeLost      = core.OutcomeLost
	OutcomeMissed    = core.OutcomeMissed
	OutcomePaused    = core.OutcomePaused
	OutcomeReplaced  = core.OutcomeReplaced
	OutcomeRetrying  = core.OutcomeRetrying
	OutcomeRunning   = core.OutcomeRunning
	OutcomeSkipped   = core.OutcomeSkipped
	OutcomeSucceeded = core.OutcomeSucceeded
)

// The parts of a Snapshot (core.PartSchedules).
const (
	PartCluster    = core.PartCluster
	PartLostWrites = core.PartLostWrites
	PartMisrouted  = core.PartMisrouted
	PartQueues     = core.PartQueues
	PartSchedules  = core.PartSchedules
	PartStatuses   = core.PartStatuses
)

// The runtime's view of its store (core.RedisState).
const (
	RedisDisabled = core.RedisDisabled
	RedisDown     = core.RedisDown
	RedisSlow     = core.RedisSlow
	RedisUnknown  = core.RedisUnknown
	RedisUp       = core.RedisUp
)

// A schedule's status (core.Status).
const (
	StatusDisabled = core.StatusDisabled
	StatusFailing  = core.StatusFailing
	StatusLate     = core.StatusLate
	StatusOK       = core.StatusOK
	StatusPaused   = core.StatusPaused
	StatusRunning  = core.StatusRunning
	StatusUnknown  = core.StatusUnknown
)

// The runtime's errors, the same values as core's: errors.Is holds across
// the two packages.
var (
	ErrBadMember          = core.ErrBadMember
	ErrBadRange           = core.ErrBadRange
	ErrBadRequestKey      = core.ErrBadRequestKey
	ErrDisabled           = core.ErrDisabled
	ErrMembersBusy        = core.ErrMembersBusy
	ErrNoMember           = core.ErrNoMember
	ErrNotAFamily         = core.ErrNotAFamily
	ErrNotASlot           = core.ErrNotASlot
	ErrNotAcked           = core.ErrNotAcked
	ErrNotLeader          = core.ErrNotLeader
	ErrPausesChanged      = core.ErrPausesChanged
	ErrScheduleInUse      = core.ErrScheduleInUse
	ErrTooManySlots       = core.ErrTooManySlots
	ErrUnknownSchedule    = core.ErrUnknownSchedule
	ErrClockSkew          = core.ErrClockSkew
	ErrDeliveredTwice     = core.ErrDeliveredTwice
	ErrNamespaceContended = core.ErrNamespaceContended
	ErrRedisSlow          = core.ErrRedisSlow
)

// The runtime's value types (see core).
type (
	Cluster         = core.Cluster
	Counters        = core.Counters
	EnqueueObserver = core.EnqueueObserver
	Event           = core.Event
	Families        = core.Families
	FamilyNextRun   = core.FamilyNextRun
	Health          = core.Health
	LastRun         = core.LastRun
	LastTimes       = core.LastTimes
	Leadership      = core.Leadership
	LostWrites      = core.LostWrites
	Member          = core.Member
	MemberInfo      = core.MemberInfo
	Misrouted       = core.Misrouted
	Missing         = core.Missing
	Monitor         = core.Monitor
	NotASlotError   = core.NotASlotError
	Outcome         = core.Outcome
	Progress        = core.Progress
	Pause           = core.Pause
	Record          = core.Record
	RedisState      = core.RedisState
	ReplicaProcess  = core.ReplicaProcess
	ScheduleState   = core.ScheduleState
	ScheduleStatus  = core.ScheduleStatus
	Snapshot        = core.Snapshot
	Status          = core.Status
	Statuses        = core.Statuses
)

// ActorFrom is core.ActorFrom: who made an operator's write.
func ActorFrom(ctx context.Context) string { return core.ActorFrom(ctx) }

// WithActor is core.WithActor: ctx naming who makes an operator's write.
func WithActor(ctx context.Context, actor string) context.Context { return core.WithActor(ctx, actor) }

// Carrier is core.Carrier: what the enqueue's EnqueueObserver asked to
// carry with the task whose handler runs with ctx.
func Carrier(ctx context.Context) map[string]string { return core.Carrier(ctx) }

// DefaultNamespace is core.DefaultNamespace: the namespace of reg when
// Options.Namespace is empty.
func DefaultNamespace(reg *registry.Registry) string { return core.DefaultNamespace(reg) }

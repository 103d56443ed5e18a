package engine

import (
	"context"
	"sync/atomic"
	"time"
)

// Engine is everything the core asks of the store, queue and lease
// beneath it, in roles named for what they serve.
type Engine interface {
	Election
	Cluster
	Slots
	TaskState
	Records
	Pauses
	Members
	Counters
	Health
}

// Election is the lease: which replica leads, for which term.
//
// A term is the opaque value the engine gave this replica's lease; every
// fenced write names it, and the engine refuses the write with
// ErrNotLeader once another term has begun, however late the write
// arrives.
type Election interface {
	// Run takes part in the election until ctx ends: acquiring the lease,
	// renewing it every RenewEvery while held, and watching it otherwise.
	Run(ctx context.Context)
	// Current is this replica's term and whether it leads: it holds the
	// lease and trusts it, by its own clock, for the lease's life minus a
	// margin after its last renewal.
	Current() (term string, leading bool)
	// Created counts the leases this replica was granted; it changes when
	// a term is granted again with the same value (a fencing counter gone
	// back), which the core treats as a new term all the same.
	Created() uint64
	// Changed is signalled whenever Current may have changed.
	Changed() <-chan struct{}
	// Since is when this replica's current term began; zero when it does
	// not lead.
	Since() time.Time
	// StepDown stops leading at once, for reason (a fenced write was
	// refused); the election goes on.
	StepDown(reason string)
	// Release gives the lease up so that a follower takes over at once;
	// called once Run has returned.
	Release(ctx context.Context)
	// Handover releases the lease to another live replica, unless one was
	// handed over within the last window (base, doubling up to limit) or
	// none is alive; wait is how long the refusal's window still holds, or
	// this replica's cool-down when handed over.
	Handover(ctx context.Context, reason string, base, limit time.Duration) (outcome HandoverOutcome, wait time.Duration, err error)
	// RenewEvery is how often a held lease is renewed.
	RenewEvery() time.Duration
}

// Cluster is what the replicas' heartbeats say.
type Cluster interface {
	// Holder reads who holds the lease and which replicas have a fresh
	// heartbeat. A bounded read.
	Holder(ctx context.Context) (Holder, error)
	// Duplicate reports another live process using this replica's name.
	Duplicate() (Duplicate, bool)
}

// Slots are the leader's fenced writes: enqueues, each idempotent by its
// task ID, and the cursor commits that record what was handled.
type Slots interface {
	// EnqueueAll inserts each item's task unless a task with its ID
	// (occ.Key()'s occurrence ID, or a manual run's) is already in: a
	// conflict is success with Inserted false, so sending an item twice
	// inserts it once. An item's Cursor rises in the same atomic write as
	// its task, so no task is ever in without its cursor covering it; a
	// cursor is the leader's, so an item carries one only under a fence
	// (an engine may ignore one without). Under fence (nil for the
	// unfenced manual runs) the writes are refused once fence's term has
	// ended: those items fail with an error that is ErrNotLeader, and
	// fence is Rejected. Results are in items' order.
	EnqueueAll(ctx context.Context, fence *Fence, items []Enqueue) []Result
	// Acknowledged returns once every write before it is durable (with
	// Redis: acknowledged by the replicas ReplicaAcks asks for; at once
	// without), or ErrNotAcked.
	Acknowledged(ctx context.Context) error
	// Cursors reads the schedules' cursors (the last slot handled, unix
	// s); ok is false for a schedule with none.
	Cursors(ctx context.Context, names []string) (cursors []int64, ok []bool, err error)
	// InitCursors sets the cursor of each named schedule that has none to
	// now (unix s), fenced by term.
	InitCursors(ctx context.Context, term string, now int64, names []string) error
	// Commit writes each schedule's step (cursor, last ID, records,
	// counters), fenced by term. Steps before a refused one may stay
	// written: each is a schedule's complete step.
	Commit(ctx context.Context, term string, items []Commit) error
	// LastID is the schedule's last enqueued occurrence ID, "" if none.
	LastID(ctx context.Context, name string) (string, error)
	// CommitFamily writes a family's step after a bucket's page: each
	// member's cursor and newest occurrence, the family's records and
	// counters, and (bucketCursor not "") the bucket's cursor, fenced by
	// term. A member deleted meanwhile gets no cursor back.
	CommitFamily(ctx context.Context, term, family string, fam Commit, ms []MemberCommit, bucket, bucketCursor string) error
	// BucketCursors reads the buckets' cursors (0 for none).
	BucketCursors(ctx context.Context, family string, buckets []string) ([]int64, error)
}

// TermStart is an engine with work to do at the start of each term,
// before the term reads a cursor: the Redis engine's enqueues are fenced
// where its tasks are stored, apart from its lease (Redis Cluster: in each
// queue's slot), and a new term raises those fences first, so that an
// older term's enqueue arriving late either lands before that read or is
// refused; it also moves a namespace's state from an older key layout. An
// error that is ErrNotLeader says the term cannot go on (it is over, or
// must wait).
type TermStart interface {
	StartTerm(ctx context.Context, term string) error
}

// TaskState says what became of an enqueued task.
type TaskState interface {
	// TaskExists reports whether the task is in, whatever became of it
	// since, until the engine deletes it (after its Retention).
	TaskExists(ctx context.Context, queue, id string) (bool, error)
	// TaskRunning reports whether the task is still pending, scheduled,
	// active or waiting to retry; false once it completed, was archived,
	// or is gone.
	TaskRunning(ctx context.Context, queue, id string) (bool, error)
}

// Canceler cancels an occurrence's task, for overlap=replace. Both
// engines implement it.
type Canceler interface {
	// CancelTask cancels the task: a running one has its handler's ctx
	// cancelled (the core's middleware makes a later delivery of it
	// return at once); one not yet running is removed. A task already
	// finished, or gone, is no error.
	CancelTask(ctx context.Context, queue, id string) error
	// ReplacedBy is the record field "replaced_by" of occurrence id, which
	// the leader sets (RecordExecution) before it cancels the task: the
	// occurrence that replaced it, "" for none. A worker's own record
	// writes never set it, so it stands whatever they write.
	ReplacedBy(ctx context.Context, id string) (string, error)
}

// Records is the ledger: what each occurrence did.
type Records interface {
	// RecordManual records an operator's occurrence and counts it.
	RecordManual(ctx context.Context, item Commit) error
	// RecordExecution writes a step of a worker's run of an occurrence.
	RecordExecution(ctx context.Context, e Execution) error
	// NoteExecution marks a schedule running, retrying, failing or fine
	// after an attempt's outcome at atMS.
	NoteExecution(ctx context.Context, name, outcome string, atMS int64) error
	// ForgetExecution drops a schedule's execution state.
	ForgetExecution(ctx context.Context, name string) (int64, error)
	// History is a schedule's newest n record IDs, newest first.
	History(ctx context.Context, name string, n int) ([]string, error)
	// Records reads the records of ids, in order, skipping any gone
	// meanwhile.
	Records(ctx context.Context, ids []string) ([]Record, error)
	// Known lists every schedule the engine holds state of.
	Known(ctx context.Context) ([]string, error)
	// Forget removes every trace of a schedule (cursor, pause, counters,
	// history) and reports how many keys and fields went.
	Forget(ctx context.Context, name string) (int64, error)
	// Lost lists the detected losses of data, newest first; RecordLost
	// keeps one.
	Lost(ctx context.Context) ([]LostWrites, error)
	RecordLost(ctx context.Context, l LostWrites) error
}

// Pauses hold schedules.
type Pauses interface {
	// PauseStates reads, for each name, its pause (nil when it runs) and
	// its past pause windows that its cursor has not passed.
	PauseStates(ctx context.Context, names []string) ([]*Pause, [][]PauseWindow, error)
	// AllPauses is every pause held, by schedule.
	AllPauses(ctx context.Context) (map[string]*Pause, error)
	// SetPause pauses a schedule; a pause in place keeps its start.
	SetPause(ctx context.Context, name string, p Pause) error
	// ClearPause resumes a schedule at (unix ms) and reports whether it
	// was paused.
	ClearPause(ctx context.Context, name string, at int64) (bool, error)
}

// Members are the families' members, as data.
type Members interface {
	SetMembers(ctx context.Context, family string, now int64, replacePauses bool, ms []SetMember, floor ChangeFloor) ([]bool, error)
	DeleteMember(ctx context.Context, family, key string) (bool, error)
	Members(ctx context.Context, family string, keys []string) ([]MemberValue, []bool, error)
	// ScanMembers returns a page of at most limit members whose keys
	// contain substr ("" for all) and the cursor of the next page; cursor
	// "" starts, and a returned "" ends. Following the cursors lists each
	// member present from the first page to the last exactly once, while
	// the engine's server keeps its state: an engine says where it keeps
	// less (docs/engines.md, "Known deviations"). A cursor not handed out
	// is ErrBadCursor.
	ScanMembers(ctx context.Context, family, cursor, substr string, limit int) ([]MemberValue, string, error)
	MemberCount(ctx context.Context, family string) (int64, error)
	// FamilyVersion counts every change to any family's members.
	FamilyVersion(ctx context.Context) (int64, error)
	BucketsChangedAfter(ctx context.Context, family string, version int64) ([]BucketVersion, error)
	// BucketPage is up to n member keys of a bucket sorting after after.
	BucketPage(ctx context.Context, family, bucket, after string, n int) ([]string, error)
	// MemberStates reads members and their cursors together.
	MemberStates(ctx context.Context, family string, keys []string) ([]MemberValue, []bool, []MemberCursor, []bool, error)
	SetMemberLast(ctx context.Context, family, key string, l MemberLast) error
	MemberLasts(ctx context.Context, family string, keys []string) ([]MemberLast, []bool, error)
	MemberPauses(ctx context.Context, family string, keys []string) ([]*Pause, error)
}

// Counters are the schedules' statistics and the status a dashboard
// reads. Every read is bounded: its cost is that of the names asked for
// and of what is wrong (paused, failing, running), whatever the number of
// schedules declared.
type Counters interface {
	// Stats is every schedule's counters, by schedule and counter.
	Stats(ctx context.Context) (map[string]map[string]int64, error)
	// StatFields reads the given counters of each name.
	StatFields(ctx context.Context, names, fields []string) ([][]int64, error)
	// ScheduleData reads, for each name, its newest n records, the given
	// counters, its pause and its execution state; known, when not nil, is
	// what the caller read of Problems, not read again.
	ScheduleData(ctx context.Context, names []string, n int, fields []string, known *Problems) ([]ScheduleData, error)
	// Problems is what is paused, failing or running.
	Problems(ctx context.Context) (Problems, error)
	// Backfilled says whether MarkBackfilled ran on this namespace.
	Backfilled(ctx context.Context) (bool, error)
	// MarkBackfilled notes that the failing index was built from the
	// records.
	MarkBackfilled(ctx context.Context) error
	// MarkFailing marks a schedule failing since atMS, unless a worker
	// already wrote its execution state.
	MarkFailing(ctx context.Context, name string, atMS int64) error
}

// Health is the engine's own state.
type Health interface {
	// Time is the engine's clock, which every replica shares.
	Time(ctx context.Context) (time.Time, error)
	// Watch has the engine tell onCall the outcome of each of its own
	// calls (the election's above all; nil when it answered), so that the
	// core can report the engine down and up again. Set once, before Run.
	Watch(onCall func(error))
}

// Named is an engine that names itself in the health and status JSON
// ("engine", beside their "redis" field, whose name stays as it is: a
// contract). An engine that does not is the Redis engine.
type Named interface {
	EngineName() string
}

// Task is one occurrence's task as the engine's queue takes it.
type Task struct {
	Type     string
	Payload  []byte
	ID       string
	Queue    string
	MaxRetry int
	Timeout  time.Duration // 0: the queue's default
	// Retention is how long a finished task's ID stays reserved, so that
	// an enqueue replayed meanwhile is a conflict.
	Retention time.Duration
	// Headers travel with the task to its worker; nil for none.
	Headers map[string]string
}

// Enqueue is one item of Slots.EnqueueAll.
type Enqueue struct {
	Task Task
	// Cursor, when its Schedule is not "", rises with the task.
	Cursor CursorMark
}

// CursorMark raises a schedule's cursor to Slot (unix s) in the write that
// enqueues the slot's task, and with LastID not "" sets the schedule's
// last enqueued ID. A schedule's marks come in rising order: the leader
// enqueues its slots one after another.
type CursorMark struct {
	Schedule string
	Slot     int64
	LastID   string
}

// Result is what became of an Enqueue.
type Result struct {
	// Inserted is false, with no Err, for an ID conflict: the task was in.
	Inserted bool
	Err      error
	// Unacked is set when the engine ran the write but did not make it
	// durable in time (Err is then ErrNotAcked).
	Unacked bool
}

// InDoubt is what an engine whose enqueues can end in doubt (Result.Unacked)
// tells the core, which then keeps each finished task's ID reserved for as
// long as its slot may still be enqueued again (grace plus SkewMargin), not
// only while one enqueue's call lasts: the retry of an enqueue in doubt
// that finds no task takes it for lost in a failover and enqueues it again,
// so a task that ran and finished meanwhile must still be found. The core
// type-asserts it; without it no enqueue is in doubt.
type InDoubt interface {
	// EnqueuesInDoubt reports whether an enqueue may be reported Unacked.
	EnqueuesInDoubt() bool
}

// Fence makes enqueues conditional on Term still being the engine's
// current term, checked by the engine in the write itself.
type Fence struct {
	Term string
	// Pauses, when not "", is the token of the pauses the enqueue was
	// planned with (PausesAhead): an engine that hands out tokens inserts
	// nothing once they changed, and fails with ErrPausesChanged.
	Pauses   string
	rejected atomic.Bool
}

// Reject notes that the engine refused a write of this fence.
func (f *Fence) Reject() { f.rejected.Store(true) }

// Rejected reports whether the engine refused a write of this fence: its
// term has ended.
func (f *Fence) Rejected() bool { return f.rejected.Load() }

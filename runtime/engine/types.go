package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrNotLeader is returned by a fenced write whose term is no longer the
// engine's current one: the writer lost the lease and must step down.
var ErrNotLeader = errors.New("lease not held")

// Rec is one occurrence as the leader or a trigger records it.
type Rec struct {
	ID      string `json:"id"`
	Slot    int64  `json:"slot"`   // unix s
	Manual  bool   `json:"manual"` //
	At      int64  `json:"at"`     // when it was recorded, unix ms
	Outcome string `json:"outcome"`
	Score   int64  `json:"score"` // position in the history index, unix ms
	// Actor is who asked for a manual occurrence, "" if unknown.
	Actor string `json:"actor,omitempty"`
	// Member is the family member the occurrence is for, "" if none.
	Member string `json:"member,omitempty"`
	// Error says why a slot was not enqueued, where its outcome alone
	// does not (a slot skipped behind a buffered one); "" for none.
	Error string `json:"error,omitempty"`
}

// Commit is one schedule's part of a fenced commit: its new cursor, the last
// enqueued ID (for overlap=skip), the records and the counter changes.
// Counts whose name starts with "last_" are set, the others added.
type Commit struct {
	Name   string           `json:"name"`
	Cursor int64            `json:"cursor"`
	LastID string           `json:"last_id"`
	Recs   []Rec            `json:"recs"`
	Counts map[string]int64 `json:"counts"`
	// Limit is the schedule's history limit; the store sets it.
	Limit int `json:"limit"`
}

// Execution is one step of a worker's run of an occurrence.
type Execution struct {
	ID, Schedule string
	Slot         time.Time
	// Fields are the record's field, value pairs to set, outcome included.
	Fields []any
	// Count is the stats counter to bump, "" for none.
	Count string
	// Last and AlsoLast are stats "last_*" fields to set to At, "" for
	// none.
	Last, AlsoLast string
	At             time.Time
	// Attempt is the task's retry count: 0 for the first attempt.
	Attempt int
}

// Record is an occurrence record as stored.
type Record struct {
	ID, Schedule, Outcome, Error, Replica string
	Slot                                  int64 // unix s
	Manual                                bool
	EnqueuedAt, StartedAt, FinishedAt     int64 // unix ms, 0 if not yet
	// RecordedAt is when a slot that was never enqueued (missed, skipped,
	// paused) was recorded, unix ms; 0 for the others.
	RecordedAt        int64
	DurationMS        int64
	Attempt, MaxRetry int
	Actor             string
	Member            string // of a family, "" if none
}

// Pause is why and by whom a schedule is paused.
type Pause struct {
	Reason string `json:"reason"`
	Actor  string `json:"actor,omitempty"`
	At     int64  `json:"at"` // unix ms
}

// PauseWindow is one of a schedule's past pauses, from its start to its
// resume (unix ms).
type PauseWindow struct{ From, To int64 }

// LostWrites is a detected loss of the engine's data and the window of slots that
// may not have run because of it.
type LostWrites struct {
	At      int64  `json:"at"` // unix ms, the engine's time
	Replica string `json:"replica"`
	Reason  string `json:"reason"`
	// Slots in [From, To] (unix s) may not have run.
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// Epoch and Token are the store's epoch and the detector's fencing
	// token after the loss: a replica that finds them still current sees
	// the same loss, already handled.
	Epoch string `json:"epoch"`
	Token int64  `json:"token"`
}

// ErrNotAcked is the error of a write that the engine ran but did not make
// durable in time (with Redis: not enough replicas acknowledged it): a
// failover may still lose it, so it counts as failed (a retry finds what it
// left and is acknowledged in turn).
var ErrNotAcked = errors.New("not acknowledged by enough Redis replicas in time")

// BucketOf is the bucket a member's zone and expression put it in.
func BucketOf(zone, expr string) string { return zone + "|" + expr }

// SplitBucket is BucketOf's inverse.
func SplitBucket(bucket string) (zone, expr string) {
	zone, expr, _ = strings.Cut(bucket, "|")
	return zone, expr
}

// MemberValue is a member as stored.
type MemberValue struct {
	Key        string
	Since      int64 // unix s; slots at or before it never run
	Paused     bool
	Zone, Expr string
}

// SetMember is one member to write.
type SetMember struct {
	Key        string
	Paused     bool
	Zone, Expr string
	// Pause is why and by whom, kept while the member is paused.
	Pause Pause
}

// A ChangeFloor returns the since of member m, stored as old with its
// cursor (if it has one), whose zone or expression m changes. SetMembers
// calls it for each such member with what it read just before its write,
// and writes only if neither changed since.
type ChangeFloor func(m SetMember, old MemberValue, cursor MemberCursor, hasCursor bool) Floor

// Floor is the since (unix s; no slot at or before it runs) a changed
// member takes: SinceIfTask if TaskID is not "" and that task (on Queue)
// exists when the write lands, whatever became of it since, Since
// otherwise. 0 keeps the member's since; a since never goes back.
type Floor struct {
	Since         int64
	Queue, TaskID string
	SinceIfTask   int64
}

// ErrMembersBusy: members changed between SetMembers' read and its write
// (a leader handling their slots each time, or another writer moving
// them), or, with no ChangeFloor, a member written as keeping its zone and
// expression has other ones now; read again and retry.
var ErrMembersBusy = errors.New("members changed while being written; try again")

// ErrBadCursor is a page cursor that ScanMembers did not hand out.
var ErrBadCursor = errors.New("bad cursor")

// BucketVersion is a bucket and the version of its last change.
type BucketVersion struct {
	Bucket  string
	Version int64
}

// MemberCursor is the leader's state of one member.
type MemberCursor struct {
	Slot   int64 // the last slot handled, unix s
	Offset int   // its zone's UTC offset then, s
	// LastEnqueued is the newest enqueued slot (overlap=skip families
	// only; 0 when unknown).
	LastEnqueued int64
}

// MemberCommit is one member's part of a family's fenced commit.
type MemberCommit struct {
	Member string `json:"m"`
	Cursor string `json:"c"`
	// Last is the member's newest occurrence, "" to leave it: written only
	// when its slot is newer than the one recorded (a fast worker may
	// already have recorded the outcome of the same slot).
	Last     string `json:"l"`
	LastSlot int64  `json:"s"`
}

// EncodeCursor writes a member's cursor as a MemberCommit carries it:
// "<slot> <offset>", and " <last enqueued>" withLast.
func EncodeCursor(c MemberCursor, withLast bool) string {
	s := strconv.FormatInt(c.Slot, 10) + " " + strconv.Itoa(c.Offset)
	if withLast {
		s += " " + strconv.FormatInt(c.LastEnqueued, 10)
	}
	return s
}

// ParseCursor reads EncodeCursor's form; false for anything else.
func ParseCursor(v string) (MemberCursor, bool) {
	f := strings.Fields(v)
	if len(f) < 2 {
		return MemberCursor{}, false
	}
	slot, err1 := strconv.ParseInt(f[0], 10, 64)
	off, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return MemberCursor{}, false
	}
	c := MemberCursor{Slot: slot, Offset: off}
	if len(f) > 2 {
		c.LastEnqueued, _ = strconv.ParseInt(f[2], 10, 64)
	}
	return c, true
}

// MemberLast is a member's newest occurrence as stored.
type MemberLast struct {
	Slot    int64 // unix s
	Outcome string
	At      int64  // unix ms
	ID      string // "" for the slot's scheduled occurrence
}

// EncodeLast writes a member's newest occurrence as stored.
func EncodeLast(l MemberLast) string {
	s := strconv.FormatInt(l.Slot, 10) + " " + l.Outcome + " " + strconv.FormatInt(l.At, 10)
	if l.ID != "" {
		s += " " + l.ID
	}
	return s
}

// ParseLast reads EncodeLast's form; false for anything else.
func ParseLast(v string) (MemberLast, bool) {
	f := strings.Fields(v)
	if len(f) < 3 {
		return MemberLast{}, false
	}
	slot, err1 := strconv.ParseInt(f[0], 10, 64)
	at, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return MemberLast{}, false
	}
	l := MemberLast{Slot: slot, Outcome: f[1], At: at}
	if len(f) > 3 {
		l.ID = f[3]
	}
	return l, true
}

// Problems is what the engine holds of the schedules that are not plainly
// fine: paused (raw JSON Pause), failing (unix ms) and active ("running" or
// "retrying"). Each map holds only the schedules it names.
type Problems struct {
	Paused  map[string]string
	Failing map[string]string
	Active  map[string]string
}

// ScheduleData is what the engine holds of one schedule for a page that
// shows it.
type ScheduleData struct {
	Recent []Record // newest first
	Stats  []int64  // the counters asked for, in order
	Pause  *Pause   // nil when it runs
	// FailingSince is the unix ms of the failure that made it failing, 0
	// when it is not; Active is "running", "retrying" or "".
	FailingSince int64
	Active       string
}

// Process is the operating-system process behind a replica name, as its
// heartbeat recorded it: what an operator stops or inspects.
type Process struct {
	PID  int
	Host string
}

// String is the form a heartbeat stores: "<pid> <host>".
func (p Process) String() string { return strconv.Itoa(p.PID) + " " + p.Host }

// Duplicate is another live process using this replica's Replica name on
// the same namespace: a configuration error (two pods given one name, a
// copied environment). The lease stays safe, since each process's lease
// carries its own instance ID, but the replica list, heartbeats and the
// ledger's replica field can no longer tell the two apart.
type Duplicate struct {
	Replica  string    // the name both use
	Instance string    // this process's instance ID
	Other    string    // the other process's instance ID
	LastSeen time.Time // when its heartbeat was last found, on the lease's clock
}

func (d Duplicate) String() string {
	return fmt.Sprintf("replica name %q is used by two processes on this namespace (instances %s and %s): give each replica its own Replica name",
		d.Replica, d.Instance, d.Other)
}

// Holder is the cluster as the lease key and the heartbeats show it.
type Holder struct {
	Replica  string // the lease holder, "" if none
	Instance string // its instance ID ("" for a lease written before instance IDs)
	Token    int64  // its fencing token
	Replicas []string
	// Processes are the live replicas' processes, by replica name; a
	// replica whose heartbeat carried none (an older version) has none.
	Processes map[string]Process
}

// HandoverOutcome says what Handover did.
type HandoverOutcome int

// Handover outcomes.
const (
	HandedOver      HandoverOutcome = iota // released; this replica cools down
	HandoverRecent                         // another handover's window still holds
	HandoverAlone                          // no other live replica to take over
	HandoverNotHeld                        // this replica did not hold the lease
)

func (o HandoverOutcome) String() string {
	switch o {
	case HandedOver:
		return "handed over"
	case HandoverRecent:
		return "a handover happened recently"
	case HandoverAlone:
		return "no other replica is alive"
	}
	return "not the holder"
}

// ErrNoAnswer is Obey's error for a call that did not return before its
// context ended.
var ErrNoAnswer = errors.New("did not answer in time")

// Obey runs call and returns its result, or ErrNoAnswer (wrapping ctx's
// error) as soon as ctx ends, whichever comes first: a bounded read
// returns by its caller's deadline whatever the driver underneath honours.
// A call given up on goes on in its goroutine with ctx ended, and its
// result is discarded.
func Obey[T any](ctx context.Context, call func(context.Context) (T, error)) (T, error) {
	if ctx.Done() == nil {
		return call(ctx)
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := call(ctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("%w: %w", ErrNoAnswer, ctx.Err())
	}
}

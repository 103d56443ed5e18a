package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/belfry/belfry/internal/jsonquote"
)

// HandlerFunc is the signature of a scheduled handler. The occurrence says
// which period the run is for: derive the work from occ.Slot, never from
// time.Now, so that a retry or a manual re-run processes the same period.
type HandlerFunc func(ctx context.Context, occ Occurrence) error

// Middleware wraps a schedule's handler, e.g. to record each execution.
type Middleware func(s *Schedule, next HandlerFunc) HandlerFunc

// Occurrence is one run of a schedule: the slot it is for, not the moment a
// worker happens to pick it up.
type Occurrence struct {
	// Schedule is the schedule's name (its asynq task type).
	Schedule string `json:"schedule"`
	// Slot is the instant the occurrence is for, in the schedule's zone. For
	// a manual trigger it is the moment of the trigger.
	Slot time.Time `json:"slot"`
	// Zone is the IANA name of the slot's zone: the schedule's, or for a
	// family the member's.
	Zone string `json:"zone"`
	// Member is, for a family (a schedule declared with per=), the member
	// the occurrence is for; empty for an ordinary schedule.
	Member string `json:"member,omitempty"`
	// Manual is true for an occurrence an operator asked for (run now, a
	// re-run of a past slot, a backfill) rather than the clock.
	Manual bool `json:"manual,omitempty"`
	// ID is the occurrence's identity and asynq TaskID.
	ID string `json:"id"`
	// RerunOf is, for a re-run of a past slot, the ID of the scheduled
	// occurrence of that slot; Key returns it.
	RerunOf string `json:"rerun_of,omitempty"`
}

// Key returns the stable idempotency key of the occurrence: the same for every
// retry and every replica, different for every slot and every manual trigger.
// Use it to make a handler's effects happen once, e.g. as a unique column.
// A re-run of a past slot has the key of that slot's scheduled occurrence,
// so a handler keyed on it does the slot's work if it was not done, and
// nothing if it was.
func (o Occurrence) Key() string {
	switch {
	case o.RerunOf != "":
		return o.RerunOf
	case o.ID != "":
		return o.ID
	}
	return Scope{Schedule: o.Schedule, Member: o.Member}.ID(o.Slot)
}

// Scope is whose occurrences an ID names: a runtime's namespace, a
// schedule and, for a family, one member. Occurrences of different scopes
// never share an ID, so two services on one Redis and one queue, even with
// schedules of the same name, never take each other's occurrences.
//
// The scheduled occurrence of a slot is
//
//	cron:<namespace>/<schedule>:<slot unix seconds>
//	cron:<namespace>/<schedule>:member:<member>:<slot unix seconds>
//
// and manual runs and re-runs put "manual:<request>" or
// "rerun:<slot>:<request>" where the slot is. It is the asynq TaskID, so a
// second enqueue of the same occurrence by any replica is rejected by asynq.
//
// Every ID belongs to one occurrence: a namespace has no '/', a member no
// ':' (CheckMember), and a name may contain ':' (asynq's category:action)
// but never a segment that marks another kind of ID ("manual", "rerun",
// "member", see CheckName), so the first such segment ends the name, and a
// scheduled ID's name is all but its last segment. An empty namespace
// leaves out "<namespace>/", for occurrences built outside a runtime.
type Scope struct {
	Namespace string
	Schedule  string
	Member    string
}

func (sc Scope) prefix() string {
	p := "cron:" + sc.Schedule
	if sc.Namespace != "" {
		p = "cron:" + sc.Namespace + "/" + sc.Schedule
	}
	if sc.Member != "" {
		p += ":member:" + sc.Member
	}
	return p
}

// ID is the identity of the scope's scheduled occurrence of slot.
func (sc Scope) ID(slot time.Time) string {
	return sc.prefix() + ":" + strconv.FormatInt(slot.Unix(), 10)
}

// ManualID is the identity of a manual trigger, where request is unique per
// trigger request (a double-submitted request reuses it).
func (sc Scope) ManualID(request string) string {
	return sc.prefix() + ":manual:" + request
}

// RerunID is the identity of a re-run of slot, where request is unique per
// re-run request: distinct from the scheduled occurrence's ID, so asynq
// accepts it while the original is retained or archived, and the same for
// a double-submitted request.
func (sc Scope) RerunID(slot time.Time, request string) string {
	return sc.prefix() + ":rerun:" + strconv.FormatInt(slot.Unix(), 10) + ":" + request
}

// IDKind is the kind of occurrence an ID names.
type IDKind int

const (
	// Scheduled is the clock's occurrence of a slot (Scope.ID).
	Scheduled IDKind = iota
	// Manual is a run now (Scope.ManualID).
	Manual
	// Rerun is a re-run of a past slot (Scope.RerunID).
	Rerun
)

// KindOfID tells which of Scope's three IDs id is.
func KindOfID(id string) IDKind {
	rest := strings.TrimPrefix(id, "cron:")
	if _, afterNS, ok := strings.Cut(rest, "/"); ok {
		rest = afterNS
	}
	segs := strings.Split(rest, ":")
	for i := 0; i < len(segs); i++ {
		switch segs[i] {
		case "member":
			i++ // the member's own key may be any word
		case "manual":
			return Manual
		case "rerun":
			return Rerun
		}
	}
	return Scheduled
}

// NamespaceOfID returns the namespace an occurrence ID names, and false for
// an ID that names none: one built outside a runtime, one of an earlier
// format, or not an occurrence ID at all. A namespace has no '/' and a
// schedule name none either, so the first '/' ends the namespace.
func NamespaceOfID(id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, "cron:")
	if !ok {
		return "", false
	}
	ns, _, ok := strings.Cut(rest, "/")
	if !ok || ns == "" {
		return "", false
	}
	return ns, true
}

// EncodeOccurrence is the asynq task payload for occ: what json.Marshal
// writes for it, byte for byte, without reflection. It is on the path of
// every enqueue, where json.Marshal was a large share of the scheduler's
// CPU in a burst of 3,000 enqueues (BenchmarkEncodeOccurrence;
// BENCHMARKS.md, "Micro-benchmarks").
func EncodeOccurrence(occ Occurrence) []byte {
	slot, err := occ.Slot.MarshalJSON()
	if err != nil { // only fails for unrepresentable times (years outside 0..9999)
		panic(fmt.Sprintf("registry: encoding occurrence %q: %v", occ.ID, err))
	}
	b := make([]byte, 0, 64+len(occ.Schedule)+len(slot)+len(occ.Zone)+len(occ.Member)+len(occ.ID)+len(occ.RerunOf))
	b = append(b, `{"schedule":`...)
	b = jsonquote.Append(b, occ.Schedule)
	b = append(b, `,"slot":`...)
	b = append(b, slot...)
	b = append(b, `,"zone":`...)
	b = jsonquote.Append(b, occ.Zone)
	if occ.Member != "" {
		b = append(b, `,"member":`...)
		b = jsonquote.Append(b, occ.Member)
	}
	if occ.Manual {
		b = append(b, `,"manual":true`...)
	}
	b = append(b, `,"id":`...)
	b = jsonquote.Append(b, occ.ID)
	if occ.RerunOf != "" {
		b = append(b, `,"rerun_of":`...)
		b = jsonquote.Append(b, occ.RerunOf)
	}
	return append(b, '}')
}

// DecodeOccurrence parses a payload written by EncodeOccurrence and restores
// the slot's zone when the zone is known.
func DecodeOccurrence(payload []byte) (Occurrence, error) {
	var occ Occurrence
	if err := json.Unmarshal(payload, &occ); err != nil {
		return Occurrence{}, fmt.Errorf("decoding occurrence payload: %w", err)
	}
	if occ.Schedule == "" || occ.Slot.IsZero() {
		return Occurrence{}, fmt.Errorf("decoding occurrence payload: schedule and slot are required, got %q", payload)
	}
	if loc, err := LoadZone(occ.Zone); err == nil {
		occ.Slot = occ.Slot.In(loc)
	}
	return occ, nil
}

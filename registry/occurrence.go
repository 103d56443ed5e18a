package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
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
	// Zone is the IANA name of the schedule's zone.
	Zone string `json:"zone"`
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
	return OccurrenceID(o.Schedule, o.Slot)
}

// OccurrenceID is the identity of the scheduled occurrence of name at slot:
// "cron:<name>:<slot unix seconds>". It is the asynq TaskID, so a second
// enqueue of the same occurrence by any replica is rejected by asynq.
//
// Names may contain ':' (asynq's category:action), and every ID still
// belongs to one occurrence: a name never has a segment that marks another
// kind of ID ("manual", see CheckName), so in a manual ID the first such
// segment ends the name, and a scheduled ID's name is all but its last
// segment.
func OccurrenceID(name string, slot time.Time) string {
	return "cron:" + name + ":" + strconv.FormatInt(slot.Unix(), 10)
}

// ManualOccurrenceID is the identity of a manual trigger of name, where
// request is unique per trigger request (a double-submitted request reuses it).
func ManualOccurrenceID(name, request string) string {
	return "cron:" + name + ":manual:" + request
}

// RerunOccurrenceID is the identity of a re-run of name's slot, where
// request is unique per re-run request: distinct from the scheduled
// occurrence's ID, so asynq accepts it while the original is retained or
// archived, and the same for a double-submitted request.
func RerunOccurrenceID(name string, slot time.Time, request string) string {
	return "cron:" + name + ":rerun:" + strconv.FormatInt(slot.Unix(), 10) + ":" + request
}

// EncodeOccurrence is the asynq task payload for occ.
func EncodeOccurrence(occ Occurrence) []byte {
	b, err := json.Marshal(occ)
	if err != nil { // only fails for unrepresentable times (years outside 0..9999)
		panic(fmt.Sprintf("registry: encoding occurrence %q: %v", occ.ID, err))
	}
	return b
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

package core

import (
	"context"
	"math"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/checkpoint"
	"github.com/belfry/belfry/runtime/engine"
)

// checkpointGrace is how long a checkpointed handler whose context ended
// (its worker shutting down) is given to save its place and return, and
// how long Close waits for such handlers.
const checkpointGrace = 6 * time.Second

// progressKey is the occurrence whose progress a checkpointed handler
// keeps: the occurrence's own ID, so that a re-run of a slot starts over
// while a retry or continuation of the same occurrence resumes.
func progressKey(occ registry.Occurrence) string {
	if occ.ID != "" {
		return occ.ID
	}
	return occ.Key()
}

// ResumeScope is the scope in which resume=next carries a schedule's
// unfinished work to its next occurrence: the schedule, and for a family
// the member. Manual runs have none. The separator is '/', which neither
// a name nor a member key may hold, so no two scopes are spelled alike,
// and which a text column stores (a NUL byte is no valid UTF-8 text).
func ResumeScope(s *registry.Schedule, occ registry.Occurrence) string {
	if s.Resume != registry.ResumeNext || occ.Manual {
		return ""
	}
	if occ.Member != "" {
		return s.Name + "/" + occ.Member
	}
	return s.Name
}

// bindCheckpoint gives the handler's context what checkpoint.Run needs,
// when the engine keeps progress; bound is nil otherwise.
func (r *Runtime) bindCheckpoint(ctx context.Context, s *registry.Schedule, occ registry.Occurrence) (_ context.Context, bound *checkpoint.Binding) {
	store, ok := r.eng.(engine.Progress)
	if !ok || r.disabled != "" {
		return ctx, nil
	}
	bound = &checkpoint.Binding{Store: store, Key: progressKey(occ), Scope: ResumeScope(s, occ), Now: r.clock.Now}
	return checkpoint.Bind(ctx, bound), bound
}

// Progress is a checkpointed occurrence's saved progress, as its record
// shows it.
type Progress struct {
	Cursor string `json:"cursor"`
	Done   bool   `json:"done"`
	// Items is how many items the saved batches processed, as the handler
	// reported them; Total how many in all, 0 when it did not say.
	Items int64 `json:"items_done"`
	Total int64 `json:"items_total,omitempty"`
	// Resumptions counts the attempts after the first that took it up
	// again: continuations, retries, and with resume=next the next
	// occurrence.
	Resumptions int64     `json:"resumptions"`
	StartedAt   time.Time `json:"started_at"`
	UpdatedAt   time.Time `json:"updated_at,omitzero"`
	// Rate is items per second from StartedAt to UpdatedAt, to the
	// hundredth; 0 when unknown.
	Rate float64 `json:"rate,omitempty"`
	// Estimate is when the run ends at Rate, for a Total known and not
	// reached; zero otherwise.
	Estimate time.Time `json:"estimate,omitzero"`
}

func progressOf(cp engine.Checkpoint) *Progress {
	p := &Progress{Cursor: cp.Cursor, Done: cp.Done, Items: cp.Items, Total: cp.Total, Resumptions: cp.Resumptions(),
		StartedAt: unixMilli(cp.StartedAt), UpdatedAt: unixMilli(cp.UpdatedAt)}
	if took := cp.UpdatedAt - cp.StartedAt; took > 0 && cp.Items > 0 {
		p.Rate = math.Round(float64(cp.Items)*1000/float64(took)*100) / 100
		if !cp.Done && cp.Total > cp.Items && p.Rate > 0 {
			left := time.Duration(float64(cp.Total-cp.Items) / p.Rate * float64(time.Second))
			p.Estimate = p.UpdatedAt.Add(left)
		}
	}
	return p
}

// attachProgress gives the records of checkpointed occurrences their
// progress, in one read.
func (r *Runtime) attachProgress(ctx context.Context, recs []Record) error {
	store, ok := r.eng.(engine.Progress)
	if !ok || len(recs) == 0 {
		return nil
	}
	var ids []string
	var at []int
	for i, rec := range recs {
		if rec.Outcome.enqueued() {
			ids, at = append(ids, rec.ID), append(at, i)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	cps, found, err := store.Progresses(ctx, ids)
	if err != nil {
		return err
	}
	for j, i := range at {
		if found[j] {
			recs[i].Progress = progressOf(cps[j])
		}
	}
	return nil
}

// attachLiveProgress gives the recent records of the occurrences under
// way (running, continued) their progress, in one read; the overview shows
// it, and a failed read leaves them without.
func (r *Runtime) attachLiveProgress(ctx context.Context, states []ScheduleState) {
	var live []Record
	var at [][2]int
	for i, st := range states {
		for j, rec := range st.Recent {
			if rec.Outcome == OutcomeRunning || rec.Outcome == OutcomeContinued {
				live, at = append(live, rec), append(at, [2]int{i, j})
			}
		}
	}
	if len(live) == 0 || r.attachProgress(ctx, live) != nil {
		return
	}
	for k, ij := range at {
		states[ij[0]].Recent[ij[1]].Progress = live[k].Progress
	}
}

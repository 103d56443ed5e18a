package admin

import (
	"strconv"
	"time"

	"github.com/belfry/belfry/internal/jsonquote"
	"github.com/belfry/belfry/runtime/core"
)

// The unpaged list writes 100,000 schedules; through encoding/json each is
// reflected over, marshalled compact and then re-indented, which was most
// of that request's time. apiSchedule writes itself here instead, in
// one pass, byte for byte what json.MarshalIndent(v, "  ", "  ") writes
// for it as an element of the array (TestAppendIndentedMatchesEncodingJSON
// holds the two together, field by field and for every escape). Other
// values, a family's row among them, still go through encoding/json.

// jsonIndenter appends JSON indented as json.MarshalIndent with prefix and
// indent "  " writes it: the first line unprefixed, each value of an object
// or array on its own line one level deeper, empty ones as {} and [].
type jsonIndenter struct {
	b     []byte
	depth int
	empty bool // the innermost open object or array has no member yet
}

func (w *jsonIndenter) newline() {
	w.b = append(w.b, '\n', ' ', ' ')
	for range w.depth {
		w.b = append(w.b, ' ', ' ')
	}
}

func (w *jsonIndenter) open(c byte) {
	w.b = append(w.b, c)
	w.depth++
	w.empty = true
}

func (w *jsonIndenter) close(c byte) {
	w.depth--
	if !w.empty {
		w.newline()
	}
	w.b = append(w.b, c)
	w.empty = false
}

// elem starts an array element.
func (w *jsonIndenter) elem() {
	if !w.empty {
		w.b = append(w.b, ',')
	}
	w.newline()
	w.empty = false
}

// key starts an object member.
func (w *jsonIndenter) key(k string) {
	w.elem()
	w.b = jsonquote.Append(w.b, k)
	w.b = append(w.b, ':', ' ')
}

func (w *jsonIndenter) str(k, v string) { w.key(k); w.b = jsonquote.Append(w.b, v) }
func (w *jsonIndenter) num(k string, v int64) {
	w.key(k)
	w.b = strconv.AppendInt(w.b, v, 10)
}
func (w *jsonIndenter) boolean(k string, v bool) { w.key(k); w.b = strconv.AppendBool(w.b, v) }
func (w *jsonIndenter) null(k string)            { w.key(k); w.b = append(w.b, "null"...) }

// timestamp writes t as time.Time's MarshalJSON does (RFC 3339 with the
// nanoseconds it has). A year past 9999, which only a corrupted counter
// could give, MarshalJSON refuses, failing the whole list; here it is
// written as AppendFormat writes it, and the rest of the list still is.
func (w *jsonIndenter) timestamp(k string, t time.Time) {
	w.key(k)
	w.b = append(w.b, '"')
	w.b = t.AppendFormat(w.b, time.RFC3339Nano)
	w.b = append(w.b, '"')
}

func (w *jsonIndenter) strOmitEmpty(k, v string) {
	if v != "" {
		w.str(k, v)
	}
}

func (w *jsonIndenter) numOmitEmpty(k string, v int64) {
	if v != 0 {
		w.num(k, v)
	}
}

func (w *jsonIndenter) timeOmitZero(k string, t time.Time) {
	if !t.IsZero() {
		w.timestamp(k, t)
	}
}

func (w *jsonIndenter) strOrNull(k string, v *string) {
	if v == nil {
		w.null(k)
		return
	}
	w.str(k, *v)
}

func (w *jsonIndenter) timeOrNull(k string, t *time.Time) {
	if t == nil {
		w.null(k)
		return
	}
	w.timestamp(k, *t)
}

func (s apiSchedule) appendIndented(b []byte) []byte {
	w := jsonIndenter{b: b}
	w.open('{')
	w.str("name", s.Name)
	w.str("expression", s.Expression)
	w.str("zone", s.Zone)
	w.str("queue", s.Queue)
	w.str("timeout", s.Timeout)
	w.num("max_retry", int64(s.MaxRetry))
	w.str("grace", s.Grace)
	w.str("overlap", s.Overlap)
	w.str("misfire", s.Misfire)
	w.strOmitEmpty("source", s.Source)
	w.strOrNull("next_run", s.NextRun)
	w.strOrNull("next_run_utc", s.NextRunUTC)
	w.str("status", string(s.Status))
	if p := s.Paused; p == nil {
		w.null("paused")
	} else {
		w.key("paused")
		w.open('{')
		w.str("reason", p.Reason)
		w.strOmitEmpty("actor", p.Actor)
		w.timestamp("at", p.At)
		w.close('}')
	}
	if s.LastRun == nil {
		w.null("last_run")
	} else {
		w.key("last_run")
		w.record(s.LastRun)
	}
	if c := s.Counters; c == nil {
		w.null("counters")
	} else {
		w.key("counters")
		w.open('{')
		w.num("enqueued", c.Enqueued)
		w.num("manual", c.Manual)
		w.num("missed", c.Missed)
		w.num("skipped", c.Skipped)
		w.num("buffered", c.Buffered)
		w.num("replaced", c.Replaced)
		w.num("paused", c.Paused)
		w.num("succeeded", c.Succeeded)
		w.num("failed", c.Failed)
		w.timeOrNull("last_enqueue", c.LastEnqueue)
		w.timeOrNull("last_success", c.LastSuccess)
		w.timeOrNull("last_failure", c.LastFailure)
		w.close('}')
	}
	if len(s.History) > 0 {
		w.key("history")
		w.open('[')
		for i := range s.History {
			w.elem()
			w.record(&s.History[i])
		}
		w.close(']')
	}
	if len(s.Missing) > 0 {
		w.key("missing")
		w.open('[')
		for _, m := range s.Missing {
			w.elem()
			w.open('{')
			w.str("part", m.Part)
			w.str("reason", m.Reason)
			w.close('}')
		}
		w.close(']')
	}
	w.close('}')
	return w.b
}

// record writes a runtime.Record as its MarshalJSON does.
func (w *jsonIndenter) record(r *core.Record) {
	w.open('{')
	if id := r.TaskID(); id == "" {
		w.null("task_id")
	} else {
		w.str("task_id", id)
	}
	w.str("occurrence_id", r.ID)
	w.str("schedule", r.Schedule)
	w.timestamp("slot", r.Slot)
	w.boolean("manual", r.Manual)
	w.str("outcome", string(r.Outcome))
	w.timeOmitZero("enqueued_at", r.EnqueuedAt)
	w.timeOmitZero("recorded_at", r.RecordedAt)
	w.timeOmitZero("started_at", r.StartedAt)
	w.timeOmitZero("finished_at", r.FinishedAt)
	w.numOmitEmpty("duration_ms", r.DurationMS)
	w.strOmitEmpty("error", r.Error)
	w.numOmitEmpty("attempt", int64(r.Attempt))
	w.numOmitEmpty("max_retry", int64(r.MaxRetry))
	w.strOmitEmpty("replica", r.Replica)
	w.strOmitEmpty("actor", r.Actor)
	w.strOmitEmpty("member", r.Member)
	if p := r.Progress; p != nil {
		w.key("progress")
		w.open('{')
		w.str("cursor", p.Cursor)
		w.boolean("done", p.Done)
		w.num("items_done", p.Items)
		w.numOmitEmpty("items_total", p.Total)
		w.num("resumptions", p.Resumptions)
		w.timestamp("started_at", p.StartedAt)
		w.timeOmitZero("updated_at", p.UpdatedAt)
		if p.Rate != 0 {
			// core rounds the rate to hundredths, which encoding/json too
			// writes in this form.
			w.key("rate")
			w.b = strconv.AppendFloat(w.b, p.Rate, 'f', -1, 64)
		}
		w.timeOmitZero("estimate", p.Estimate)
		w.close('}')
	}
	w.close('}')
}

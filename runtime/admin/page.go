package admin

import (
	"cmp"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
)

// The page: an overview of every schedule, one page per schedule with its
// history, and a confirmation step for each button. Every button is a link
// to a small form that POSTs and redirects back, so the page works without
// JavaScript; admin.js only refreshes the data in place.

var (
	//go:embed admin.html
	pageHTML string
	//go:embed admin.js
	pageScript []byte
)

var pageTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"pathEscape": url.PathEscape,
	"duration":   registry.FormatDuration,
	"glyph":      glyph,
	"process":    processOf,
}).Parse(pageHTML))

// processOf names the process behind a replica, "pid 385 on web-1", as its
// heartbeat recorded it; "" if it recorded none.
func processOf(c core.Cluster, replica string) string {
	p, ok := c.Processes[replica]
	if !ok {
		return ""
	}
	return fmt.Sprintf("pid %d on %s", p.PID, p.Host)
}

// glyph is an outcome in one character, for the row of earlier runs on the
// overview (each with its outcome in words as its title).
func glyph(o core.Outcome) string {
	switch o {
	case core.OutcomeSucceeded:
		return "✓"
	case core.OutcomeFailed:
		return "✗"
	case core.OutcomeRetrying:
		return "↻"
	case core.OutcomeContinued:
		return "↪" // stopped between batches, its place saved; it goes on
	case core.OutcomeMissed:
		return "–"
	case core.OutcomeSkipped:
		return "»"
	case core.OutcomeBuffered:
		return "⋯" // waits behind the running occurrence
	case core.OutcomeReplaced:
		return "⇥" // cancelled for a newer occurrence
	case core.OutcomePaused:
		return "‖"
	case core.OutcomeLost:
		return "?" // a failover lost its task: it may or may not have run
	}
	return "…" // enqueued, running
}

type pageData struct {
	Title string
	core.Snapshot
	// Orphans are the removed schedules the index offers to forget. They
	// are read for that page alone: finding them reads every schedule's
	// counters, which the other pages, metrics and health do not need.
	Orphans []string
	// OrphansPending says the removed schedules are still being read.
	OrphansPending bool
	Notice         string
	Error          string
	Request        string // a fresh token per rendered form: a double submit acts once
	Base           string // relative path back to the index
	// HasMetrics says /metrics is served (Options.Metrics).
	HasMetrics bool
	// RefreshMS is how often admin.js reloads the live parts; 0: never.
	RefreshMS int64
	AsOf      string // when the data was read, in UTC
	Bare      bool   // a message page: no cluster line
	// CanAct shows the buttons: not read-only, and a scheduler to act
	// on (without Redis every action would fail).
	CanAct bool

	Rows     []scheduleRow // the overview's page, problems first
	Warnings []string      // what keeps schedules from running, in words
	Summary  string        // "1 failing · 1 late · 1 paused · 2 ok"
	// SummaryParts are the same counts, each linking to its status.
	SummaryParts []summaryPart
	Query        listQuery
	Paging       paging
	Statuses     []core.Status // the search form's choices
	Detail       *scheduleRow
	History      []historyRow
	Confirm      *confirmation
	Members      *membersView // a family's page: its members
	Member       *memberPage  // a member's page
}

// scheduleRow is one schedule as the page shows it.
type scheduleRow struct {
	core.ScheduleState
	Path        string // the schedule's page, relative to the current page
	Words       string // the expression in words; "" when there are none
	Next        instant
	LastSuccess instant
	LastFailure instant
	// FailureExcerpt is the first line of the newest failure's error (of
	// those on the page), and FailureError all of it.
	FailureExcerpt, FailureError string
	Recent                       []historyRow
	PausedNote                   string // "paused by alice 3 min ago: reason"
	// Unserved says no asynq server listens to the schedule's queue.
	Unserved bool
	Retries  string     // "1 retry", "2 retries"
	Totals   string     // see totals
	Family   *familyRow // a family's member count; nil for a schedule
	// CanAct shows the row's buttons (see pageData.CanAct).
	CanAct bool
}

// instant is a time as the page prints it, every time the same way: RFC
// 3339 in the schedule's zone (see rfc3339), with the zone's abbreviation,
// UTC beside it and a relative form.
type instant struct {
	Zero     bool
	Local    string // 2026-12-01T03:17:00+00:00
	Abbrev   string // GMT; "" when the zone has only a numeric name
	UTC      string // 2026-12-01T03:17:00Z; "" for a UTC schedule
	Relative string // "in 16 min", "3 min ago"
	Precise  string // RFC 3339 with milliseconds, for a tooltip
}

// offsetLayout is RFC 3339 that always writes the offset: Go's
// time.RFC3339 writes Z for every +00:00, which on a Europe/London
// schedule reads as UTC half the year and wrongly the other half.
const offsetLayout = "2006-01-02T15:04:05-07:00"

// rfc3339 writes t in its location, as the page and the JSON write every
// time of a schedule: Z for UTC, and for any other zone its offset, never
// Z, even where the zone sits at +00:00 (see offsetLayout).
func rfc3339(t time.Time) string {
	if t.Location().String() == "UTC" {
		return t.Format(time.RFC3339)
	}
	return t.Format(offsetLayout)
}

func instantOf(t time.Time, loc *time.Location, now time.Time) instant {
	if t.IsZero() {
		return instant{Zero: true}
	}
	t = t.In(loc)
	in := instant{Relative: relative(t, now), Local: rfc3339(t), Precise: t.Format("2006-01-02T15:04:05.000-07:00")}
	if loc.String() == "UTC" {
		in.Precise = t.Format("2006-01-02T15:04:05.000Z07:00")
		return in
	}
	if abbr := t.Format("MST"); !strings.HasPrefix(abbr, "+") && !strings.HasPrefix(abbr, "-") {
		in.Abbrev = abbr
	}
	in.UTC = t.UTC().Format(time.RFC3339)
	return in
}

// relative says how far t is from now: "in 16 min", "3 min ago".
func relative(t, now time.Time) string {
	d, future := t.Sub(now).Round(time.Second), t.After(now)
	if d < 0 {
		d = -d
	}
	var s string
	switch {
	case d < time.Second && future:
		return "now"
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		s = strconv.Itoa(int(d/time.Second)) + " s"
	case d < time.Hour:
		s = strconv.Itoa(int(d/time.Minute)) + " min"
	case d < 10*time.Hour && d%time.Hour >= time.Minute:
		s = fmt.Sprintf("%d h %d min", int(d/time.Hour), int(d%time.Hour/time.Minute))
	case d < 48*time.Hour:
		s = strconv.Itoa(int(d/time.Hour)) + " h"
	default:
		s = plural(int(d/(24*time.Hour)), "day", "days")
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

// historyRow is one occurrence as the page shows it.
type historyRow struct {
	core.Record
	Slot     instant
	Enqueued instant
	Started  instant
	Finished instant
	SlotUnix int64
	Kind     string // "", "run now" or "re-run"
	Outcome  string // "succeeded", "retrying 1/3", ...
	Attempts string // "after 2 retries", for a failure that was retried
	// Progress is a checkpointed occurrence's progress in words: "1,200 of
	// 10,000 items · 2 resumptions · 85/s · ends 03:41".
	Progress   string
	Excerpt    string // the error's first line
	Rerunnable bool   // its slot is one the schedule really had
	// Prominent marks the rows whose slot did not get its work done.
	Prominent bool
	// MadeUp marks a scheduled row whose slot a re-run has since done.
	MadeUp bool
}

func historyRowOf(rec core.Record, s *registry.Schedule, now time.Time) historyRow {
	loc := s.Location()
	row := historyRow{Record: rec, Slot: instantOf(rec.Slot, loc, now), Enqueued: instantOf(rec.EnqueuedAt, loc, now),
		Started: instantOf(rec.StartedAt, loc, now), Finished: instantOf(rec.FinishedAt, loc, now),
		SlotUnix: rec.Slot.Unix(), Outcome: string(rec.Outcome), Excerpt: excerpt(rec.Error), Rerunnable: true}
	switch {
	case registry.KindOfID(rec.ID) == registry.Manual:
		// Run now's slot is the moment of the click, not a slot of the
		// schedule: there is nothing to re-run.
		row.Kind, row.Rerunnable = "run now", false
	case registry.KindOfID(rec.ID) == registry.Rerun:
		row.Kind = "re-run"
	}
	switch rec.Outcome {
	case core.OutcomeRetrying:
		row.Outcome = fmt.Sprintf("retrying %d/%d", rec.Attempt+1, rec.MaxRetry)
	case core.OutcomeFailed:
		if rec.Attempt > 0 {
			row.Attempts = "after " + plural(rec.Attempt, "retry", "retries")
		}
	}
	switch rec.Outcome {
	case core.OutcomeFailed, core.OutcomeMissed, core.OutcomeSkipped, core.OutcomePaused, core.OutcomeLost:
		row.Prominent = row.Rerunnable
	}
	if p := rec.Progress; p != nil {
		row.Progress = progressWords(p, loc, now)
	}
	return row
}

// progressWords says how far a checkpointed occurrence got.
func progressWords(p *core.Progress, loc *time.Location, now time.Time) string {
	items := plural(int(p.Items), "item", "items")
	if p.Total > 0 {
		items = fmt.Sprintf("%d of %d items", p.Items, p.Total)
	}
	parts := []string{items}
	if !p.Done && p.Cursor != "" {
		parts = append(parts, "at "+strconv.Quote(p.Cursor))
	}
	if p.Resumptions > 0 {
		parts = append(parts, plural(int(p.Resumptions), "resumption", "resumptions"))
	}
	if p.Rate > 0 {
		parts = append(parts, strconv.FormatFloat(p.Rate, 'f', 1, 64)+"/s")
	}
	if !p.Done && !p.Estimate.IsZero() {
		parts = append(parts, "ends "+instantOf(p.Estimate, loc, now).Relative)
	}
	return strings.Join(parts, " · ")
}

// historyRows are a schedule's history as the page shows it. A slot whose
// work a re-run has since done is no longer highlighted: its row says the
// re-run succeeded.
func historyRows(history []core.Record, s *registry.Schedule, now time.Time) []historyRow {
	rows := make([]historyRow, 0, len(history))
	madeUp := map[int64]bool{}
	for _, rec := range history {
		row := historyRowOf(rec, s, now)
		if row.Kind == "re-run" && rec.Outcome == core.OutcomeSucceeded {
			madeUp[row.SlotUnix] = true
		}
		rows = append(rows, row)
	}
	for i, row := range rows {
		if row.Prominent && row.Kind == "" && madeUp[row.SlotUnix] {
			rows[i].Prominent, rows[i].MadeUp = false, true
		}
	}
	return rows
}

// maxExcerpt bounds an error excerpt on the overview, in characters.
const maxExcerpt = 120

// excerpt is the first line of an error (a panic's value, not its stack),
// cut short.
func excerpt(msg string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(msg), "\n")
	if r := []rune(line); len(r) > maxExcerpt {
		return string(r[:maxExcerpt]) + "…"
	}
	return line
}

func (a *admin) rowOf(snap core.Snapshot, st core.ScheduleState, path string) scheduleRow {
	s, now := st.Schedule, snap.At
	loc := s.Location()
	row := scheduleRow{ScheduleState: st, Path: path, Next: instantOf(st.Next, loc, now),
		Unserved:    slices.Contains(snap.Unserved, s.Queue),
		LastSuccess: instantOf(st.Counters.LastSuccess, loc, now), LastFailure: instantOf(st.Counters.LastFailure, loc, now),
		Retries: plural(s.MaxRetry, "retry", "retries"), Totals: totals(st.Counters)}
	row.Words, _ = describe(s.Expr, s.Zone)
	for _, rec := range st.Recent {
		row.Recent = append(row.Recent, historyRowOf(rec, s, now))
		if row.FailureError == "" && (rec.Outcome == core.OutcomeFailed || rec.Outcome == core.OutcomeRetrying) {
			row.FailureError, row.FailureExcerpt = rec.Error, excerpt(rec.Error)
		}
	}
	row.PausedNote = pausedNote(st.Paused, now)
	return row
}

// totals are a schedule's counters in words that add up: the ledger
// counts enqueues on schedule and by hand (Run now, Re-run) apart, while
// successes and failures count both, so "enqueued" here is their sum.
func totals(c core.Counters) string {
	return fmt.Sprintf("%d enqueued (%d on schedule, %d by hand): %d succeeded, %s · not run: %d missed, %d skipped, %d paused%s",
		c.Enqueued+c.Manual, c.Enqueued, c.Manual, c.Succeeded, plural(int(c.Failed), "failed attempt", "failed attempts"),
		c.Missed, c.Skipped, c.Paused, overlapTotals(c))
}

// pausedNote says who paused, when and why: "paused by alice 3 min ago:
// reason"; "" for nil.
func pausedNote(p *core.Pause, now time.Time) string {
	if p == nil {
		return ""
	}
	note := "paused"
	if p.Actor != "" {
		note += " by " + p.Actor
	}
	if !p.At.IsZero() {
		note += " " + relative(p.At, now)
	}
	if p.Reason != "" {
		note += ": " + p.Reason
	}
	return note
}

// paging is the line above and below the overview's table.
type paging struct {
	From, To, Matched int    // "101–200 of 12,345"
	Next, First       string // links to the next and the first page; "" when there is none
	Filtered          bool   // a search or status filter is applied
}

// rows are the snapshot's schedules as the overview shows them, in the
// snapshot's order.
func (a *admin) rows(snap core.Snapshot, canAct bool) []scheduleRow {
	rows := make([]scheduleRow, 0, len(snap.Schedules))
	for _, st := range snap.Schedules {
		row := a.rowOf(snap, st, "schedules/"+url.PathEscape(st.Schedule.Name))
		row.CanAct = canAct
		rows = append(rows, row)
	}
	return rows
}

func newRequestToken() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (a *admin) page(snap core.Snapshot, base string) pageData {
	data := pageData{Title: a.opts.Title, Snapshot: snap, Request: newRequestToken(),
		Base: base, HasMetrics: a.opts.Metrics != nil, AsOf: snap.At.UTC().Format("15:04:05") + " UTC",
		CanAct: !a.opts.ReadOnly && a.r.Leadership().Disabled() == ""}
	if a.opts.Refresh > 0 {
		data.RefreshMS = a.opts.Refresh.Milliseconds()
	}
	data.Warnings = warnings(snap, a.r.Registry().Schedules())
	if len(snap.Missing) > 0 {
		data.Error = missingNotice(snap.Missing)
	}
	return data
}

// unservedNamed bounds the schedules a warning names.
const unservedNamed = 5

// warnings says what keeps the schedules from running, and what to do.
func warnings(snap core.Snapshot, scheds []*registry.Schedule) []string {
	var out []string
	if snap.RedisUnsafe != "" {
		out = append(out, "This replica will not lead: "+snap.RedisUnsafe+".")
	}
	if snap.DuplicateReplica != "" {
		// Its message already says what to do.
		out = append(out, "Two processes share a name, so the page cannot tell them apart: "+snap.DuplicateReplica+".")
	}
	if snap.NamespaceContention != "" {
		out = append(out, "Another service shares this namespace: "+snap.NamespaceContention+".")
	}
	for _, m := range snap.Misrouted {
		out = append(out, "Workers bounce this service's occurrences: "+m.String()+".")
	}
	if snap.LegacyNamespace != "" {
		out = append(out, "An earlier deployment still schedules these jobs: "+snap.LegacyNamespace+".")
	}
	for _, q := range snap.Unserved {
		var names []string
		more := 0
		for _, s := range scheds {
			switch {
			case s.Queue != q:
			case len(names) < unservedNamed:
				names = append(names, s.Name)
			default:
				more++
			}
		}
		if more > 0 {
			names = append(names, plural(more, "other schedule", "other schedules"))
		}
		out = append(out, fmt.Sprintf("No asynq server listens to queue %q: occurrences of %s are enqueued and wait. "+
			"Add the queue to a worker's asynq.Config.Queues.", q, joinAnd(names)))
	}
	for _, lost := range snap.LostWrites {
		out = append(out, fmt.Sprintf("Redis lost data (%s), noticed by %s %s: slots from %s to %s may not have run. "+
			"Re-run the ones whose work is needed, or backfill the range.", lost.Reason, lost.Replica,
			relative(lost.At, snap.At), lost.From.UTC().Format(time.RFC3339), lost.To.UTC().Format(time.RFC3339)))
	}
	return out
}

// index serves one page of the overview (see list.go).
func (a *admin) index(w http.ResponseWriter, req *http.Request) {
	q, err := parseListQuery(req.URL.Query())
	if err != nil {
		data := a.page(core.Snapshot{}, "./")
		data.Error, data.Bare, data.RefreshMS = err.Error(), true, 0
		a.render(w, http.StatusBadRequest, "message", data)
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), readTimeout)
	defer cancel()
	l, _ := a.list(ctx, q)
	snap, _ := a.r.Monitor().SnapshotOf(ctx, l.names(), recentPerRow)
	snap.Missing = mergeMissing(l.Statuses.Missing, snap.Missing)
	if l.Statuses.Redis == core.RedisSlow && snap.Redis == core.RedisUp {
		snap.Redis = core.RedisSlow
	}
	data := a.page(snap, "./")
	data.Rows = a.rows(snap, data.CanAct)
	a.addFamilies(ctx, data.Rows, snap.At)
	data.SummaryParts, data.Summary = summary(l.Statuses.Counts)
	data.Query, data.Statuses = q, statusOrder
	data.Paging = paging{From: l.Offset + 1, To: l.Offset + len(l.Page), Matched: l.Matched,
		Filtered: q.Q != "" || len(q.Statuses) > 0}
	if l.Next != "" {
		data.Paging.Next = "?" + q.values(l.Next).Encode()
	}
	if q.Cursor != "" {
		data.Paging.First = "?" + q.values("").Encode()
	}
	if q.Cursor == "" && !data.Paging.Filtered && a.r.Leadership().Disabled() == "" {
		// Removed schedules are offered on the first page only.
		data.Orphans, data.OrphansPending = a.orphans.get(ctx, a.r)
	}
	switch req.URL.Query().Get("forgot") {
	case "ok":
		data.Notice = "Forgotten: the removed schedule's state is gone from Redis."
	case strconv.Itoa(http.StatusForbidden):
		data.Error = "Forget refused: this admin is read-only."
	case strconv.Itoa(http.StatusConflict):
		data.Error = "Forget refused: that schedule is in the registry."
	case strconv.Itoa(http.StatusServiceUnavailable):
		data.Error = "Forget failed: the scheduler is disabled or Redis is unreachable."
	}
	a.render(w, http.StatusOK, "index", data)
}

// recentPerRow is how many occurrences a row of the overview shows.
const recentPerRow = 5

// results are the notices of the redirects after a form: the query names
// the action and carries a fixed word, never text, so a crafted link cannot
// put words on the page.
var results = []struct {
	param, verb, ok string
}{
	{"triggered", "Run now", "Triggered: a run-now occurrence is enqueued and appears below."},
	{"rerun", "Re-run", "Re-run enqueued: it appears below with the slot it re-runs."},
	{"paused", "Pause", "Paused: slots that come due are recorded paused and not run."},
	{"resumed", "Resume", "Resumed: the next slot runs; slots recorded paused are not run unless re-run."},
}

func resultNotice(q url.Values) (notice, errMsg string) {
	for _, r := range results {
		switch q.Get(r.param) {
		case "":
			continue
		case "ok":
			return r.ok, ""
		case strconv.Itoa(http.StatusBadRequest):
			if r.param == "rerun" {
				return "", "Re-run refused: that is not a past slot of this schedule."
			}
			return "", r.verb + " refused: malformed request."
		case strconv.Itoa(http.StatusServiceUnavailable):
			return "", r.verb + " failed: the scheduler is disabled or Redis is unreachable."
		}
	}
	return "", ""
}

// scheduleOf reads the cluster and the request's schedule alone, or
// answers 404 itself and reports false. A part it could not read is in
// snap.Missing.
func (a *admin) scheduleOf(w http.ResponseWriter, req *http.Request, base string) (snap core.Snapshot, st core.ScheduleState, ok bool) {
	name := req.PathValue("name")
	if _, ok = a.r.Registry().Lookup(name); !ok {
		data := a.page(core.Snapshot{At: time.Now()}, base)
		data.Error = "No schedule is called " + name + "."
		a.render(w, http.StatusNotFound, "message", data)
		return snap, st, false
	}
	snap, _ = a.snapshotOf(req, []string{name}, recentPerRow)
	return snap, snap.Schedules[0], true
}

func (a *admin) detail(w http.ResponseWriter, req *http.Request) {
	name := req.PathValue("name")
	if _, ok := a.r.Registry().Lookup(name); !ok {
		a.scheduleOf(w, req, "../") // answers 404
		return
	}
	snap, history := a.withHistory(req, name, recentPerRow)
	st := snap.Schedules[0]
	data := a.page(snap, "../")
	// "./" first: a category:action name would otherwise read as a URL
	// scheme, which html/template neutralises, killing every link.
	row := a.rowOf(snap, st, "./"+url.PathEscape(name))
	data.Detail = &row
	data.History = historyRows(history, st.Schedule, snap.At)
	data.Members = a.members(req, data.Detail, snap.At)
	if notice, errMsg := resultNotice(req.URL.Query()); notice != "" || errMsg != "" {
		data.Notice, data.Error = notice, errMsg
	}
	a.render(w, http.StatusOK, "detail", data)
}

// refuse answers a page request with an HTML message.
func (a *admin) refuse(w http.ResponseWriter, status int, msg string) {
	data := a.page(core.Snapshot{}, "../../")
	data.Error, data.Bare, data.RefreshMS = msg, true, 0
	a.render(w, status, "message", data)
}

const readOnlyRefusal = "Refused: this admin is read-only."

// confirmation is the step between a button and its POST.
type confirmation struct {
	Action   string // the form's route: trigger, rerun, pause, resume
	Question string
	Explain  string
	Button   string
	Slot     instant
	SlotUnix int64
	Reason   bool // ask for a reason
	Back     string
	Danger   bool
}

func (a *admin) confirm(w http.ResponseWriter, req *http.Request) {
	if a.opts.ReadOnly {
		a.refuse(w, http.StatusForbidden, readOnlyRefusal)
		return
	}
	name := req.PathValue("name")
	snap, st, ok := a.scheduleOf(w, req, "../../")
	if !ok {
		return
	}
	s := st.Schedule
	c := &confirmation{Back: "../" + url.PathEscape(name)}
	switch req.URL.Query().Get("action") {
	case "run":
		c.Action, c.Button = "trigger", "Run now"
		c.Question = "Run " + name + " now?"
		c.Explain = "This enqueues one extra occurrence whose slot is this moment, with a key of its own. " +
			"It does not redo a past slot: for the night that failed, use Re-run on its history row."
	case "rerun":
		unix, err := strconv.ParseInt(req.URL.Query().Get("slot"), 10, 64)
		if err != nil {
			a.refuse(w, http.StatusBadRequest, "Re-run needs the slot to re-run (slot=<unix seconds>).")
			return
		}
		slot := time.Unix(unix, 0)
		c.Action, c.Button, c.Slot, c.SlotUnix = "rerun", "Re-run this slot", instantOf(slot, s.Location(), snap.At), unix
		c.Question = "Re-run the slot " + c.Slot.Local + " of " + name + "?"
		c.Explain = "The occurrence carries that slot and the scheduled occurrence's key: a handler keyed on occ.Key() " +
			"does that slot's work if it was not done, and nothing if it was. It gets a task ID of its own, " +
			"so asynq accepts it even while the original is archived."
	case "pause":
		c.Action, c.Button, c.Reason, c.Danger = "pause", "Pause", true, true
		c.Question = "Pause " + name + "?"
		c.Explain = "Until it is resumed, slots that come due are recorded as paused and not run, by whichever replica leads. " +
			"Resuming does not run them; each can be re-run from its history row."
	case "resume":
		if st.Paused == nil {
			c.Explain = name + " is not paused; resuming changes nothing."
		} else {
			c.Explain = "The next slot runs. Slots recorded as paused stay unrun; re-run one from its history row if its work is needed."
		}
		c.Action, c.Button = "resume", "Resume"
		c.Question = "Resume " + name + "?"
	default:
		a.refuse(w, http.StatusBadRequest, "Unknown action: want run, rerun, pause or resume.")
		return
	}
	data := a.page(snap, "../../")
	row := a.rowOf(snap, st, "../"+url.PathEscape(name))
	data.Detail, data.Confirm = &row, c
	a.render(w, http.StatusOK, "confirm", data)
}

// confirmForget is the confirmation step of Forget: it deletes state that
// nothing else has, so it asks first like every other button.
func (a *admin) confirmForget(w http.ResponseWriter, req *http.Request) {
	if a.opts.ReadOnly {
		a.refuse(w, http.StatusForbidden, readOnlyRefusal)
		return
	}
	name := req.PathValue("name")
	snap, _ := a.snapshotOf(req, nil, 0)
	ctx, cancel := context.WithTimeout(req.Context(), readTimeout)
	defer cancel()
	if orphans, _ := a.r.Orphans(ctx); !slices.Contains(orphans, name) {
		a.refuse(w, http.StatusNotFound, "No removed schedule is called "+name+".")
		return
	}
	data := a.page(snap, "../../")
	data.Confirm = &confirmation{Action: "forget", Button: "Forget", Danger: true, Back: "../../",
		Question: "Forget " + name + "?",
		Explain: "Its cursor, counters and history are deleted from Redis. If it comes back into the code, " +
			"it starts from now, as a new schedule."}
	a.render(w, http.StatusOK, "confirm", data)
}

// formAction runs the action of a page form and redirects to the
// schedule's page with a fixed result word under param.
func (a *admin) formAction(w http.ResponseWriter, req *http.Request, param string, act func(ctx context.Context, name string) error) {
	if a.opts.ReadOnly {
		a.refuse(w, http.StatusForbidden, readOnlyRefusal)
		return
	}
	name := req.PathValue("name")
	ctx, cancel := a.actionContext(req)
	defer cancel()
	result := "ok"
	if err := act(ctx, name); err != nil {
		status, msg := a.actionError(req, err)
		if status == http.StatusNotFound {
			a.refuse(w, status, msg)
			return
		}
		result = strconv.Itoa(status)
	}
	// A relative Location keeps the mount prefix, which http.Redirect
	// would drop after StripPrefix.
	w.Header().Set("Location", "../"+url.PathEscape(name)+"?"+param+"="+result)
	w.WriteHeader(http.StatusSeeOther)
}

// requestKey is the form's token (or an Idempotency-Key): the same key
// twice acts once.
func requestKey(req *http.Request) string {
	return cmp.Or(req.Header.Get("Idempotency-Key"), req.PostFormValue("request"))
}

func (a *admin) triggerForm(w http.ResponseWriter, req *http.Request) {
	a.formAction(w, req, "triggered", func(ctx context.Context, name string) error {
		_, err := a.r.Trigger(ctx, name, requestKey(req))
		return err
	})
}

func (a *admin) rerunForm(w http.ResponseWriter, req *http.Request) {
	a.formAction(w, req, "rerun", func(ctx context.Context, name string) error {
		unix, err := strconv.ParseInt(req.PostFormValue("slot"), 10, 64)
		if err != nil {
			return fmt.Errorf("%w: slot %q is not unix seconds", core.ErrNotASlot, req.PostFormValue("slot"))
		}
		_, err = a.r.Rerun(ctx, name, time.Unix(unix, 0), requestKey(req))
		return err
	})
}

func (a *admin) pauseForm(w http.ResponseWriter, req *http.Request) {
	a.formAction(w, req, "paused", func(ctx context.Context, name string) error {
		reason := strings.TrimSpace(req.PostFormValue("reason"))
		// A double-submitted form finds its own pause and leaves it, so
		// the pause keeps the time of the first click.
		if paused, err := a.r.Paused(ctx); err == nil {
			if p, ok := paused[name]; ok && p.Reason == reason && p.Actor == core.ActorFrom(ctx) {
				return nil
			}
		}
		return a.r.Pause(ctx, name, reason)
	})
}

func (a *admin) resumeForm(w http.ResponseWriter, req *http.Request) {
	// Resuming a schedule that runs changes nothing: a double submit is
	// harmless as it is.
	a.formAction(w, req, "resumed", a.r.Resume)
}

// contentSecurityPolicy lets the page run only its own script, talk only to
// its own origin and post forms only to itself.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; " +
	"form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

func (a *admin) render(w http.ResponseWriter, status int, page string, data pageData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", contentSecurityPolicy)
	w.WriteHeader(status)
	if err := pageTemplates.ExecuteTemplate(w, page, data); err != nil {
		a.r.Logger().Warn("rendering the admin page", "page", page, "err", err)
	}
}

func serveScript(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(pageScript)
}

// overlapTotals adds what overlap=buffer_one and overlap=replace did, ""
// when they did nothing.
func overlapTotals(c core.Counters) string {
	if c.Buffered == 0 && c.Replaced == 0 {
		return ""
	}
	return fmt.Sprintf(" · overlap: %d buffered, %d replaced", c.Buffered, c.Replaced)
}

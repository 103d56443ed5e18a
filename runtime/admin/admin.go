// Package admin serves belfry's admin page and JSON API for one runtime: the
// schedules with their next runs, history and status, the cluster, and a
// Trigger per schedule. It is written only against package runtime's public
// API, so anything it shows a service can compute itself.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
	"golang.org/x/time/rate"
)

// Options configure the admin handler.
type Options struct {
	// ReadOnly hides the page's buttons (Run now, Re-run, Pause, Resume)
	// and answers every state-changing request with 403: for an admin
	// exposed to people who may look but not act.
	ReadOnly bool
	// Middleware wraps every route, e.g. the host's own authentication.
	Middleware func(http.Handler) http.Handler
	// Actor names who makes a request (e.g. the user the host's
	// authentication found); triggers, re-runs, backfills, pauses and
	// resumes record it. Default: the client's own claim in the
	// ActorHeader header (the belfry CLI sends user@host), else nobody.
	Actor func(*http.Request) string
	// Title heads the page; default "belfry".
	Title string
	// Metrics, when set, is served at /metrics (e.g. metrics.Handler(rt)
	// from package runtime/metrics). Without it /metrics is 404, and the
	// admin does not link Prometheus.
	Metrics http.Handler
	// AllowedHosts are the host names (as in the Host header, without the
	// port) that may change state (run, re-run, pause, resume, forget)
	// besides localhost and loopback addresses. It is required when the
	// admin is reachable under another name and has no Middleware, which
	// would otherwise leave it open to DNS rebinding; when set, it is
	// checked with Middleware too.
	AllowedHosts []string
	// ManualRunsPerMinute bounds the manual runs (Run now, Re-run,
	// Backfill) of one schedule through this admin; beyond it requests get
	// 429. Default ManualRunsPerMinuteDefault.
	ManualRunsPerMinute int
	// Refresh is how often the page reloads its data by itself when the
	// browser runs JavaScript (without it the page is complete as served,
	// and a reload refreshes it). Default RefreshDefault; negative: never.
	Refresh time.Duration
}

// RefreshDefault is the page's default Options.Refresh.
const RefreshDefault = 5 * time.Second

// New returns the admin handler of rt: an HTML page, a JSON API, a trigger,
// a health check and, when Options.Metrics is set, Prometheus metrics. Its
// paths are relative, so mount it under any prefix with http.StripPrefix:
//
//	mux.Handle("/cron/", http.StripPrefix("/cron", admin.New(rt, admin.Options{Metrics: metrics.Handler(rt)})))
//
// Routes (relative to the prefix):
//
//	GET  /                              the page: ?q= searches names, ?status= filters,
//	                                    ?cursor= pages (100 rows a page, problems first)
//	GET  /schedules/{name}              one schedule and its history
//	GET  /schedules/{name}/confirm      the confirmation step of a page button:
//	                                    ?action=run|pause|resume, or ?action=rerun&slot=<unix seconds>
//	POST /schedules/{name}/trigger      the page's Run now (redirects back)
//	POST /schedules/{name}/rerun        the page's Re-run of a history row's slot (redirects back)
//	POST /schedules/{name}/pause        the page's Pause, with a reason (redirects back)
//	POST /schedules/{name}/resume       the page's Resume (redirects back)
//	GET  /admin.js                      the page's self-refresh (the page works without it)
//	GET  /api/schedules                 every schedule, JSON (a bare array); with any of
//	                                    limit, cursor, q or status one page:
//	                                    {"schedules", "next_cursor", "matched", "counts", "missing"}
//	GET  /api/schedules/{name}          one schedule with history, JSON
//	GET  /api/schedules/{name}/next     its next ?n= slots: see next.go
//	POST /api/schedules/{name}/trigger  202 {"task_id": ...}; Idempotency-Key header or
//	                                    "request" form field makes a double submit a no-op
//	GET  /api/status                    leader, replicas (and each one's process: pid, host), Redis state
//	GET  /api/orphans                   {"orphans": [...]}: schedules with state in Redis
//	                                    that the registry no longer declares
//	DELETE /api/orphans/{name}          204: forget one (its cursor, counters, history)
//	GET  /orphans/{name}/confirm        the confirmation step of the page's Forget
//	POST /orphans/{name}/forget         the page's Forget button (redirects back)
//	GET  /metrics                       Options.Metrics, if set
//	POST /api/schedules/{name}/runs     re-run a past slot: {"slot": RFC 3339} -> 202 {"task_id": ...};
//	                                    backfill: {"from": ..., "to": ...} -> 202 {"task_ids": [...]};
//	                                    400 naming the nearest slots for one that is not real
//	POST /api/schedules/{name}/pause    {"reason": "..."} -> 200; slots due are recorded paused
//	POST /api/schedules/{name}/resume   200; the next slot runs, paused ones do not
//	GET  /healthz                       schedule health for alerts: 200 ok, 503 unhealthy or disabled
//	GET  /livez                         200 while the process serves: for liveness probes
//	     /api/schedules/{name}/members/… a family's members (PUT, DELETE, GET), their manual
//	     /schedules/{name}/members/…     runs and pages: see members.go
//
// State-changing routes are refused with 403 in read-only mode.
//
// Cross-origin POSTs are refused with 403 (http.CrossOriginProtection).
func New(p core.Provider, opts Options) http.Handler {
	rt := p.Core()
	if opts.Title == "" {
		opts.Title = "belfry"
	}
	if opts.Refresh == 0 {
		opts.Refresh = RefreshDefault
	}
	if opts.ManualRunsPerMinute <= 0 {
		opts.ManualRunsPerMinute = ManualRunsPerMinuteDefault
	}
	for i, h := range opts.AllowedHosts {
		opts.AllowedHosts[i] = strings.ToLower(h)
	}
	a := &admin{r: rt, opts: opts, runs: manualRuns{perMinute: opts.ManualRunsPerMinute, limiters: map[string]*rate.Limiter{}},
		names: newByName(rt)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", a.index)
	mux.HandleFunc("GET /schedules/{name}", a.detail)
	mux.HandleFunc("GET /schedules/{name}/confirm", a.confirm)
	mux.HandleFunc("POST /schedules/{name}/trigger", a.limited(false, a.triggerForm))
	mux.HandleFunc("POST /schedules/{name}/rerun", a.limited(false, a.rerunForm))
	mux.HandleFunc("POST /schedules/{name}/pause", a.pauseForm)
	mux.HandleFunc("POST /schedules/{name}/resume", a.resumeForm)
	mux.HandleFunc("GET /admin.js", serveScript)
	mux.HandleFunc("GET /api/schedules", a.apiList)
	mux.HandleFunc("GET /api/schedules/{name}", a.apiDetail)
	mux.HandleFunc("POST /api/schedules/{name}/trigger", a.limited(true, a.apiTrigger))
	mux.HandleFunc("GET /api/status", a.apiStatus)
	mux.HandleFunc("GET /api/orphans", a.apiOrphans)
	mux.HandleFunc("DELETE /api/orphans/{name}", a.apiForget)
	mux.HandleFunc("GET /orphans/{name}/confirm", a.confirmForget)
	mux.HandleFunc("POST /orphans/{name}/forget", a.forgetForm)
	if opts.Metrics != nil {
		mux.Handle("GET /metrics", opts.Metrics)
	}
	mux.Handle("GET /healthz", rt.HealthHandler())
	mux.Handle("GET /livez", rt.LivezHandler())
	mux.HandleFunc("POST /api/schedules/{name}/runs", a.limited(true, a.apiRuns))
	mux.HandleFunc("POST /api/schedules/{name}/pause", a.apiPause)
	mux.HandleFunc("POST /api/schedules/{name}/resume", a.apiResume)
	a.registerMembers(mux)
	a.registerNext(mux)
	var h http.Handler = http.NewCrossOriginProtection().Handler(a.guardHosts(mux))
	if opts.Middleware != nil {
		h = opts.Middleware(h)
	}
	return h
}

type admin struct {
	runs    manualRuns
	r       *core.Runtime
	opts    Options
	names   byName
	orphans orphanCache
}

// readTimeout bounds the Redis reads of one admin request, so a slow or
// unreachable Redis makes a page degrade — saying what it could not read —
// within a second, not hang.
const readTimeout = 800 * time.Millisecond

// fullListTimeout bounds the read of the unpaged JSON list, whose size is
// every schedule's.
const fullListTimeout = 5 * time.Second

// snapshotOf reads the cluster and the named schedules within the request's
// budget.
func (a *admin) snapshotOf(req *http.Request, names []string, recent int) (core.Snapshot, error) {
	ctx, cancel := context.WithTimeout(req.Context(), readTimeout)
	defer cancel()
	return a.r.Monitor().SnapshotOf(ctx, names, recent)
}

// missingOf is whether the schedules' own data is among the missing parts.
func missingOf(missing []core.Missing) []core.Missing {
	var out []core.Missing
	for _, m := range missing {
		if m.Part == core.PartSchedules {
			out = append(out, m)
		}
	}
	return out
}

// trigger runs a trigger request and maps its errors to HTTP statuses.
func (a *admin) trigger(req *http.Request) (id string, status int, msg string) {
	if a.opts.ReadOnly {
		return "", http.StatusForbidden, "triggering is disabled: this admin is read-only"
	}
	key := req.Header.Get("Idempotency-Key")
	if key == "" {
		key = req.FormValue("request")
	}
	ctx, cancel := a.actionContext(req)
	defer cancel()
	occ, err := a.r.Trigger(ctx, req.PathValue("name"), key)
	switch {
	case errors.Is(err, core.ErrUnknownSchedule):
		return "", http.StatusNotFound, "no schedule is called " + req.PathValue("name")
	case errors.Is(err, core.ErrDisabled):
		return "", http.StatusServiceUnavailable, "the scheduler is disabled: " + a.r.Leadership().Disabled()
	case errors.Is(err, core.ErrBadRequestKey):
		return "", http.StatusBadRequest, err.Error()
	case errors.Is(err, core.ErrNoMember):
		return "", http.StatusBadRequest, familyRefusal(req.PathValue("name"))
	case errors.Is(err, core.ErrNotAcked):
		return "", http.StatusServiceUnavailable, notAckedMessage
	case err != nil:
		a.r.Logger().Warn("manual trigger failed", "schedule", req.PathValue("name"), "err", err)
		return "", http.StatusServiceUnavailable, "could not enqueue: Redis unreachable"
	}
	return occ.ID, http.StatusAccepted, ""
}

// apiSchedule is the JSON form of a schedule.
type apiSchedule struct {
	Name       string      `json:"name"`
	Expression string      `json:"expression"`
	Zone       string      `json:"zone"`
	Queue      string      `json:"queue"`
	Timeout    string      `json:"timeout"`
	MaxRetry   int         `json:"max_retry"`
	Grace      string      `json:"grace"`
	Overlap    string      `json:"overlap"`
	Misfire    string      `json:"misfire"`
	Source     string      `json:"source,omitempty"`
	NextRun    *string     `json:"next_run"`
	NextRunUTC *string     `json:"next_run_utc"`
	Status     core.Status `json:"status"`
	// Paused says who paused the schedule, when and why; null when it runs.
	Paused  *core.Pause  `json:"paused"`
	LastRun *core.Record `json:"last_run"`
	// Counters is null when they could not be read (see Missing), never
	// zeros that would read as "never ran".
	Counters *apiCounters  `json:"counters"`
	History  []core.Record `json:"history,omitempty"`
	// Missing says which of the schedule's data could not be read and why;
	// absent when everything was read.
	Missing []core.Missing `json:"missing,omitempty"`
}

// apiCounters are runtime.Counters in JSON: "enqueued" counts the
// enqueues on schedule and "manual" those by hand, so every enqueue is
// their sum; "succeeded" and "failed" count attempts of both.
type apiCounters struct {
	Enqueued    int64      `json:"enqueued"`
	Manual      int64      `json:"manual"`
	Missed      int64      `json:"missed"`
	Skipped     int64      `json:"skipped"`
	Buffered    int64      `json:"buffered"`
	Replaced    int64      `json:"replaced"`
	Paused      int64      `json:"paused"`
	Succeeded   int64      `json:"succeeded"`
	Failed      int64      `json:"failed"`
	LastEnqueue *time.Time `json:"last_enqueue"`
	LastSuccess *time.Time `json:"last_success"`
	LastFailure *time.Time `json:"last_failure"`
}

func orNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// toAPI is a schedule's JSON; missing are the snapshot's missing parts.
func (a *admin) toAPI(st core.ScheduleState, missing []core.Missing) apiSchedule {
	s, c := st.Schedule, st.Counters
	out := apiSchedule{
		Name: s.Name, Expression: s.Expr, Zone: s.Zone, Queue: s.Queue, Timeout: s.Timeout.String(),
		MaxRetry: s.MaxRetry, Grace: a.r.Monitor().Grace(s).String(), Overlap: string(s.Overlap), Misfire: string(s.Misfire),
		Source: s.Source, Status: st.Status, Paused: st.Paused, LastRun: st.LastRun(), Missing: missingOf(missing),
	}
	if len(out.Missing) == 0 {
		out.Counters = &apiCounters{Enqueued: c.Enqueued, Manual: c.Manual, Missed: c.Missed, Skipped: c.Skipped, Buffered: c.Buffered, Replaced: c.Replaced, Paused: c.Paused,
			Succeeded: c.Succeeded, Failed: c.Failed, LastEnqueue: orNil(c.LastEnqueue),
			LastSuccess: orNil(c.LastSuccess), LastFailure: orNil(c.LastFailure)}
	}
	if !st.Next.IsZero() {
		// In the schedule's zone with its offset written out: RFC 3339's "Z"
		// would make a London time in winter read as UTC. A UTC schedule's
		// is Z, as every other time in the JSON.
		local, utc := rfc3339(st.Next), st.Next.UTC().Format(time.RFC3339)
		out.NextRun, out.NextRunUTC = &local, &utc
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	setJSONHeaders(w)
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func setJSONHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// apiList answers the schedule list. Without paging or search parameters
// it keeps its original form, a bare array of every schedule (whose cost is
// every schedule's); with any of cursor, limit, q or status it answers one
// page (see apiPage).
func (a *admin) apiList(w http.ResponseWriter, req *http.Request) {
	if !paged(req.URL.Query()) {
		ctx, cancel := context.WithTimeout(req.Context(), fullListTimeout)
		defer cancel()
		names := make([]string, 0, a.r.Registry().Len())
		for _, s := range a.r.Registry().Schedules() {
			names = append(names, s.Name)
		}
		snap, _ := a.r.Monitor().SnapshotOf(ctx, names, 1) // without Redis the schedules and next runs still answer
		out := make([]any, 0, len(snap.Schedules))
		for _, st := range snap.Schedules {
			out = append(out, a.withFamily(ctx, a.toAPI(st, snap.Missing)))
		}
		setJSONHeaders(w)
		w.WriteHeader(http.StatusOK)
		writeIndentedArray(w, out)
		return
	}
	q, err := parseListQuery(req.URL.Query())
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), readTimeout)
	defer cancel()
	l, _ := a.list(ctx, q)
	snap, _ := a.r.Monitor().SnapshotOf(ctx, l.names(), 1)
	out := apiPage{Schedules: make([]any, 0, len(snap.Schedules)), Matched: l.Matched,
		Counts: l.Statuses.Counts, Missing: orEmpty(mergeMissing(l.Statuses.Missing, snap.Missing))}
	for _, st := range snap.Schedules {
		out.Schedules = append(out.Schedules, a.withFamily(ctx, a.toAPI(st, snap.Missing)))
	}
	if l.Next != "" {
		out.NextCursor = &l.Next
	}
	writeJSON(w, http.StatusOK, out)
}

// apiPage is one page of the schedule list.
type apiPage struct {
	// Schedules are apiSchedule values, a family's with its members
	// (apiFamily).
	Schedules []any `json:"schedules"`
	// NextCursor is the cursor parameter of the next page; null on the
	// last.
	NextCursor *string `json:"next_cursor"`
	// Matched is how many schedules match q and status, on every page.
	Matched int `json:"matched"`
	// Counts is how many of all the schedules have each status.
	Counts map[core.Status]int `json:"counts"`
	// Missing are the parts that could not be read, and why.
	Missing []core.Missing `json:"missing"`
}

// mergeMissing joins the missing parts of two reads, each once.
func mergeMissing(lists ...[]core.Missing) []core.Missing {
	var out []core.Missing
	for _, l := range lists {
		for _, m := range l {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}

func (a *admin) apiDetail(w http.ResponseWriter, req *http.Request) {
	name := req.PathValue("name")
	if _, ok := a.r.Registry().Lookup(name); !ok {
		writeJSONError(w, http.StatusNotFound, "no schedule is called "+name)
		return
	}
	snap, history := a.withHistory(req, name, 1)
	out := a.toAPI(snap.Schedules[0], snap.Missing)
	out.History = orEmpty(history)
	for _, m := range snap.Missing {
		if m.Part == partHistory {
			out.History = nil
			out.Missing = append(out.Missing, m)
		}
	}
	ctx, cancel := context.WithTimeout(req.Context(), readTimeout)
	defer cancel()
	writeJSON(w, http.StatusOK, a.withFamily(ctx, out))
}

// withHistory reads the cluster, one schedule and its history side by
// side within one request budget; a history that could not be read is in
// snap.Missing as partHistory.
func (a *admin) withHistory(req *http.Request, name string, recent int) (core.Snapshot, []core.Record) {
	ctx, cancel := context.WithTimeout(req.Context(), readTimeout)
	defer cancel()
	var snap core.Snapshot
	var history []core.Record
	var historyErr error
	var wg sync.WaitGroup
	wg.Go(func() { snap, _ = a.r.Monitor().SnapshotOf(ctx, []string{name}, recent) })
	wg.Go(func() { history, historyErr = a.r.History(ctx, name, a.r.Monitor().HistoryLimit()) })
	wg.Wait()
	if historyErr != nil {
		snap.Missing = append(snap.Missing, core.Missing{Part: partHistory, Reason: readFailure(historyErr)})
	}
	return snap, history
}

// readFailure says why a read outside a snapshot failed, as Missing does.
func readFailure(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "Redis slow: no answer within " + strconv.FormatFloat(readTimeout.Seconds(), 'f', 1, 64) + " s"
	}
	return "Redis unreachable: " + err.Error()
}

func (a *admin) apiTrigger(w http.ResponseWriter, req *http.Request) {
	id, status, msg := a.trigger(req)
	if status != http.StatusAccepted {
		writeJSONError(w, status, msg)
		return
	}
	writeJSON(w, status, map[string]string{"task_id": id})
}

func (a *admin) apiStatus(w http.ResponseWriter, req *http.Request) {
	snap, _ := a.snapshotOf(req, nil, 0)
	var leader *string
	if snap.Cluster.Leader != "" {
		leader = &snap.Cluster.Leader
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"leader": leader, "replicas": orEmpty(snap.Cluster.Replicas), "replica": snap.Replica,
		"processes": orEmptyMap(snap.Cluster.Processes), "engine": a.r.Diagnostics().Engine(), "redis": snap.Redis, "redis_error": snap.RedisError,
		"redis_unsafe": snap.RedisUnsafe, "disabled": snap.Disabled,
		"lost_writes": orEmpty(snap.LostWrites), "duplicate_replica": snap.DuplicateReplica,
		"namespace_contention": snap.NamespaceContention, "legacy_namespace": snap.LegacyNamespace,
		"clock_skew_ms": clockSkewMS(a.r), "missing": orEmpty(snap.Missing),
	})
}

// orEmptyMap is m, or an empty map for nil, so the JSON says {} and
// not null.
func orEmptyMap[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return m
}

func (a *admin) apiOrphans(w http.ResponseWriter, req *http.Request) {
	ctx, cancel := context.WithTimeout(req.Context(), readTimeout)
	defer cancel()
	orphans, err := a.r.Orphans(ctx)
	if err != nil {
		writeJSONError(w, http.StatusServiceUnavailable, "could not read Redis")
		return
	}
	writeJSON(w, http.StatusOK, map[string][]string{"orphans": orEmpty(orphans)})
}

// forget runs a forget request and maps its errors to HTTP statuses.
func (a *admin) forget(req *http.Request) (status int, msg string) {
	if a.opts.ReadOnly {
		return http.StatusForbidden, "forgetting is disabled: this admin is read-only"
	}
	ctx, cancel := context.WithTimeout(req.Context(), readTimeout)
	defer cancel()
	err := a.r.Forget(ctx, req.PathValue("name"))
	a.orphans.stale()
	switch {
	case errors.Is(err, core.ErrScheduleInUse):
		return http.StatusConflict, req.PathValue("name") + " is in the registry; only removed schedules can be forgotten"
	case errors.Is(err, core.ErrDisabled):
		return http.StatusServiceUnavailable, "the scheduler is disabled: " + a.r.Leadership().Disabled()
	case err != nil:
		a.r.Logger().Warn("forgetting a removed schedule failed", "schedule", req.PathValue("name"), "err", err)
		return http.StatusServiceUnavailable, "could not forget: Redis unreachable"
	}
	return http.StatusNoContent, ""
}

func (a *admin) apiForget(w http.ResponseWriter, req *http.Request) {
	if status, msg := a.forget(req); status != http.StatusNoContent {
		writeJSONError(w, status, msg)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *admin) forgetForm(w http.ResponseWriter, req *http.Request) {
	status, _ := a.forget(req)
	result := "ok"
	if status != http.StatusNoContent {
		result = strconv.Itoa(status)
	}
	w.Header().Set("Location", "../../?forgot="+result)
	w.WriteHeader(http.StatusSeeOther)
}

// actionContext bounds a state-changing request and names its actor.
func (a *admin) actionContext(req *http.Request) (context.Context, context.CancelFunc) {
	ctx := req.Context()
	if actor := a.actorOf(req); actor != "" {
		ctx = core.WithActor(ctx, actor)
	}
	return context.WithTimeout(ctx, 5*time.Second)
}

// maxBody bounds a JSON request body.
const maxBody = 64 << 10

// decodeBody reads a JSON body into v; it answers 400 itself and reports
// false when it cannot.
func decodeBody(w http.ResponseWriter, req *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeJSONError(w, http.StatusBadRequest, "request body: "+err.Error())
		return false
	}
	return true
}

// notAckedMessage answers a write Redis ran but its replicas did not
// acknowledge in time (Options.ReplicaAcks).
const notAckedMessage = "written, but too few Redis replicas acknowledged it in time, so a failover could still undo it: " +
	"repeat the request (a repeat is safe)"

// actionError maps a runtime error of a state-changing request to a status
// and a message, logging the ones that are not the caller's fault.
func (a *admin) actionError(req *http.Request, err error) (int, string) {
	name := req.PathValue("name")
	switch {
	case errors.Is(err, core.ErrUnknownSchedule):
		return http.StatusNotFound, "no schedule is called " + name
	case errors.Is(err, core.ErrDisabled):
		return http.StatusServiceUnavailable, "the scheduler is disabled: " + a.r.Leadership().Disabled()
	case errors.Is(err, core.ErrBadRequestKey), errors.Is(err, core.ErrNotASlot),
		errors.Is(err, core.ErrTooManySlots), errors.Is(err, core.ErrBadRange):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, core.ErrNoMember):
		return http.StatusBadRequest, familyRefusal(name)
	case errors.Is(err, core.ErrNotAcked):
		return http.StatusServiceUnavailable, notAckedMessage
	}
	a.r.Logger().Warn("admin request failed", "path", req.URL.Path, "schedule", name, "err", err)
	return http.StatusServiceUnavailable, "Redis unreachable"
}

// runsRequest is a re-run of one slot, or a backfill of a range.
type runsRequest struct {
	Slot *time.Time `json:"slot"`
	From *time.Time `json:"from"`
	To   *time.Time `json:"to"`
}

func (a *admin) apiRuns(w http.ResponseWriter, req *http.Request) {
	if a.opts.ReadOnly {
		writeJSONError(w, http.StatusForbidden, "re-runs are disabled: this admin is read-only")
		return
	}
	name := req.PathValue("name")
	a.serveRuns(w, req, a.actionError,
		func(ctx context.Context, slot time.Time, idem string) (registry.Occurrence, error) {
			return a.r.Rerun(ctx, name, slot, idem)
		},
		func(ctx context.Context, from, to time.Time, idem string) ([]registry.Occurrence, error) {
			return a.r.Backfill(ctx, name, from, to, idem)
		})
}

func (a *admin) apiPause(w http.ResponseWriter, req *http.Request) {
	a.servePause(w, req, a.actionError, func(ctx context.Context, reason string) error {
		return a.r.Pause(ctx, req.PathValue("name"), reason)
	})
}

func (a *admin) apiResume(w http.ResponseWriter, req *http.Request) {
	a.serveResume(w, req, a.actionError, func(ctx context.Context) error {
		return a.r.Resume(ctx, req.PathValue("name"))
	})
}

// orEmpty makes a nil list [] in JSON, not null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// clockSkewMS is this replica's measured clock skew against Redis, or nil.
func clockSkewMS(rt *core.Runtime) *int64 {
	skew, ok := rt.Diagnostics().ClockSkew()
	if !ok {
		return nil
	}
	ms := skew.Milliseconds()
	return &ms
}

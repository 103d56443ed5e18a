package admin

// Families in the admin: the members of a family, in the JSON API and on
// the page.
//
//	PUT    /api/schedules/{name}/members/{member}  {"zone": "Europe/Paris", "expr": "0 8 * * MON", "paused": false}
//	                                               -> 201 created, 200 updated; every field optional: an
//	                                               absent zone or expr is the family's (tz= and expression);
//	                                               409 if the member kept changing under the write (retry)
//	DELETE /api/schedules/{name}/members/{member}  -> 204; 404 if the family has no such member
//	GET    /api/schedules/{name}/members           ?limit=(1-1000, default 100)&cursor=&q=<substring of the key>
//	                                               -> {"members": [...], "next_cursor": null on the last page,
//	                                               as the schedule list's};
//	                                               a page has at most limit members, in no particular order;
//	                                               the cursors list every member there throughout once
//	GET    /api/schedules/{name}/members/{member}  one member with its next run, last run and history
//	POST   /api/schedules/{name}/members/{member}/trigger  Run now for one member: 202 {"task_id": ...}
//	POST   /api/schedules/{name}/members/{member}/runs     {"slot": RFC 3339} re-runs one of the member's
//	                                               slots, {"from": ..., "to": ...} backfills them: 202
//	POST   /api/schedules/{name}/members/{member}/pause   {"reason": "..."} -> 200; its slots are recorded paused
//	POST   /api/schedules/{name}/members/{member}/resume  -> 200; the next slot runs, paused ones do not
//	GET    /schedules/{name}/members/{member}      the member's page: its settings and history
//	GET    /schedules/{name}/members/{member}/confirm  ?action=run|pause|resume, or ?action=rerun&slot=<unix seconds>
//	POST   /schedules/{name}/members/{member}/trigger  Run now for the member (redirects back)
//	POST   /schedules/{name}/members/{member}/rerun    Re-run one of the member's slots (redirects back)
//	POST   /schedules/{name}/members/{member}/pause    Pause the member, with a reason (redirects back)
//	POST   /schedules/{name}/members/{member}/resume   Resume the member (redirects back)
//
// A family's GET /api/schedules/{name} (and its entry in /api/schedules)
// adds "per" and "members" (the count), and its "next_run" is the earliest
// next slot of any member (in UTC, since members have zones of their own):
// computed from the family's (zone, expression) buckets, never by reading
// every member (runtime.Families.Next).
//
// Errors: an unknown schedule is 404; so is an ordinary schedule (declared
// without per=), whose members collection does not exist, with a message
// that says so. A bad member key, zone, expression or cursor is 400 with
// the words crongen uses for the same mistake in a directive. The writes
// follow every other write's rules: 403 read-only, the host check and
// cross-origin protection, the actor, a body of at most 64 KiB.

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime/core"
)

// membersPageDefault and membersPageMax bound a page of members.
const (
	membersPageDefault = 100
	membersPageMax     = 1000
	// memberHistory is how many of a member's occurrences its page shows.
	memberHistory = 50
)

func (a *admin) registerMembers(mux *http.ServeMux) {
	mux.HandleFunc("PUT /api/schedules/{name}/members/{member}", a.apiPutMember)
	mux.HandleFunc("DELETE /api/schedules/{name}/members/{member}", a.apiDeleteMember)
	mux.HandleFunc("GET /api/schedules/{name}/members", a.apiMembers)
	mux.HandleFunc("GET /api/schedules/{name}/members/{member}", a.apiMember)
	mux.HandleFunc("POST /api/schedules/{name}/members/{member}/trigger", a.limited(true, a.apiTriggerMember))
	mux.HandleFunc("POST /api/schedules/{name}/members/{member}/runs", a.limited(true, a.apiMemberRuns))
	mux.HandleFunc("GET /schedules/{name}/members/{member}", a.memberDetail)
	mux.HandleFunc("GET /schedules/{name}/members/{member}/confirm", a.confirmMember)
	mux.HandleFunc("POST /schedules/{name}/members/{member}/trigger", a.limited(false, a.triggerMemberForm))
	mux.HandleFunc("POST /schedules/{name}/members/{member}/rerun", a.limited(false, a.rerunMemberForm))
	mux.HandleFunc("POST /schedules/{name}/members/{member}/pause", a.pauseMemberForm)
	mux.HandleFunc("POST /schedules/{name}/members/{member}/resume", a.resumeMemberForm)
	mux.HandleFunc("POST /api/schedules/{name}/members/{member}/pause", a.apiPauseMember)
	mux.HandleFunc("POST /api/schedules/{name}/members/{member}/resume", a.apiResumeMember)
}

// memberError maps an error of a member operation to a status and a
// message, logging the ones that are not the caller's fault.
func (a *admin) memberError(req *http.Request, err error) (int, string) {
	name, member := req.PathValue("name"), req.PathValue("member")
	switch {
	case errors.Is(err, core.ErrUnknownSchedule):
		return http.StatusNotFound, "no schedule is called " + name
	case errors.Is(err, core.ErrNotAFamily):
		return http.StatusNotFound, name + " is not a family (declared without per=): it has no members"
	case errors.Is(err, core.ErrNoMember):
		return http.StatusNotFound, name + " has no member " + strconv.Quote(member)
	case errors.Is(err, core.ErrBadMember), errors.Is(err, core.ErrBadRequestKey),
		errors.Is(err, core.ErrNotASlot), errors.Is(err, core.ErrTooManySlots), errors.Is(err, core.ErrBadRange):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, core.ErrDisabled):
		return http.StatusServiceUnavailable, "the scheduler is disabled: " + a.r.Leadership().Disabled()
	case errors.Is(err, core.ErrNotAcked):
		return http.StatusServiceUnavailable, notAckedMessage
	case errors.Is(err, core.ErrMembersBusy):
		// Not Redis down: the member changed under the write each time.
		return http.StatusConflict, err.Error()
	}
	a.r.Logger().Warn("admin member request failed", "path", req.URL.Path, "schedule", name, "member", member, "err", err)
	return http.StatusServiceUnavailable, "Redis unreachable"
}

func (a *admin) writeMemberError(w http.ResponseWriter, req *http.Request, err error) {
	status, msg := a.memberError(req, err)
	writeJSONError(w, status, msg)
}

// memberBody is a PUT's body: an absent field and "" both mean the
// family's own zone or expression.
type memberBody struct {
	Zone   string `json:"zone"`
	Expr   string `json:"expr"`
	Paused bool   `json:"paused"`
}

func (a *admin) apiPutMember(w http.ResponseWriter, req *http.Request) {
	if a.opts.ReadOnly {
		writeJSONError(w, http.StatusForbidden, "changing members is disabled: this admin is read-only")
		return
	}
	var body memberBody
	if req.ContentLength != 0 && !decodeBody(w, req, &body) {
		return
	}
	ctx, cancel := a.actionContext(req)
	defer cancel()
	name, key := req.PathValue("name"), req.PathValue("member")
	created, err := a.r.Families().Set(ctx, name, core.Member{Key: key, Zone: body.Zone, Expr: body.Expr, Paused: body.Paused})
	if err != nil {
		a.writeMemberError(w, req, err)
		return
	}
	a.r.Logger().Info("family member set", "schedule", name, "member", key, "zone", body.Zone, "expr", body.Expr,
		"paused", body.Paused, "created", created, "actor", core.ActorFrom(ctx))
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	mi, err := a.memberInfo(ctx, name, key)
	if err != nil {
		a.writeMemberError(w, req, err)
		return
	}
	writeJSON(w, status, a.memberJSON(name, mi))
}

func (a *admin) apiDeleteMember(w http.ResponseWriter, req *http.Request) {
	if a.opts.ReadOnly {
		writeJSONError(w, http.StatusForbidden, "changing members is disabled: this admin is read-only")
		return
	}
	ctx, cancel := a.actionContext(req)
	defer cancel()
	name, key := req.PathValue("name"), req.PathValue("member")
	if err := a.r.Families().Delete(ctx, name, key); err != nil {
		a.writeMemberError(w, req, err)
		return
	}
	a.r.Logger().Info("family member deleted", "schedule", name, "member", key, "actor", core.ActorFrom(ctx))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusNoContent)
}

// memberInfo reads one member with its next and last run.
func (a *admin) memberInfo(ctx context.Context, family, key string) (core.MemberInfo, error) {
	m, err := a.r.Families().Get(ctx, family, key)
	if err != nil {
		return core.MemberInfo{}, err
	}
	infos, err := a.r.Families().Infos(ctx, family, []core.Member{m})
	if err != nil {
		return core.MemberInfo{}, err
	}
	return infos[0], nil
}

// apiMember is a member in the JSON API.
type apiMember struct {
	Member string `json:"member"`
	Zone   string `json:"zone"`
	// Expr is the member's own expression, "" when it follows the
	// family's; Expression is the one in effect either way.
	Expr       string        `json:"expr"`
	Expression string        `json:"expression"`
	Paused     bool          `json:"paused"`
	NextRun    *string       `json:"next_run"`
	NextRunUTC *string       `json:"next_run_utc"`
	LastRun    *core.LastRun `json:"last_run"`
	// Pause says who paused the member, when and why; null when it runs.
	Pause *core.Pause `json:"pause"`
}

// apiMemberDetail is one member with its history.
type apiMemberDetail struct {
	apiMember
	History []core.Record `json:"history"`
}

func (a *admin) memberJSON(family string, mi core.MemberInfo) apiMember {
	out := apiMember{Member: mi.Key, Zone: mi.Zone, Expr: mi.Expr, Expression: mi.Expr, Paused: mi.Paused, LastRun: mi.Last, Pause: mi.Pause}
	if out.Expression == "" {
		if s, ok := a.r.Registry().Lookup(family); ok {
			out.Expression = s.Expr
		}
	}
	if !mi.Next.IsZero() {
		local, utc := rfc3339(mi.Next), mi.Next.UTC().Format(time.RFC3339)
		out.NextRun, out.NextRunUTC = &local, &utc
	}
	return out
}

// membersPage reads the page of members a request asks for (limit,
// cursor, q) with each one's next and last run.
func (a *admin) membersPage(ctx context.Context, req *http.Request) (infos []core.MemberInfo, next string, err error) {
	q := req.URL.Query()
	limit := membersPageDefault
	if l := q.Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 || limit > membersPageMax {
			return nil, "", fmt.Errorf("%w: limit %q: want a number from 1 to %d", core.ErrBadMember, l, membersPageMax)
		}
	}
	name := req.PathValue("name")
	page, next, err := a.r.Families().Search(ctx, name, strings.TrimSpace(q.Get("q")), q.Get("cursor"), limit)
	if err != nil {
		return nil, "", err
	}
	infos, err = a.r.Families().Infos(ctx, name, page)
	return infos, next, err
}

func (a *admin) apiMembers(w http.ResponseWriter, req *http.Request) {
	ctx, cancel := context.WithTimeout(req.Context(), readTimeout)
	defer cancel()
	infos, next, err := a.membersPage(ctx, req)
	if err != nil {
		a.writeMemberError(w, req, err)
		return
	}
	out := make([]apiMember, len(infos))
	for i, mi := range infos {
		out[i] = a.memberJSON(req.PathValue("name"), mi)
	}
	page := apiMembersPage{Members: out}
	if next != "" {
		page.NextCursor = &next
	}
	writeJSON(w, http.StatusOK, page)
}

// apiMembersPage is one page of a family's members.
type apiMembersPage struct {
	Members []apiMember `json:"members"`
	// NextCursor is the cursor parameter of the next page; null on the
	// last, as apiPage's.
	NextCursor *string `json:"next_cursor"`
}

func (a *admin) apiMember(w http.ResponseWriter, req *http.Request) {
	ctx, cancel := context.WithTimeout(req.Context(), readTimeout)
	defer cancel()
	name, key := req.PathValue("name"), req.PathValue("member")
	mi, err := a.memberInfo(ctx, name, key)
	if err != nil {
		a.writeMemberError(w, req, err)
		return
	}
	out := apiMemberDetail{apiMember: a.memberJSON(name, mi)}
	history, _ := a.r.Families().History(ctx, name, key, memberHistory)
	out.History = orEmpty(history)
	writeJSON(w, http.StatusOK, out)
}

// apiFamily is a family's JSON: the schedule's, with its member count,
// and its next run across members in place of the default's.
type apiFamily struct {
	apiSchedule
	Per string `json:"per"`
	// Members and NextRun are null when Redis cannot be read: the
	// family's own expression says nothing of its members' next runs.
	Members    *int64  `json:"members"`
	NextRun    *string `json:"next_run"`
	NextRunUTC *string `json:"next_run_utc"`
	// NextRunFor is the zone and expression of the members the next run
	// is for, and Expressions how many expressions the members run on:
	// the family's own expression is only the default of members that
	// give none. Null when Redis cannot be read or no member runs again.
	NextRunFor  *apiNextRunFor `json:"next_run_for"`
	Expressions *int           `json:"expressions"`
}

// apiNextRunFor names the members a family's next run is for.
type apiNextRunFor struct {
	Zone       string `json:"zone"`
	Expression string `json:"expression"`
}

// withFamily returns out as it is for an ordinary schedule, and with the
// family's figures for a family.
func (a *admin) withFamily(ctx context.Context, out apiSchedule) any {
	s, ok := a.r.Registry().Lookup(out.Name)
	if !ok || !s.Family() {
		return out
	}
	fam := apiFamily{apiSchedule: out, Per: s.Per}
	members, next, err := a.familySummary(ctx, s.Name)
	if err != nil {
		return fam
	}
	fam.Members, fam.Expressions = &members, &next.Expressions
	if !next.At.IsZero() {
		local, utc := rfc3339(next.At), next.At.Format(time.RFC3339)
		fam.NextRun, fam.NextRunUTC = &local, &utc
		fam.NextRunFor = &apiNextRunFor{Zone: next.Zone, Expression: next.Expr}
	}
	return fam
}

// familySummary is a family's member count and its next run across
// members (UTC): two reads whatever the member count.
func (a *admin) familySummary(ctx context.Context, name string) (members int64, next core.FamilyNextRun, err error) {
	if members, err = a.r.Families().Count(ctx, name); err != nil {
		return 0, next, err
	}
	next, err = a.r.Families().NextRun(ctx, name)
	return members, next, err
}

// familyRow is what a family's row on the page adds.
type familyRow struct {
	Per         string
	Members     int64
	Expressions int // how many expressions the members run on
	// NextZone and NextExpr are those of the members the next run is
	// for; "" when none runs again or they could not be read.
	NextZone, NextExpr string
}

// addFamilies gives each family's row on the page its member count and
// its next run across members (two reads per family).
func (a *admin) addFamilies(ctx context.Context, rows []scheduleRow, now time.Time) {
	for i := range rows {
		s := rows[i].Schedule
		if !s.Family() {
			continue
		}
		rows[i].Family = &familyRow{Per: s.Per}
		members, next, err := a.familySummary(ctx, s.Name)
		if err != nil {
			rows[i].Next = instant{Zero: true} // unknown: the family's default is not its members'
			continue
		}
		rows[i].Family.Members, rows[i].Family.Expressions = members, next.Expressions
		if !next.At.IsZero() {
			rows[i].Family.NextZone, rows[i].Family.NextExpr = next.Zone, next.Expr
		}
		rows[i].Next = instantOf(next.At, time.UTC, now)
	}
}

// membersView is the members table of a family's page.
type membersView struct {
	Rows       []memberRow
	Query      string
	Limit      int
	NextCursor string // "" on the last page
	Cursor     string // this page's cursor; "" for the first
	Error      string
	// FamilyPaused says the whole family is paused: every member's next
	// slot is recorded paused, not run.
	FamilyPaused bool
}

// memberRow is one member on the page.
type memberRow struct {
	core.MemberInfo
	Path       string // the member's page, relative to the family's
	Expression string // in effect
	Own        bool   // the member has its own expression
	Next       instant
	LastSlot   instant
	LastAt     instant
	Outcome    string
	PausedNote string // "paused by alice 3 min ago: reason"
}

func (a *admin) memberRowOf(fam string, defaultExpr string, mi core.MemberInfo, now time.Time) memberRow {
	row := memberRow{MemberInfo: mi, Path: "./" + url.PathEscape(fam) + "/members/" + url.PathEscape(mi.Key),
		Expression: cmp.Or(mi.Expr, defaultExpr), Own: mi.Expr != "", PausedNote: pausedNote(mi.Pause, now)}
	loc := zoneOf(mi.Zone)
	row.Next = instantOf(mi.Next, loc, now)
	if mi.Last != nil {
		row.LastSlot, row.LastAt, row.Outcome = instantOf(mi.Last.Slot, loc, now), instantOf(mi.Last.At, loc, now), string(mi.Last.Outcome)
	} else {
		row.LastSlot, row.LastAt = instant{Zero: true}, instant{Zero: true}
	}
	return row
}

// members reads the members table of a family's page, and gives the
// family's row its member count and next run across members.
func (a *admin) members(req *http.Request, row *scheduleRow, now time.Time) *membersView {
	st := row.ScheduleState
	if !st.Schedule.Family() {
		return nil
	}
	rows := []scheduleRow{*row}
	a.addFamilies(req.Context(), rows, now)
	*row = rows[0]
	q := req.URL.Query()
	v := &membersView{Query: strings.TrimSpace(q.Get("q")), Cursor: q.Get("cursor"), Limit: membersPageDefault,
		FamilyPaused: st.Paused != nil}
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && n >= 1 && n <= membersPageMax {
		v.Limit = n
	}
	ctx, cancel := context.WithTimeout(req.Context(), readTimeout)
	defer cancel()
	infos, next, err := a.membersPage(ctx, req)
	if err != nil {
		_, v.Error = a.memberError(req, err)
		return v
	}
	for _, mi := range infos {
		v.Rows = append(v.Rows, a.memberRowOf(st.Schedule.Name, st.Schedule.Expr, mi, now))
	}
	v.NextCursor = next
	return v
}

// memberPage is the data of a member's page and its confirmations.
type memberPage struct {
	Family string
	Row    memberRow
	// Back is the family's page, relative to the member's.
	Back string
}

// memberOf reads the request's family and member for a page, or answers
// 404 itself and reports false.
func (a *admin) memberOf(w http.ResponseWriter, req *http.Request, base string) (pageData, *memberPage, bool) {
	snap, st, ok := a.scheduleOf(w, req, base)
	if !ok {
		return pageData{}, nil, false
	}
	data := a.page(snap, base)
	ctx, cancel := context.WithTimeout(req.Context(), readTimeout)
	defer cancel()
	name, key := req.PathValue("name"), req.PathValue("member")
	mi, err := a.memberInfo(ctx, name, key)
	if err != nil {
		status, msg := a.memberError(req, err)
		data.Error = msg + "."
		a.render(w, status, "message", data)
		return pageData{}, nil, false
	}
	row := a.rowOf(snap, st, base+"schedules/"+url.PathEscape(name))
	data.Detail = &row
	mp := &memberPage{Family: name, Row: a.memberRowOf(name, st.Schedule.Expr, mi, snap.At)}
	data.Member = mp
	return data, mp, true
}

func (a *admin) memberDetail(w http.ResponseWriter, req *http.Request) {
	data, mp, ok := a.memberOf(w, req, "../../../")
	if !ok {
		return
	}
	mp.Back = "../../" + url.PathEscape(mp.Family)
	ctx, cancel := context.WithTimeout(req.Context(), readTimeout)
	defer cancel()
	history, err := a.r.Families().History(ctx, mp.Family, mp.Row.Key, memberHistory)
	if err != nil {
		data.Error = "Redis unreachable: history is not shown."
	}
	if s, err := a.r.Families().Schedule(mp.Family, mp.Row.Member); err == nil {
		data.History = historyRows(history, s, data.At)
	}
	if notice, errMsg := resultNotice(req.URL.Query()); notice != "" || errMsg != "" {
		data.Notice, data.Error = notice, errMsg
	}
	a.render(w, http.StatusOK, "member", data)
}

func (a *admin) confirmMember(w http.ResponseWriter, req *http.Request) {
	if a.opts.ReadOnly {
		a.refuse(w, http.StatusForbidden, readOnlyRefusal)
		return
	}
	data, mp, ok := a.memberOf(w, req, "../../../../")
	if !ok {
		return
	}
	who := mp.Family + " for " + mp.Row.Key
	c := &confirmation{Back: "../" + url.PathEscape(mp.Row.Key)}
	switch req.URL.Query().Get("action") {
	case "run":
		c.Action, c.Button = "trigger", "Run now"
		c.Question = "Run " + who + " now?"
		c.Explain = "This enqueues one extra occurrence for this member whose slot is this moment, with a key of its own. " +
			"It does not redo a past slot: for the one that failed, use Re-run on its history row."
	case "rerun":
		unix, err := strconv.ParseInt(req.URL.Query().Get("slot"), 10, 64)
		if err != nil {
			a.refuse(w, http.StatusBadRequest, "Re-run needs the slot to re-run (slot=<unix seconds>).")
			return
		}
		c.Action, c.Button, c.SlotUnix = "rerun", "Re-run this slot", unix
		c.Slot = instantOf(time.Unix(unix, 0), zoneOf(mp.Row.Zone), data.At)
		c.Question = "Re-run the slot " + c.Slot.Local + " of " + who + "?"
		c.Explain = "The occurrence carries that slot and the scheduled occurrence's key: a handler keyed on occ.Key() " +
			"does that slot's work for this member if it was not done, and nothing if it was."
	case "pause":
		c.Action, c.Button, c.Reason, c.Danger = "pause", "Pause", true, true
		c.Question = "Pause " + who + "?"
		c.Explain = "Until it is resumed, this member's slots are recorded as paused and not run; the other members run as before. " +
			"Resuming does not run them; each can be re-run from its history row."
	case "resume":
		c.Action, c.Button = "resume", "Resume"
		c.Question = "Resume " + who + "?"
		c.Explain = "The member's next slot runs. Slots recorded as paused stay unrun; re-run one from its history row if its work is needed."
		if !mp.Row.Paused {
			c.Explain = mp.Row.Key + " is not paused; resuming changes nothing."
		}
	default:
		a.refuse(w, http.StatusBadRequest, "Unknown action: want run, rerun, pause or resume.")
		return
	}
	data.Confirm = c
	a.render(w, http.StatusOK, "confirm", data)
}

// zoneOf is the zone named zone, UTC if it cannot be loaded (a member's
// zone was checked when it was set).
func zoneOf(zone string) *time.Location {
	if l, err := time.LoadLocation(zone); err == nil {
		return l
	}
	return time.UTC
}

// memberFormAction runs a member's page form and redirects to the
// member's page with a fixed result word under param.
func (a *admin) memberFormAction(w http.ResponseWriter, req *http.Request, param string, act func(ctx context.Context, name, key string) error) {
	if a.opts.ReadOnly {
		a.refuse(w, http.StatusForbidden, readOnlyRefusal)
		return
	}
	name, key := req.PathValue("name"), req.PathValue("member")
	ctx, cancel := a.actionContext(req)
	defer cancel()
	result := "ok"
	if err := act(ctx, name, key); err != nil {
		status, msg := a.memberError(req, err)
		if status == http.StatusNotFound {
			a.refuse(w, status, msg)
			return
		}
		result = strconv.Itoa(status)
	}
	w.Header().Set("Location", "../"+url.PathEscape(key)+"?"+param+"="+result)
	w.WriteHeader(http.StatusSeeOther)
}

func (a *admin) triggerMemberForm(w http.ResponseWriter, req *http.Request) {
	a.memberFormAction(w, req, "triggered", func(ctx context.Context, name, key string) error {
		_, err := a.r.Families().Trigger(ctx, name, key, requestKey(req))
		return err
	})
}

func (a *admin) rerunMemberForm(w http.ResponseWriter, req *http.Request) {
	a.memberFormAction(w, req, "rerun", func(ctx context.Context, name, key string) error {
		unix, err := strconv.ParseInt(req.PostFormValue("slot"), 10, 64)
		if err != nil {
			return fmt.Errorf("%w: slot %q is not unix seconds", core.ErrNotASlot, req.PostFormValue("slot"))
		}
		_, err = a.r.Families().Rerun(ctx, name, key, time.Unix(unix, 0), requestKey(req))
		return err
	})
}

// familyRefusal answers a manual run that names a family without a member.
func familyRefusal(name string) string {
	return name + " is a family: run one of its members (POST api/schedules/" + name + "/members/{member}/trigger or …/runs)"
}

func (a *admin) apiTriggerMember(w http.ResponseWriter, req *http.Request) {
	if a.opts.ReadOnly {
		writeJSONError(w, http.StatusForbidden, "triggering is disabled: this admin is read-only")
		return
	}
	ctx, cancel := a.actionContext(req)
	defer cancel()
	occ, err := a.r.Families().Trigger(ctx, req.PathValue("name"), req.PathValue("member"), req.Header.Get("Idempotency-Key"))
	if err != nil {
		a.writeMemberError(w, req, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"task_id": occ.ID})
}

func (a *admin) apiMemberRuns(w http.ResponseWriter, req *http.Request) {
	if a.opts.ReadOnly {
		writeJSONError(w, http.StatusForbidden, "re-runs are disabled: this admin is read-only")
		return
	}
	name, key := req.PathValue("name"), req.PathValue("member")
	a.serveRuns(w, req, a.memberError,
		func(ctx context.Context, slot time.Time, idem string) (registry.Occurrence, error) {
			return a.r.Families().Rerun(ctx, name, key, slot, idem)
		},
		func(ctx context.Context, from, to time.Time, idem string) ([]registry.Occurrence, error) {
			return a.r.Families().Backfill(ctx, name, key, from, to, idem)
		})
}

// serveRuns answers a re-run ({"slot": ...}) or backfill ({"from": ...,
// "to": ...}) request of a schedule or a member, mapping errors with errOf.
func (a *admin) serveRuns(w http.ResponseWriter, req *http.Request, errOf func(*http.Request, error) (int, string),
	rerun func(ctx context.Context, slot time.Time, idem string) (registry.Occurrence, error),
	backfill func(ctx context.Context, from, to time.Time, idem string) ([]registry.Occurrence, error)) {
	var body runsRequest
	if !decodeBody(w, req, &body) {
		return
	}
	ctx, cancel := a.actionContext(req)
	defer cancel()
	idem := req.Header.Get("Idempotency-Key")
	switch {
	case body.Slot != nil && body.From == nil && body.To == nil:
		occ, err := rerun(ctx, *body.Slot, idem)
		if err != nil {
			status, msg := errOf(req, err)
			writeJSONError(w, status, msg)
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]string{"task_id": occ.ID, "slot": occ.Slot.Format(time.RFC3339)})
	case body.Slot == nil && body.From != nil && body.To != nil:
		occs, err := backfill(ctx, *body.From, *body.To, idem)
		if err != nil && len(occs) == 0 {
			status, msg := errOf(req, err)
			writeJSONError(w, status, msg)
			return
		}
		ids := make([]string, len(occs))
		for i, occ := range occs {
			ids[i] = occ.ID
		}
		out := map[string]any{"task_ids": ids}
		if err != nil { // some enqueued, then Redis failed: say both
			_, out["error"] = errOf(req, err)
		}
		writeJSON(w, http.StatusAccepted, out)
	default:
		writeJSONError(w, http.StatusBadRequest, `want {"slot": "<RFC 3339>"} to re-run one slot, or {"from": ..., "to": ...} to backfill`)
	}
}

//go:embed members.html
var membersHTML string

// The family templates join the page's, so they use its "head", "when"
// and the rest.
var _ = template.Must(pageTemplates.Parse(membersHTML))

// hideFamilyNext blanks the families' next runs on a page drawn without
// Redis: the family's own expression is only its members' default.
func hideFamilyNext(rows []scheduleRow) {
	for i := range rows {
		if rows[i].Schedule.Family() {
			rows[i].Next = instant{Zero: true}
		}
	}
}

func (a *admin) pauseMemberForm(w http.ResponseWriter, req *http.Request) {
	a.memberFormAction(w, req, "paused", func(ctx context.Context, name, key string) error {
		reason := strings.TrimSpace(req.PostFormValue("reason"))
		// A double-submitted form finds its own pause and leaves it, so
		// the pause keeps the time of the first click.
		if mi, err := a.memberInfo(ctx, name, key); err == nil && mi.Pause != nil &&
			mi.Pause.Reason == reason && mi.Pause.Actor == core.ActorFrom(ctx) {
			return nil
		}
		return a.r.Families().Pause(ctx, name, key, reason)
	})
}

func (a *admin) resumeMemberForm(w http.ResponseWriter, req *http.Request) {
	a.memberFormAction(w, req, "resumed", func(ctx context.Context, name, key string) error {
		return a.r.Families().Resume(ctx, name, key)
	})
}

func (a *admin) apiPauseMember(w http.ResponseWriter, req *http.Request) {
	a.servePause(w, req, a.memberError, func(ctx context.Context, reason string) error {
		return a.r.Families().Pause(ctx, req.PathValue("name"), req.PathValue("member"), reason)
	})
}

func (a *admin) apiResumeMember(w http.ResponseWriter, req *http.Request) {
	a.serveResume(w, req, a.memberError, func(ctx context.Context) error {
		return a.r.Families().Resume(ctx, req.PathValue("name"), req.PathValue("member"))
	})
}

// servePause answers a pause request ({"reason": ...}, optional) of a
// schedule or a member, mapping errors with errOf.
func (a *admin) servePause(w http.ResponseWriter, req *http.Request, errOf func(*http.Request, error) (int, string),
	pause func(ctx context.Context, reason string) error) {
	if a.opts.ReadOnly {
		writeJSONError(w, http.StatusForbidden, "pausing is disabled: this admin is read-only")
		return
	}
	var body struct {
		Reason string `json:"reason"`
	}
	if req.ContentLength != 0 && !decodeBody(w, req, &body) {
		return
	}
	ctx, cancel := a.actionContext(req)
	defer cancel()
	if err := pause(ctx, body.Reason); err != nil {
		status, msg := errOf(req, err)
		writeJSONError(w, status, msg)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": string(core.StatusPaused)})
}

// serveResume answers a resume request of a schedule or a member.
func (a *admin) serveResume(w http.ResponseWriter, req *http.Request, errOf func(*http.Request, error) (int, string),
	resume func(ctx context.Context) error) {
	if a.opts.ReadOnly {
		writeJSONError(w, http.StatusForbidden, "resuming is disabled: this admin is read-only")
		return
	}
	ctx, cancel := a.actionContext(req)
	defer cancel()
	if err := resume(ctx); err != nil {
		status, msg := errOf(req, err)
		writeJSONError(w, status, msg)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "resumed"})
}

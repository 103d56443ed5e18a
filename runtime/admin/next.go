package admin

// A schedule's coming slots, for an operator who asks "when will it run
// next, and after that?" (the CLI's show):
//
//	GET /api/schedules/{name}/next                   ?n=(1-100, default 5)
//	GET /api/schedules/{name}/members/{member}/next  the same for one member of a family
//	    -> {"zone": "Europe/Berlin", "next_runs": ["2026-12-05T03:17:00+01:00", ...], "next_runs_utc": [...]}
//
// The slots come from the registry's own Next, so they are the ones the
// leader will enqueue (paused: recorded paused, not run). A family's own
// expression is only its members' default, so the family itself answers
// 400 naming the members' route.

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/belfry/belfry/registry"
)

const (
	nextRunsDefault = 5
	nextRunsMax     = 100
)

func (a *admin) registerNext(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/schedules/{name}/next", a.apiNext)
	mux.HandleFunc("GET /api/schedules/{name}/members/{member}/next", a.apiMemberNext)
}

func (a *admin) apiNext(w http.ResponseWriter, req *http.Request) {
	name := req.PathValue("name")
	s, ok := a.r.Registry().Lookup(name)
	switch {
	case !ok:
		writeJSONError(w, http.StatusNotFound, "no schedule is called "+name)
	case s.Family():
		writeJSONError(w, http.StatusBadRequest, name+" is a family: each member has its own next runs (GET api/schedules/"+
			name+"/members/{member}/next)")
	default:
		writeNextRuns(w, req, s)
	}
}

func (a *admin) apiMemberNext(w http.ResponseWriter, req *http.Request) {
	ctx, cancel := context.WithTimeout(req.Context(), readTimeout)
	defer cancel()
	m, err := a.r.Families().Get(ctx, req.PathValue("name"), req.PathValue("member"))
	if err != nil {
		a.writeMemberError(w, req, err)
		return
	}
	s, err := a.r.Families().Schedule(req.PathValue("name"), m)
	if err != nil {
		a.writeMemberError(w, req, err)
		return
	}
	writeNextRuns(w, req, s)
}

// writeNextRuns answers the n slots of s after now.
func writeNextRuns(w http.ResponseWriter, req *http.Request, s *registry.Schedule) {
	n := nextRunsDefault
	if v := req.URL.Query().Get("n"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > nextRunsMax {
			writeJSONError(w, http.StatusBadRequest, "n must be a number from 1 to "+strconv.Itoa(nextRunsMax)+"; got "+strconv.Quote(v))
			return
		}
	}
	local, utc := make([]string, 0, n), make([]string, 0, n)
	for t := s.Next(time.Now()); !t.IsZero() && len(local) < n; t = s.Next(t) {
		local = append(local, rfc3339(t.In(s.Location())))
		utc = append(utc, t.UTC().Format(time.RFC3339))
	}
	writeJSON(w, http.StatusOK, map[string]any{"zone": s.Location().String(), "next_runs": local, "next_runs_utc": utc})
}

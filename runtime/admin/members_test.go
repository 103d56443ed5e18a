package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/belfry/belfry/registry"
	"github.com/belfry/belfry/runtime"
	"github.com/belfry/belfry/runtime/admin"
	"github.com/hibiken/asynq"
)

const family = "weekly-report"

// familySetup runs one replica with a family and an ordinary schedule,
// and the admin under /cron/.
func familySetup(t *testing.T, opts admin.Options) (*fixture, *httptest.Server) {
	t.Helper()
	c := newFixture(t, sharedRedis(t),
		registry.Schedule{Name: family, Expr: "0 9 * * MON", Zone: "UTC", Per: "tenant", Timeout: 10 * time.Minute},
		registry.Schedule{Name: "nightly", Expr: "17 3 * * *", Zone: "Europe/Berlin"})
	waitFor(t, 5*time.Second, "the replica to lead", c.rt.Leadership().Leading)
	mux := http.NewServeMux()
	mux.Handle("/cron/", http.StripPrefix("/cron", admin.New(c.rt, opts)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return c, srv
}

// directiveError is the message crongen gives for a directive.
func directiveError(t *testing.T, directive string) string {
	t.Helper()
	_, err := registry.ParseDirective(&ast.Comment{Text: directive})
	if err == nil {
		t.Fatalf("%s parses", directive)
	}
	return err.Error()
}

// memberNext is the next run of a member in zone as the API writes it.
func memberNext(t *testing.T, c *fixture, zone, expr string) string {
	t.Helper()
	fam, _ := c.rt.Registry().Lookup(family)
	s, err := fam.ForMember(zone, expr)
	if err != nil {
		t.Fatal(err)
	}
	return s.Next(time.Now()).Format("2006-01-02T15:04:05-07:00")
}

// movedNext is the next run of a member moved from (zone, expr) to
// (toZone, toExpr) before its first run, as the API writes it: the new
// schedule's slot nearest the run the move replaces (runtime's
// familychange.go).
func movedNext(t *testing.T, c *fixture, zone, expr, toZone, toExpr string) string {
	t.Helper()
	fam, _ := c.rt.Registry().Lookup(family)
	from, err1 := fam.ForMember(zone, expr)
	to, err2 := fam.ForMember(toZone, toExpr)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	replaced := from.Next(time.Now())
	before, after := to.Prev(replaced), to.Next(replaced)
	nearest := after
	if before.After(time.Now()) && replaced.Sub(before) < after.Sub(replaced) {
		nearest = before
	}
	return nearest.Format("2006-01-02T15:04:05-07:00")
}

// memberNextUTC is memberNext in UTC, as a family's next run is written.
func memberNextUTC(t *testing.T, c *fixture, zone, expr string) string {
	t.Helper()
	next, err := time.Parse("2006-01-02T15:04:05-07:00", memberNext(t, c, zone, expr))
	if err != nil {
		t.Fatal(err)
	}
	return next.UTC().Format(time.RFC3339)
}

// Every member route, with good and bad input.
func TestMembersAPI(t *testing.T) {
	t.Parallel()
	c, srv := familySetup(t, admin.Options{})
	base := srv.URL + "/cron/api/schedules/"
	list := srv.URL + "/cron/api/schedules"
	jsonCT := "application/json"
	crossSite := http.Header{"Origin": {"https://evil.example"}, "Sec-Fetch-Site": {"cross-site"}}
	badExpr := directiveError(t, `//cron:schedule "61 * * * *"`)
	badZone := directiveError(t, `//cron:schedule "0 9 * * MON" tz=Mars/Olympus`)
	// globex's (UTC, Mondays 09:00) three newest slots, for a backfill.
	fam, _ := c.rt.Registry().Lookup(family)
	last := fam.Prev(time.Now())
	lastSlots := []string{last.AddDate(0, 0, -14).Format(time.RFC3339), last.AddDate(0, 0, -7).Format(time.RFC3339), last.Format(time.RFC3339)}
	for _, tt := range []struct {
		name, method, path string
		header             http.Header
		body               string
		status             int
		contains           []string
	}{
		{"create", "PUT", family + "/members/acme", nil, `{"zone": "Europe/Paris"}`, 201,
			[]string{`"member": "acme"`, `"zone": "Europe/Paris"`, `"expression": "0 9 * * MON"`, `"expr": ""`, `"paused": false`,
				`"next_run": "` + memberNext(t, c, "Europe/Paris", ""), `"last_run": null`}},
		{"update", "PUT", family + "/members/acme", nil, `{"zone": "Asia/Tokyo", "expr": "30 8 * * *", "paused": true}`, 200,
			[]string{`"zone": "Asia/Tokyo"`, `"expr": "30 8 * * *"`, `"expression": "30 8 * * *"`, `"paused": true`,
				`"next_run": "` + movedNext(t, c, "Europe/Paris", "", "Asia/Tokyo", "30 8 * * *")}},
		{"create with the family's defaults", "PUT", family + "/members/globex", nil, ``, 201, []string{`"zone": "UTC"`, `"expression": "0 9 * * MON"`}},
		{"create in a DST zone", "PUT", family + "/members/initech", nil, `{"zone": "America/New_York"}`, 201, []string{`"zone": "America/New_York"`}},
		{"bad zone", "PUT", family + "/members/acme", nil, `{"zone": "Mars/Olympus"}`, 400, []string{`"error": ` + jsonString(badZone)}},
		{"bad expression", "PUT", family + "/members/acme", nil, `{"expr": "61 * * * *"}`, 400, []string{`"error": ` + jsonString(badExpr)}},
		{"bad key", "PUT", family + "/members/a%20b", nil, `{}`, 400, []string{`bad member \"a b\"`, "letters, digits"}},
		{"bad JSON", "PUT", family + "/members/acme", nil, `{"zone": `, 400, []string{`"error": "request body: `}},
		{"unknown field", "PUT", family + "/members/acme", nil, `{"timezone": "UTC"}`, 400, []string{`unknown field \"timezone\"`}},
		{"body too large", "PUT", family + "/members/acme", nil, `{"zone": "` + strings.Repeat("x", 70<<10) + `"}`, 400, []string{"request body too large"}},
		{"unknown schedule", "PUT", "nope/members/acme", nil, `{}`, 404, []string{"no schedule is called nope"}},
		{"ordinary schedule", "PUT", "nightly/members/acme", nil, `{}`, 404, []string{"nightly is not a family (declared without per=): it has no members"}},
		{"cross-origin", "PUT", family + "/members/acme", crossSite, `{}`, 403, nil},
		{"list", "GET", family + "/members", nil, "", 200, []string{`"member": "acme"`, `"member": "globex"`, `"next_cursor": null`}},
		{"search", "GET", family + "/members?q=glo", nil, "", 200, []string{`"member": "globex"`}},
		{"bad limit", "GET", family + "/members?limit=0", nil, "", 400, []string{"limit \\\"0\\\": want a number from 1 to 1000"}},
		{"limit not a number", "GET", family + "/members?limit=abc", nil, "", 400, []string{"limit \\\"abc\\\": want a number from 1 to 1000"}},
		{"limit too large", "GET", family + "/members?limit=1001", nil, "", 400, []string{"limit \\\"1001\\\": want a number from 1 to 1000"}},
		{"bad cursor", "GET", family + "/members?cursor=xyz", nil, "", 400, []string{`bad cursor \"xyz\"`}},
		{"list of ordinary", "GET", "nightly/members", nil, "", 404, []string{"not a family"}},
		{"one", "GET", family + "/members/globex", nil, "", 200, []string{`"member": "globex"`, `"history": []`}},
		{"one unknown", "GET", family + "/members/nobody", nil, "", 404, []string{`weekly-report has no member \"nobody\"`}},
		{"family", "GET", family, nil, "", 200, []string{`"per": "tenant"`, `"members": 3`,
			`"next_run_utc": "` + memberNextUTC(t, c, "Asia/Tokyo", "30 8 * * *")}},
		{"family in the list", "GET", "<list>", nil, "", 200, []string{`"per": "tenant"`, `"members": 3`}},
		{"ordinary has no members field", "GET", "nightly", nil, "", 200, []string{`"name": "nightly"`}},
		{"trigger of the family", "POST", family + "/trigger", nil, "", 400, []string{"weekly-report is a family: run one of its members"}},
		{"rerun of the family", "POST", family + "/runs", nil, `{"slot": "2026-11-30T09:00:00Z"}`, 400, []string{"is a family"}},
		{"trigger a member", "POST", family + "/members/globex/trigger", http.Header{"Idempotency-Key": {"k1"}}, "", 202,
			[]string{`"task_id": "` + c.idPrefix(family) + `:member:globex:manual:k1"`}},
		{"trigger an unknown member", "POST", family + "/members/nobody/trigger", nil, "", 404, []string{"no member"}},
		{"rerun a member's non-slot", "POST", family + "/members/globex/runs", nil, `{"slot": "2026-11-30T09:00:01Z"}`, 400, []string{"not a slot"}},
		{"backfill a member's last three slots", "POST", family + "/members/globex/runs", nil,
			`{"from": "` + lastSlots[0] + `", "to": "` + lastSlots[2] + `"}`, 202,
			[]string{`"task_ids": [`, ":member:globex:rerun:", ":member:globex:rerun:" + strconv.FormatInt(last.AddDate(0, 0, -7).Unix(), 10) + ":"}},
		{"backfill over the cap", "POST", family + "/members/globex/runs", nil,
			`{"from": "2020-01-06T09:00:00Z", "to": "` + lastSlots[2] + `"}`, 400, []string{"more than 100 slots"}},
		{"pause a member", "POST", family + "/members/globex/pause", nil, `{"reason": "moving to a new plan"}`, 200, []string{`"status": "paused"`}},
		{"a paused member says why", "GET", family + "/members/globex", nil, "", 200, []string{`"paused": true`, `"reason": "moving to a new plan"`}},
		{"resume a member", "POST", family + "/members/globex/resume", nil, "", 200, []string{`"status": "resumed"`}},
		{"a resumed member runs", "GET", family + "/members/globex", nil, "", 200, []string{`"paused": false`, `"pause": null`}},
		{"pause an unknown member", "POST", family + "/members/nobody/pause", nil, `{}`, 404, []string{"no member"}},
		{"pause with bad JSON", "POST", family + "/members/globex/pause", nil, `{"why": 1}`, 400, []string{"unknown field"}},
		{"delete", "DELETE", family + "/members/acme", nil, "", 204, nil},
		{"delete again", "DELETE", family + "/members/acme", nil, "", 404, []string{`weekly-report has no member \"acme\"`}},
		{"delete of ordinary", "DELETE", "nightly/members/acme", nil, "", 404, []string{"not a family"}},
		{"delete cross-origin", "DELETE", family + "/members/globex", crossSite, "", 403, nil},
	} {
		// In order: each step sees the members the ones before it left.
		ct := jsonCT
		switch tt.status {
		case 403:
			ct = "text/plain"
		case 204:
			ct = ""
		}
		target := base + tt.path
		if tt.path == "<list>" {
			target = list
		}
		body := checkResponse(t, tt.method, target, tt.header, tt.body, tt.status, ct, tt.contains)
		if t.Failed() {
			t.Fatalf("step %q:\n%s", tt.name, body)
		}
	}
	if n, _ := c.rt.Families().Count(context.Background(), family); n != 2 {
		t.Errorf("%d members left, want 2 (globex and initech)", n)
	}
	// The member's run now is in asynq, once.
	insp := asynq.NewInspectorFromRedisClient(sharedRedis(t))
	if _, err := insp.GetTaskInfo(c.queue, c.idPrefix(family)+":member:globex:manual:k1"); err != nil {
		t.Errorf("the member's manual task: %v", err)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A page of members at a time, each member once, however many there are.
func TestMembersAPIPages(t *testing.T) {
	t.Parallel()
	c, srv := familySetup(t, admin.Options{})
	var ms []runtime.Member
	// More than Redis keeps compact (512 by default): pages of a hash
	// table's HSCAN steps, cut at the limit.
	for i := range 700 {
		ms = append(ms, runtime.Member{Key: fmt.Sprintf("t-%03d", i), Zone: []string{"UTC", "Europe/London", "Australia/Sydney"}[i%3]})
	}
	if err := c.rt.Families().SetMany(context.Background(), family, ms); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 50 {
			t.Fatal("paging does not end")
		}
		resp, body := do(t, "GET", srv.URL+"/cron/api/schedules/"+family+"/members?limit=100&cursor="+url.QueryEscape(cursor), nil, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		var page struct {
			Members []struct {
				Member  string
				NextRun string `json:"next_run"`
			} `json:"members"`
			NextCursor *string `json:"next_cursor"`
		}
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Members) > 100 {
			t.Fatalf("a page asked for limit=100 has %d members", len(page.Members))
		}
		for _, m := range page.Members {
			seen[m.Member]++
			if m.NextRun == "" {
				t.Errorf("member %s has no next run", m.Member)
			}
		}
		if page.NextCursor == nil {
			break
		}
		if cursor = *page.NextCursor; cursor == "" {
			t.Fatal(`a page that is not the last has "next_cursor": "" (the last page's is null)`)
		}
	}
	if len(seen) != len(ms) {
		t.Errorf("paging listed %d members, want %d", len(seen), len(ms))
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("member %s listed %d times", k, n)
		}
	}

	// The page pages the same way, by a plain link.
	first := checkResponse(t, "GET", srv.URL+"/cron/schedules/"+family+"?limit=100", nil, "", 200, "text/html", []string{`rel="next"`, "Next page"})
	if n := strings.Count(first, "data-member="); n == 0 || n >= len(ms) {
		t.Errorf("a page of about 100 lists %d members", n)
	}
	i := strings.Index(first, `<a rel="next" href="?`)
	next := first[i+len(`<a rel="next" href="?`):]
	next = strings.ReplaceAll(next[:strings.Index(next, `"`)], "&amp;", "&")
	second := checkResponse(t, "GET", srv.URL+"/cron/schedules/"+family+"?"+next, nil, "", 200, "text/html", []string{"First page"})
	if strings.Count(second, "data-member=") == 0 {
		t.Error("the next page lists no members")
	}
}

// The member writes obey read-only mode and the host check like every
// other write.
func TestMembersAPIRefusals(t *testing.T) {
	t.Parallel()
	c, srv := familySetup(t, admin.Options{ReadOnly: true})
	if _, err := c.rt.Families().Set(context.Background(), family, runtime.Member{Key: "acme"}); err != nil {
		t.Fatal(err)
	}
	base := srv.URL + "/cron/api/schedules/" + family + "/members/acme"
	checkResponse(t, "PUT", base, nil, `{"zone": "UTC"}`, 403, "application/json", []string{"read-only"})
	checkResponse(t, "DELETE", base, nil, "", 403, "application/json", []string{"read-only"})
	checkResponse(t, "POST", base+"/trigger", nil, "", 403, "application/json", []string{"read-only"})
	checkResponse(t, "GET", srv.URL+"/cron/schedules/"+family+"/members/acme/confirm?action=run", nil, "", 403, "text/html", []string{"read-only"})
	checkResponse(t, "GET", base, nil, "", 200, "application/json", []string{`"member": "acme"`})

	_, open := familySetup(t, admin.Options{})
	req, _ := http.NewRequest("PUT", open.URL+"/cron/api/schedules/"+family+"/members/acme", strings.NewReader(`{}`))
	req.Host = "evil.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("PUT for an unknown host: status %d, want 403", resp.StatusCode)
	}
}

// A family is one row on the overview; its page pages and searches its
// members without JavaScript; a member's page runs it now after a
// confirmation, once for a double submit.
func TestMembersPage(t *testing.T) {
	t.Parallel()
	c, srv := familySetup(t, admin.Options{Actor: alice})
	ctx := context.Background()
	if err := c.rt.Families().SetMany(ctx, family, []runtime.Member{{Key: "acme", Zone: "Europe/Paris"}, {Key: "globex", Zone: "America/New_York", Paused: true},
		{Key: "initech", Zone: "Asia/Tokyo", Expr: "0 8 * * *"}}); err != nil {
		t.Fatal(err)
	}
	base := srv.URL + "/cron/"
	index := checkResponse(t, "GET", base, nil, "", 200, "text/html", []string{"weekly-report", "3 members · per tenant"})
	if strings.Contains(index, `aria-label="Run weekly-report now"`) {
		t.Error("the overview offers Run now for a family, which needs a member")
	}
	detail := checkResponse(t, "GET", base+"schedules/"+family, nil, "", 200, "text/html", []string{
		`<form method="get"`, `name="q"`, `data-member="acme"`, `data-member="globex"`, "Europe/Paris", "Asia/Tokyo",
		"<code>0 8 * * *</code>", `<span class="badge paused">paused</span>`, "Last page.",
		`href="./weekly-report/members/acme"`, "the earliest of any member's"})
	if strings.Count(detail, "data-member=") != 3 {
		t.Errorf("the family's page lists %d members, want 3", strings.Count(detail, "data-member="))
	}
	// The paused member's next run says it is paused, the others' when.
	if row := regexp.MustCompile(`(?s)<tr data-member="globex">.*?</tr>`).FindString(detail); !strings.Contains(row, "recorded paused, not run") {
		t.Errorf("the paused member's row does not say its next slot is recorded paused:\n%s", row)
	}
	if row := regexp.MustCompile(`(?s)<tr data-member="acme">.*?</tr>`).FindString(detail); strings.Contains(row, "recorded paused") {
		t.Errorf("a running member's row says it is paused:\n%s", row)
	}
	search := checkResponse(t, "GET", base+"schedules/"+family+"?q=glo", nil, "", 200, "text/html", []string{`data-member="globex"`, `value="glo"`})
	if strings.Contains(search, `data-member="acme"`) {
		t.Error("the search for glo lists acme")
	}
	checkResponse(t, "GET", base+"schedules/"+family+"?cursor=xyz", nil, "", 200, "text/html", []string{"bad cursor"})

	checkResponse(t, "GET", base+"schedules/"+family+"/members/acme", nil, "", 200, "text/html",
		[]string{"acme", "Europe/Paris", `href="./acme/confirm?action=run"`, "History"})
	checkResponse(t, "GET", base+"schedules/"+family+"/members/nobody", nil, "", 404, "text/html", []string{"has no member"})
	checkResponse(t, "GET", base+"schedules/nightly/members/acme", nil, "", 404, "text/html", []string{"not a family"})
	checkResponse(t, "GET", base+"schedules/"+family+"/members/acme/confirm?action=run", nil, "", 200, "text/html",
		[]string{"Run weekly-report for acme now?", `method="post" action="trigger"`, `name="request"`})
	checkResponse(t, "GET", base+"schedules/"+family+"/members/acme/confirm?action=bogus", nil, "", 400, "text/html", []string{"Unknown action"})

	form := url.Values{"request": {"twice"}}.Encode()
	header := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	target := base + "schedules/" + family + "/members/acme/trigger"
	for range 2 {
		resp, _ := do(t, "POST", target, header, strings.NewReader(form))
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "../acme?triggered=ok" {
			t.Fatalf("POST trigger: %d to %q, want 303 to ../acme?triggered=ok", resp.StatusCode, loc)
		}
	}
	id := c.idPrefix(family) + ":member:acme:manual:twice"
	waitFor(t, 10*time.Second, "the member's run now to finish", func() bool { return c.manualRuns() == 1 })
	checkResponse(t, "GET", base+"schedules/"+family+"/members/acme?triggered=ok", nil, "", 200, "text/html", []string{"Triggered", id, "by alice"})
	waitFor(t, 5*time.Second, "a single manual run", func() bool { return c.manualRuns() == 1 })

	// Pause one member with a reason, from its page; the page says who,
	// when and why; resume it.
	checkResponse(t, "GET", base+"schedules/"+family+"/members/acme/confirm?action=pause", nil, "", 200, "text/html",
		[]string{"Pause weekly-report for acme?", `method="post" action="pause"`, `name="reason"`})
	for range 2 { // a double submit keeps the first pause
		resp, _ := do(t, "POST", base+"schedules/"+family+"/members/acme/pause", header,
			strings.NewReader(url.Values{"request": {"p1"}, "reason": {"tenant on hold"}}.Encode()))
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "../acme?paused=ok" {
			t.Fatalf("POST pause: %d to %q", resp.StatusCode, loc)
		}
	}
	checkResponse(t, "GET", base+"schedules/"+family+"/members/acme?paused=ok", nil, "", 200, "text/html",
		[]string{"Paused:", "paused by alice", ": tenant on hold", `data-action="resume"`})
	checkResponse(t, "GET", base+"schedules/"+family, nil, "", 200, "text/html", []string{"paused by alice", "tenant on hold"})
	resp, _ := do(t, "POST", base+"schedules/"+family+"/members/acme/resume", header, strings.NewReader(url.Values{"request": {"r0"}}.Encode()))
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "../acme?resumed=ok" {
		t.Fatalf("POST resume: %d to %q", resp.StatusCode, loc)
	}
	if mi, err := c.rt.Families().Get(ctx, family, "acme"); err != nil || mi.Paused {
		t.Errorf("after resume acme is %+v, %v; want it running", mi, err)
	}

	// Re-run a past slot of the member's, from the confirmation's form.
	fam, _ := c.rt.Registry().Lookup(family)
	s, _ := fam.ForMember("Europe/Paris", "")
	slot := strconv.FormatInt(s.Prev(time.Now()).Unix(), 10)
	checkResponse(t, "GET", base+"schedules/"+family+"/members/acme/confirm?action=rerun&slot="+slot, nil, "", 200, "text/html",
		[]string{"Re-run the slot", `name="slot" value="` + slot + `"`})
	resp, _ = do(t, "POST", base+"schedules/"+family+"/members/acme/rerun", header,
		strings.NewReader(url.Values{"request": {"r1"}, "slot": {slot}}.Encode()))
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "../acme?rerun=ok" {
		t.Fatalf("POST rerun: %d to %q", resp.StatusCode, loc)
	}
	resp, _ = do(t, "POST", base+"schedules/"+family+"/members/acme/rerun", header,
		strings.NewReader(url.Values{"request": {"r2"}, "slot": {strconv.FormatInt(s.Prev(time.Now()).Unix()+1, 10)}}.Encode()))
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "../acme?rerun=400" {
		t.Errorf("POST rerun of a non-slot: %d to %q, want ../acme?rerun=400", resp.StatusCode, loc)
	}
}

// A family's one row on the overview carries its members' runs: a
// member's failed run shows as the family's newest run, its failure and
// the error's excerpt, and the family is failing, in the page and the
// JSON alike.
func TestAFamilyRowShowsItsMembersFailures(t *testing.T) {
	t.Parallel()
	c := newFixture(t, sharedRedis(t), registry.Schedule{Name: family, Expr: "0 9 * * MON", Zone: "UTC", Per: "tenant", MaxRetry: 0,
		Handler: func(_ context.Context, occ registry.Occurrence) error {
			if occ.Member == "broken" {
				return errors.New("tenant broken: no invoice template")
			}
			return nil
		}})
	waitFor(t, 5*time.Second, "the replica to lead", c.rt.Leadership().Leading)
	mux := http.NewServeMux()
	mux.Handle("/cron/", http.StripPrefix("/cron", admin.New(c.rt, admin.Options{})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	if err := c.rt.Families().SetMany(ctx, family, []runtime.Member{{Key: "fine"}, {Key: "broken"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.rt.Families().Trigger(ctx, family, "broken", "once"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the member's failure to be recorded", func() bool {
		snap, err := c.rt.Monitor().SnapshotOf(ctx, []string{family}, 5)
		return err == nil && len(snap.Schedules) == 1 && snap.Schedules[0].Status == runtime.StatusFailing
	})
	checkResponse(t, "GET", srv.URL+"/cron/", nil, "", 200, "text/html", []string{
		"2 members · per tenant", `<span class="badge failed"`, "tenant broken: no invoice template"})
	checkResponse(t, "GET", srv.URL+"/cron/api/schedules/"+family, nil, "", 200, "application/json", []string{
		`"status": "failing"`, `"members": 2`, `"member": "broken"`, `"outcome": "failed"`, `"error": "tenant broken: no invoice template"`, `"failed": 1`})
}

// Without Redis a family's row and JSON do not pass its default
// expression off as its members' next run, and member routes say the
// scheduler is disabled.
func TestMembersWithoutRedis(t *testing.T) {
	t.Parallel()
	reg := registry.MustNew(registry.Schedule{Name: family, Expr: "0 9 * * MON", Zone: "UTC", Per: "tenant",
		Handler: func(context.Context, registry.Occurrence) error { return nil }})
	rt, err := runtime.New(reg, runtime.Options{RedisURL: ""})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	srv := httptest.NewServer(http.StripPrefix("/cron", admin.New(rt, admin.Options{})))
	defer srv.Close()
	base := srv.URL + "/cron/"
	checkResponse(t, "GET", base+"api/schedules/"+family, nil, "", 200, "application/json",
		[]string{`"per": "tenant"`, `"members": null`, `"next_run": null`})
	checkResponse(t, "GET", base+"api/schedules/"+family+"/members", nil, "", 503, "application/json", []string{"the scheduler is disabled"})
	checkResponse(t, "PUT", base+"api/schedules/"+family+"/members/acme", nil, `{}`, 503, "application/json", []string{"the scheduler is disabled"})
	page := checkResponse(t, "GET", base, nil, "", 200, "text/html", []string{family})
	if strings.Contains(page, memberNext(t, &fixture{rt: rt}, "UTC", "")[:19]) {
		t.Error("the page shows the family's default next run as its members'")
	}
}

// A family's row does not pair its default expression with another
// member's next run: the next run says whose it is, and the row how many
// expressions the members run on; the JSON says the same.
func TestAFamilyRowSaysWhoseNextRunItIs(t *testing.T) {
	t.Parallel()
	c, srv := familySetup(t, admin.Options{})
	ctx := context.Background()
	if err := c.rt.Families().SetMany(ctx, family, []runtime.Member{{Key: "acme"}, {Key: "live", Zone: "Asia/Tokyo", Expr: "* * * * * *"}}); err != nil {
		t.Fatal(err)
	}
	index := checkResponse(t, "GET", srv.URL+"/cron/", nil, "", 200, "text/html", []string{"2 members · per tenant · 2 expressions"})
	row := regexp.MustCompile(`(?s)<tr data-schedule="` + family + `".*?</tr>`).FindString(index)
	next := regexp.MustCompile(`(?s)</td>\s*<td>(.*?)</td>`).FindStringSubmatch(row)
	if next == nil || !strings.Contains(next[1], "for the members on <code class=\"nowrap\">* * * * * *</code> in Asia/Tokyo") {
		t.Errorf("the family's next run does not say whose it is:\n%s", row)
	}
	if !strings.Contains(row, "default: at 09:00 on Mondays, UTC") {
		t.Errorf("the family's own expression does not read as the default:\n%s", row)
	}
	checkResponse(t, "GET", srv.URL+"/cron/schedules/"+family, nil, "", 200, "text/html", []string{
		"for the members on <code class=\"nowrap\">* * * * * *</code> in Asia/Tokyo"})
	checkResponse(t, "GET", srv.URL+"/cron/api/schedules/"+family, nil, "", 200, "application/json", []string{
		`"next_run_for": {`, `"zone": "Asia/Tokyo"`, `"expression": "* * * * * *"`, `"expressions": 2`})
}

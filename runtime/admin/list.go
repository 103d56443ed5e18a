package admin

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/belfry/belfry/runtime/core"
)

// The overview at any number of schedules: one page of them at a time,
// problems first (failing, late, paused, running, unknown, then ok), by
// name within each, searchable by name and filterable by status. The order
// comes from runtime.Statuses, which reads no schedule's history; only the
// page's own rows are read in full.
//
// Paging is by cursor, not offset: the cursor names the last row shown
// (its status and name), and the next page starts after it. A schedule
// whose status changes between two pages moves in the order, so it may
// show on both or on neither; the counts are those of each page's moment.

const (
	// pageLimitDefault is the rows of a page when the request names none.
	pageLimitDefault = 100
	// pageLimitMax bounds the rows a request may ask for.
	pageLimitMax = 1000
)

// problemRank orders the overview: what needs a person first. Unknown (the
// status could not be read) comes before ok: it may be anything.
var problemRank = map[core.Status]int{
	core.StatusFailing: 0, core.StatusLate: 1, core.StatusPaused: 2,
	core.StatusRunning: 3, core.StatusUnknown: 4, core.StatusOK: 5, core.StatusDisabled: 6,
}

// statusOrder lists the statuses in problemRank's order.
var statusOrder = []core.Status{core.StatusFailing, core.StatusLate, core.StatusPaused,
	core.StatusRunning, core.StatusUnknown, core.StatusOK, core.StatusDisabled}

// listQuery is what a list request asks for.
type listQuery struct {
	Q        string        // a substring of the name, any case; "" for all
	Statuses []core.Status // only these statuses; nil for all
	Cursor   string        // the last row of the previous page; "" for the first
	Limit    int
}

// paged says the request uses paging or search: the JSON list then answers
// with a page object, and without any of these keeps its original form, a
// bare array of every schedule.
func paged(v url.Values) bool {
	return v.Has("cursor") || v.Has("limit") || v.Has("q") || v.Has("status")
}

// parseListQuery reads a list request, with a message for what is wrong.
func parseListQuery(v url.Values) (listQuery, error) {
	q := listQuery{Q: strings.TrimSpace(v.Get("q")), Cursor: v.Get("cursor"), Limit: pageLimitDefault}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > pageLimitMax {
			return q, fmt.Errorf("limit must be a number from 1 to %d; got %q", pageLimitMax, l)
		}
		q.Limit = n
	}
	for _, s := range strings.Split(v.Get("status"), ",") {
		status := core.Status(strings.TrimSpace(s))
		if status == "" {
			continue
		}
		if _, ok := problemRank[status]; !ok {
			return q, fmt.Errorf("status must be one of failing, late, paused, running, unknown, ok, disabled (comma-separated for several); got %q", s)
		}
		q.Statuses = append(q.Statuses, status)
	}
	if q.Cursor != "" {
		if _, _, err := decodeCursor(q.Cursor); err != nil {
			return q, err
		}
	}
	return q, nil
}

// Has says the query filters on status s, for the search form.
func (q listQuery) Has(s core.Status) bool { return slices.Contains(q.Statuses, s) }

// values is the query string of q with another cursor, for a page's links.
func (q listQuery) values(cursor string) url.Values {
	v := url.Values{}
	if q.Q != "" {
		v.Set("q", q.Q)
	}
	if len(q.Statuses) > 0 {
		parts := make([]string, len(q.Statuses))
		for i, s := range q.Statuses {
			parts[i] = string(s)
		}
		v.Set("status", strings.Join(parts, ","))
	}
	if q.Limit != pageLimitDefault {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	return v
}

func encodeCursor(status core.Status, name string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(string(status) + "/" + name))
}

func decodeCursor(c string) (core.Status, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	status, name, ok := strings.Cut(string(raw), "/")
	if _, known := problemRank[core.Status(status)]; err != nil || !ok || !known {
		return "", "", fmt.Errorf("cursor %q is not one this admin gave out: pass next_cursor back unchanged", c)
	}
	return core.Status(status), name, nil
}

// listing is one page of the overview.
type listing struct {
	Statuses core.Statuses
	// Page are the page's schedules in order, as positions in
	// Statuses.Schedules.
	Page []int
	// Matched is how many schedules match the query; Offset is where the
	// page starts among them.
	Matched, Offset int
	// Next is the cursor of the next page, "" on the last.
	Next string
}

// names are the page's schedule names, in order.
func (l listing) names() []string {
	out := make([]string, len(l.Page))
	for i, p := range l.Page {
		out[i] = l.Statuses.Schedules[p].Schedule.Name
	}
	return out
}

// byName is the registry's schedules sorted by name, and their names in
// lower case for search: computed once, since the registry never changes.
type byName struct {
	order []int // positions in the registry's order
	lower []string
}

func newByName(rt *core.Runtime) byName {
	scheds := rt.Registry().Schedules()
	b := byName{order: make([]int, len(scheds)), lower: make([]string, len(scheds))}
	for i, s := range scheds {
		b.order[i], b.lower[i] = i, strings.ToLower(s.Name)
	}
	sort.SliceStable(b.order, func(i, j int) bool { return scheds[b.order[i]].Name < scheds[b.order[j]].Name })
	return b
}

// list reads every schedule's status and picks the page q asks for: one
// pass over the schedules in name order, bucketed by status.
func (a *admin) list(ctx context.Context, q listQuery) (listing, error) {
	statuses, err := a.r.Monitor().Statuses(ctx)
	l := listing{Statuses: statuses}
	buckets := make([][]int, len(statusOrder))
	needle := strings.ToLower(q.Q)
	for _, p := range a.names.order {
		if needle != "" && !strings.Contains(a.names.lower[p], needle) {
			continue
		}
		status := statuses.Schedules[p].Status
		if len(q.Statuses) > 0 && !slices.Contains(q.Statuses, status) {
			continue
		}
		rank := problemRank[status]
		buckets[rank] = append(buckets[rank], p)
	}
	matched := slices.Concat(buckets...)
	l.Matched = len(matched)
	if q.Cursor != "" {
		status, name, _ := decodeCursor(q.Cursor)
		rank := problemRank[status]
		l.Offset = sort.Search(len(matched), func(i int) bool {
			st := statuses.Schedules[matched[i]]
			r := problemRank[st.Status]
			return r > rank || (r == rank && st.Schedule.Name > name)
		})
	}
	end := min(l.Offset+q.Limit, len(matched))
	l.Page = matched[l.Offset:end]
	if end < len(matched) {
		last := statuses.Schedules[matched[end-1]]
		l.Next = encodeCursor(last.Status, last.Schedule.Name)
	}
	return l, err
}

// summaryPart is one status's count at the top of the page.
type summaryPart struct {
	Status core.Status
	Count  int
	Href   string // the page of that status alone
}

// summary counts the schedules of each status, in problemRank's order,
// and says it in one line: "1 failing · 1 late · 1 paused · 2 ok".
func summary(counts map[core.Status]int) ([]summaryPart, string) {
	var parts []summaryPart
	var words []string
	for _, status := range statusOrder {
		if n := counts[status]; n > 0 {
			parts = append(parts, summaryPart{Status: status, Count: n, Href: "?" + url.Values{"status": {string(status)}}.Encode()})
			words = append(words, strconv.Itoa(n)+" "+string(status))
		}
	}
	if len(words) == 0 {
		return nil, "no schedules"
	}
	return parts, strings.Join(words, " · ")
}

// partWords names a missing part for a person.
var partWords = map[string]string{
	core.PartSchedules:  "recent runs, counters and pauses",
	core.PartStatuses:   "which schedules are failing, late, paused or running",
	core.PartCluster:    "the lease holder and replicas",
	core.PartQueues:     "which queues have workers",
	core.PartLostWrites: "detected losses of Redis data",
	core.PartMisrouted:  "occurrences bounced by workers",
	partHistory:         "the history",
}

// missingNotice says what the page could not read and why, grouped by
// reason: "Redis slow: no answer within 0.8 s: not shown: the lease holder
// and replicas."
func missingNotice(missing []core.Missing) string {
	var reasons []string
	parts := map[string][]string{}
	for _, m := range missing {
		if _, seen := parts[m.Reason]; !seen {
			reasons = append(reasons, m.Reason)
		}
		if w := partWords[m.Part]; !slices.Contains(parts[m.Reason], w) {
			parts[m.Reason] = append(parts[m.Reason], w)
		}
	}
	var out []string
	for _, r := range reasons {
		out = append(out, r+". Not shown: "+joinAnd(parts[r])+".")
	}
	return strings.Join(out, " ")
}

// partHistory names a detail's history in Missing, beside the runtime's
// parts.
const partHistory = "history"

// orphanCache keeps the removed schedules the first page offers to forget.
// Finding them reads every name that has state in Redis, which at many
// schedules costs more than the rest of the page; they change only when a
// deploy removes a schedule or someone forgets one, so the list is read at
// most once per orphansFresh (a deploy that removes schedules restarts the
// process, which reads them again), off the request: a page waits for a
// read under way only briefly.
type orphanCache struct {
	mu      sync.Mutex
	names   []string
	read    time.Time
	pending chan struct{} // closed when the read under way ends; nil when none is
}

const (
	orphansFresh       = 15 * time.Minute
	orphansReadTimeout = 10 * time.Second
	// orphansWait is how long a page waits for a read under way: enough
	// for a registry of thousands, not for one of 100,000, whose first
	// page shows the removed schedules once the read is done.
	orphansWait = 150 * time.Millisecond
)

// get returns the removed schedules, and pending true when they are being
// read and the page could not wait for them.
func (c *orphanCache) get(ctx context.Context, rt *core.Runtime) (names []string, pending bool) {
	c.mu.Lock()
	if !c.read.IsZero() && time.Since(c.read) < orphansFresh {
		defer c.mu.Unlock()
		return c.names, false
	}
	if c.pending == nil {
		done := make(chan struct{})
		c.pending = done
		go func() {
			defer close(done)
			rctx, cancel := context.WithTimeout(context.Background(), orphansReadTimeout)
			defer cancel()
			names, err := rt.Orphans(rctx)
			c.mu.Lock()
			defer c.mu.Unlock()
			if err == nil {
				c.names, c.read = names, time.Now()
			}
			c.pending = nil
		}()
	}
	done := c.pending
	c.mu.Unlock()
	wait := time.NewTimer(orphansWait)
	defer wait.Stop()
	select {
	case <-done:
	case <-wait.C:
		pending = true
	case <-ctx.Done():
		pending = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.names, pending && c.read.IsZero()
}

// stale makes the next page read the removed schedules again: after a
// Forget through this admin.
func (c *orphanCache) stale() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read = time.Time{}
}

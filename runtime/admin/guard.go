package admin

import (
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ManualRunsPerMinuteDefault is Options.ManualRunsPerMinute's default.
const ManualRunsPerMinuteDefault = 10

// loopbackHosts may always change state: a browser on the same machine.
var loopbackHosts = []string{"localhost", "127.0.0.1", "::1"}

// guardHosts refuses a state-changing request whose Host is not allowed.
// Cross-origin protection does not stop DNS rebinding: a page on
// evil.example that resolves its own name to the admin's address is
// same-origin to the browser. Without the host's authentication in front
// (Options.Middleware) nothing else would; with AllowedHosts set the check
// holds either way.
func (a *admin) guardHosts(next http.Handler) http.Handler {
	if a.opts.Middleware != nil && len(a.opts.AllowedHosts) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch req.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			next.ServeHTTP(w, req)
			return
		}
		host := req.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.ToLower(strings.Trim(host, "[]"))
		if !slices.Contains(loopbackHosts, host) && !slices.Contains(a.opts.AllowedHosts, host) {
			http.Error(w, "host "+strconv.Quote(req.Host)+" may not change the schedules: add it to admin.Options.AllowedHosts, "+
				"or put the admin behind your authentication (admin.Options.Middleware)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// manualRuns bounds the manual runs per schedule through this admin.
type manualRuns struct {
	perMinute int
	mu        sync.Mutex
	limiters  map[string]*rate.Limiter
}

func (m *manualRuns) allow(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.limiters[name]
	if !ok {
		l = rate.NewLimiter(rate.Every(time.Minute/time.Duration(m.perMinute)), m.perMinute)
		m.limiters[name] = l
	}
	return l.Allow()
}

// limited wraps a manual-run route (Run now, Re-run, Backfill): beyond
// Options.ManualRunsPerMinute for one schedule it answers 429, in JSON for
// the API and as a page for the forms.
func (a *admin) limited(api bool, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if a.runs.allow(req.PathValue("name")) {
			next(w, req)
			return
		}
		retry := max(1, int(time.Minute/time.Duration(a.runs.perMinute)/time.Second))
		w.Header().Set("Retry-After", strconv.Itoa(retry))
		msg := "too many manual runs of " + req.PathValue("name") + ": at most " + strconv.Itoa(a.runs.perMinute) +
			" a minute through this admin; try again in " + strconv.Itoa(retry) + "s"
		if api {
			writeJSONError(w, http.StatusTooManyRequests, msg)
			return
		}
		a.refuse(w, http.StatusTooManyRequests, "Refused: "+msg+".")
	}
}

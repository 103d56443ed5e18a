package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"strings"
	"time"
)

// client speaks one service's admin JSON API.
type client struct {
	base    string // the admin's URL without a trailing slash
	header  http.Header
	http    *http.Client
	timeout time.Duration
}

// refusedError is the service's answer to a request it did not carry out,
// or the reason no answer came: exit status 1.
type refusedError struct{ msg string }

func (e refusedError) Error() string { return e.msg }

// actorHeader is admin.ActorHeader; the CLI does not import the admin (nor,
// through it, the runtime and Redis).
const actorHeader = "Belfry-Actor"

// client checks the global flags a request needs and returns the client.
func (a *app) client() (*client, error) {
	if a.baseURL == "" {
		return nil, usagef("no admin URL: pass --url or set BELFRY_URL (e.g. http://127.0.0.1:8080/cron)")
	}
	u, err := url.Parse(a.baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("--url %q: want an http(s) URL such as http://127.0.0.1:8080/cron", a.baseURL)
	}
	if a.timeout <= 0 {
		return nil, usagef("--timeout %s: want a positive duration such as 30s", a.timeout)
	}
	c := &client{base: strings.TrimRight(a.baseURL, "/"), header: http.Header{}, timeout: a.timeout,
		http: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for _, h := range a.headers {
		name, value, ok := strings.Cut(h, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, usagef("--header %q: want 'Name: value'", h)
		}
		c.header.Add(name, strings.TrimSpace(value))
	}
	actor := a.actor
	if actor == "" {
		actor = defaultActor()
	}
	if actor != "" && c.header.Get(actorHeader) == "" {
		c.header.Set(actorHeader, actor)
	}
	return c, nil
}

// defaultActor is user@host, as far as the machine tells.
func defaultActor() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	switch {
	case name != "" && host != "":
		return name + "@" + host
	case name != "":
		return name
	}
	return host
}

// path joins the admin's base and the API path parts, each escaped.
func (c *client) path(parts ...string) string {
	var b strings.Builder
	b.WriteString(c.base)
	for i, p := range parts {
		if i%2 == 1 { // odd parts are names: escape them
			p = url.PathEscape(p)
		}
		b.WriteString(p)
	}
	return b.String()
}

// response is an answer whose status the caller judges.
type response struct {
	status int
	body   []byte
}

// send makes one request. A body is sent as JSON; requestKey, when set,
// goes in Idempotency-Key, and a request that got no answer is sent again
// with it (the service runs a request key once), up to three times.
func (c *client) send(ctx context.Context, method, target string, body any, requestKey string) (response, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return response{}, err
		}
	}
	tries := 1
	if requestKey != "" || method == http.MethodGet || method == http.MethodPut || method == http.MethodDelete {
		tries = 3
	}
	var lastErr error
	for try := range tries {
		if try > 0 {
			select {
			case <-ctx.Done():
				return response{}, ctx.Err()
			case <-time.After(time.Duration(try) * 500 * time.Millisecond):
			}
		}
		resp, err := c.once(ctx, method, target, payload, requestKey)
		if err == nil {
			return resp, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	msg := "cannot reach " + target + ": " + lastErr.Error()
	if requestKey != "" {
		msg += "; it may have been done: repeat with --request-key " + requestKey + " (the service does one request key once)"
	}
	return response{}, refusedError{msg}
}

func (c *client) once(ctx context.Context, method, target string, payload []byte, requestKey string) (response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return response{}, err
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if requestKey != "" {
		req.Header.Set("Idempotency-Key", requestKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return response{}, err
	}
	return response{status: resp.StatusCode, body: data}, nil
}

// call sends a request and decodes a 2xx answer into out (unless nil);
// any other answer is a refusedError with the service's message.
func (c *client) call(ctx context.Context, method, target string, body any, requestKey string, out any) ([]byte, error) {
	resp, err := c.send(ctx, method, target, body, requestKey)
	if err != nil {
		return nil, err
	}
	if resp.status < 200 || resp.status > 299 {
		return resp.body, refusedError{refusal(resp)}
	}
	if out != nil && len(resp.body) > 0 {
		if err := json.Unmarshal(resp.body, out); err != nil {
			return resp.body, refusedError{fmt.Sprintf("%s answered %d with what is not the admin's JSON (is --url the admin's base, e.g. http://host:8080/cron?): %v",
				target, resp.status, err)}
		}
	}
	return resp.body, nil
}

// refusal is the message of an answer that is not a success: the admin's
// {"error": ...}, else the first line of a text body (the host's own
// authentication, a proxy), else the status.
func refusal(resp response) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(resp.body, &e) == nil && e.Error != "" {
		return e.Error
	}
	// The admin answers its own 404s in JSON: a 404 in anything else is
	// the host's, for a path the admin is not mounted at.
	hint := ""
	if resp.status == http.StatusNotFound {
		hint = "; is --url where the service mounts the admin, e.g. http://host:8080/cron?"
	}
	text := strings.TrimSpace(string(resp.body))
	if line, _, _ := strings.Cut(text, "\n"); line != "" && !strings.HasPrefix(line, "<") && len(line) < 500 {
		return fmt.Sprintf("%s (HTTP %d)%s", strings.TrimSpace(line), resp.status, hint)
	}
	return fmt.Sprintf("the service answered HTTP %d %s%s", resp.status, http.StatusText(resp.status), hint)
}

// newRequestKey identifies one manual run, so a repeat of the same request
// (a retry after a lost answer) runs once.
func newRequestKey() string {
	b := make([]byte, 12)
	rand.Read(b)
	return "cli-" + hex.EncodeToString(b)
}

package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/belfry/belfry/internal/pgtest"
	"github.com/redis/go-redis/v9"
)

// adoptionSection is the README section a newcomer follows, and the one
// TestAdoptInFreshModule runs.
const adoptionSection = "## Add belfry to your service"

// postgresDoc and postgresWiring are the guide's section with the
// complete main.go on Postgres and River, which TestAdoptOnPostgres runs
// after the README's first steps.
const (
	postgresDoc    = "docs/postgres.md"
	postgresWiring = "## 2. Wire the runtime, the engine and River"
)

// checkoutPlaceholder is how the README names the reader's clone of belfry;
// the test puts this checkout there.
const checkoutPlaceholder = "/path/to/belfry"

// readmeStep is one marked block of a documented section, in document
// order. A block is marked by an HTML comment on the line before its fence:
//
//	<!-- file: jobs/jobs.go -->  a file to write, at that path in the module
//	<!-- shell -->               commands run in the module, as a bash script
//	<!-- run -->                 the command that starts the service
//	<!-- probe -->               curl lines: URLs the running service answers
//	<!-- ci -->                  the CI check for a forgotten go generate
type readmeStep struct {
	kind, arg, body string
	at              string // document:line of the fence, for messages
}

var stepMarkRE = regexp.MustCompile(`^<!-- (file|shell|run|probe|ci)(?:: (\S+))? -->$`)

// readmeSteps returns the marked blocks of section (its "## " heading) in
// the document at root/doc.
func readmeSteps(t *testing.T, root, doc, section string) []readmeStep {
	t.Helper()
	lines := strings.Split(readFile(t, filepath.Join(root, doc)), "\n")
	start := -1
	for i, l := range lines {
		if l == section {
			start = i + 1
			break
		}
	}
	if start < 0 {
		t.Fatalf("%s has no section %q", doc, section)
	}
	var steps []readmeStep
	for i := start; i < len(lines) && !strings.HasPrefix(lines[i], "## "); i++ {
		m := stepMarkRE.FindStringSubmatch(lines[i])
		if m == nil {
			if strings.HasPrefix(lines[i], "<!--") {
				t.Errorf("%s:%d: unknown mark %q; want file: PATH, shell, run, probe or ci", doc, i+1, lines[i])
			}
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
			t.Fatalf("%s:%d: mark %q is not followed by a fenced block", doc, i+1, lines[i])
		}
		var body []string
		j := i + 2
		for ; j < len(lines) && lines[j] != "```"; j++ {
			body = append(body, lines[j])
		}
		if j == len(lines) {
			t.Fatalf("%s:%d: fenced block not closed", doc, i+2)
		}
		steps = append(steps, readmeStep{kind: m[1], arg: m[2], body: strings.Join(body, "\n") + "\n", at: fmt.Sprintf("%s:%d", doc, i+2)})
		i = j
	}
	return steps
}

// TestAdoptInFreshModule follows README.md's "Add belfry to your service"
// exactly as written, in a new module: it writes the README's files and
// runs its commands in order (with this checkout as /path/to/belfry), so
// the first go build after main.go is written must succeed with only the
// commands the README shows. Then it starts two replicas of the service the
// README built against the real Redis, waits until the schedule has run and
// health is ok, reads the admin page, its JSON, /healthz, /livez, /metrics
// and the URLs the README tells the reader to open, and stops both with
// SIGTERM, which must end them cleanly; every occurrence must have run
// once across the two. Last, it runs the README's CI check in a git
// repository of the module: clean, it passes; after a directive changes
// without go generate, it fails.
func TestAdoptInFreshModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module and runs a service against Redis")
	}
	t.Parallel()
	root := repoRoot(t)
	redisAddr := testRedis(t)
	steps := readmeSteps(t, root, "README.md", adoptionSection)
	holdAdoptionLock(t, redisAddr)

	mod := t.TempDir()
	env := adoptEnv()
	done := followSteps(t, root, mod, env, steps)
	if done.ci == nil {
		t.Fatal("the adoption section has no CI check (mark its block <!-- ci -->)")
	}
	runTwoReplicas(t, done.binary(t, mod), []string{"REDIS_URL=redis://" + redisAddr + "/0"}, done.probe,
		func(namespace, queue string) { cleanupRedis(t, redisAddr, namespace, queue) })
	checkCI(t, mod, env, done.ci)
}

// TestAdoptOnPostgres follows the README's adoption on Postgres and River
// as docs/postgres.md tells a newcomer to: the README's steps up to its
// main.go, then the guide's complete main.go and commands, which build the
// service and the belfry CLI and migrate a fresh database with it. The
// service must link neither go-redis nor asynq; two replicas of it must
// pass the README's checks (every occurrence once, health ok, its probe
// URLs served, a clean stop on SIGTERM).
func TestAdoptOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module and runs a service against Postgres")
	}
	t.Parallel()
	root := repoRoot(t)
	databaseURL := pgtest.NewDatabase(t, "belfry_adopt_test")
	readme := readmeSteps(t, root, "README.md", adoptionSection)
	var steps []readmeStep
	for _, s := range readme {
		if s.kind == "file" && s.arg == "main.go" {
			break
		}
		steps = append(steps, s)
	}
	steps = append(steps, readmeSteps(t, root, postgresDoc, postgresWiring)...)
	// The README's probe: the guide says its URLs answer as there.
	for _, s := range readme {
		if s.kind == "probe" {
			steps = append(steps, s)
		}
	}

	mod := t.TempDir()
	env := append(adoptEnv(), "DATABASE_URL="+databaseURL)
	done := followSteps(t, root, mod, env, steps)
	cmd := exec.Command("go", "list", "-deps", ".")
	cmd.Dir, cmd.Env = mod, env
	deps, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, deps)
	}
	for _, redisOnly := range []string{"github.com/redis/go-redis/", "github.com/hibiken/asynq"} {
		if strings.Contains(string(deps), redisOnly) {
			t.Errorf("%s's main.go links %s", postgresDoc, redisOnly)
		}
	}
	runTwoReplicas(t, done.binary(t, mod), []string{"DATABASE_URL=" + databaseURL}, done.probe, nil)
}

// adopted is what following a document's steps left to do: the files it
// wrote, and its run, probe and CI blocks, which the tests run themselves.
type adopted struct {
	files          map[string]bool
	run, probe, ci *readmeStep
}

// followSteps writes the steps' files and runs their commands in mod, in
// order, with this checkout as /path/to/belfry; the first failure ends t.
func followSteps(t *testing.T, root, mod string, env []string, steps []readmeStep) adopted {
	t.Helper()
	done := adopted{files: map[string]bool{}}
	for i := range steps {
		s := &steps[i]
		switch s.kind {
		case "file":
			writeFile(t, filepath.Join(mod, s.arg), s.body)
			done.files[s.arg] = true
		case "shell":
			script := strings.ReplaceAll(s.body, checkoutPlaceholder, root)
			if out, err := runScript(mod, env, script); err != nil {
				t.Fatalf("%s: the commands failed: %v\n%s\nscript:\n%s", s.at, err, out, script)
			}
		case "run":
			done.run = s
		case "probe":
			done.probe = s
		case "ci":
			done.ci = s
		}
	}
	for _, name := range []string{"jobs/jobs.go", "main.go"} {
		if !done.files[name] {
			t.Fatalf("the steps write no %s (mark its block <!-- file: %s -->)", name, name)
		}
	}
	if _, err := os.Stat(filepath.Join(mod, "jobs", outputName)); err != nil {
		t.Fatalf("the commands did not generate jobs/%s: %v", outputName, err)
	}
	return done
}

// binary is the service the steps built, as their run block starts it.
func (a adopted) binary(t *testing.T, mod string) string {
	t.Helper()
	if a.run == nil || a.probe == nil {
		t.Fatalf("the steps lack a marked block: run %v, probe %v", a.run != nil, a.probe != nil)
	}
	command := strings.TrimSpace(a.run.body)
	if !strings.HasPrefix(command, "./") || strings.ContainsAny(command, " \n") {
		t.Fatalf("%s: the run block is %q; want the binary the steps built, such as ./svc", a.run.at, a.run.body)
	}
	return filepath.Join(mod, command)
}

// adoptEnv is the environment of the README's commands: the caller's, with
// the module cache and build cache shared, but without -mod=mod, which
// would let go build update go.mod behind the README's back (the go.mod
// the reader has after each step is what must build).
func adoptEnv() []string {
	var flags []string
	for _, f := range strings.Fields(os.Getenv("GOFLAGS")) {
		if !strings.HasPrefix(f, "-mod=") {
			flags = append(flags, f)
		}
	}
	return append(os.Environ(), "GOFLAGS="+strings.Join(flags, " "), "GOTOOLCHAIN=local", "GOWORK=off")
}

// runScript runs script with bash in dir, stopping at the first failure.
func runScript(dir string, env []string, script string) (string, error) {
	cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// runTwoReplicas starts two replicas of the service with storeEnv, which
// names their store, checks what a reader would see, and stops them.
// cleanup, when not nil, removes what the service left in its store.
func runTwoReplicas(t *testing.T, bin string, storeEnv []string, probe *readmeStep, cleanup func(namespace, queue string)) {
	replicas := []*adoptReplica{
		startAdoptReplica(t, bin, storeEnv), startAdoptReplica(t, bin, storeEnv),
	}
	deadline := time.Now().Add(60 * time.Second)
	poll := time.NewTicker(100 * time.Millisecond) // how soon a change is seen; the deadline decides
	defer poll.Stop()
	ticks := func() map[string]int {
		n := map[string]int{}
		for _, r := range replicas {
			for _, key := range r.ticks() {
				n[key]++
			}
		}
		return n
	}
	healthy := func() bool {
		for _, r := range replicas {
			if r.admin == nil || get(t, r.base("/healthz")).status != http.StatusOK {
				return false
			}
		}
		return true
	}
	for len(ticks()) < 2 || !healthy() {
		if time.Now().After(deadline) {
			for i, r := range replicas {
				t.Logf("replica %d stderr:\n%s", i+1, r.stderr.String())
			}
			t.Fatalf("within 60s: %d occurrences ran (want 2), health ok on both: %v", len(ticks()), healthy())
		}
		for _, r := range replicas {
			r.findAdmin()
		}
		<-poll.C
	}
	r := replicas[0]
	page := get(t, r.admin.String())
	if page.status != http.StatusOK || !strings.Contains(page.body, "tick") {
		t.Errorf("GET %s: %d, want 200 and a page naming the schedule tick:\n%.400s", r.admin, page.status, page.body)
	}
	var schedules []struct {
		Name     string `json:"name"`
		Queue    string `json:"queue"`
		Counters struct {
			Succeeded int64 `json:"succeeded"`
		} `json:"counters"`
	}
	list := get(t, r.admin.JoinPath("api/schedules").String())
	if err := json.Unmarshal([]byte(list.body), &schedules); err != nil || len(schedules) != 1 || schedules[0].Counters.Succeeded < 1 {
		t.Fatalf("GET api/schedules: %d %.400s (%v); want the schedule with at least one success", list.status, list.body, err)
	}
	for key := range ticks() {
		ns, queue := namespaceOf(key), schedules[0].Queue
		if cleanup != nil {
			t.Cleanup(func() { cleanup(ns, queue) })
		}
		break
	}
	if got := get(t, r.base("/livez")); got.status != http.StatusOK {
		t.Errorf("GET /livez: %d %s", got.status, got.body)
	}
	if got := get(t, r.base("/metrics")); got.status != http.StatusOK || !strings.Contains(got.body, "belfry_schedule_next_run_timestamp_seconds{schedule=\"tick\"}") {
		t.Errorf("GET /metrics: %d, want 200 with belfry's series:\n%.400s", got.status, got.body)
	}
	// The URLs the README has the reader open: served, at the address main
	// logs, with the path the README gives.
	probed := 0
	for _, line := range strings.Split(probe.body, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != "curl" {
			continue
		}
		u, err := url.Parse(fields[len(fields)-1])
		if err != nil || u.Host != "127.0.0.1:8080" {
			t.Errorf("%s: %q: want curl ... http://127.0.0.1:8080/PATH (the address main serves by default)", probe.at, line)
			continue
		}
		probed++
		if got := get(t, r.base(u.Path)); got.status != http.StatusOK {
			t.Errorf("%s: GET %s: %d %.300s", probe.at, u.Path, got.status, got.body)
		}
	}
	if probed == 0 {
		t.Errorf("%s: the probe block has no curl lines", probe.at)
	}

	for i, r := range replicas {
		if err := r.stop(); err != nil {
			t.Errorf("replica %d exited with %v after SIGTERM, want status 0\nstderr:\n%s", i+1, err, r.stderr.String())
		}
	}
	got := ticks()
	for key, n := range got {
		if n != 1 {
			t.Errorf("occurrence %s ran %d times across the replicas, want once", key, n)
		}
	}
	t.Logf("%d occurrences ran, each once: %d on one replica, %d on the other", len(got), len(replicas[0].ticks()), len(replicas[1].ticks()))
}

// checkCI runs the README's CI check in a git repository of the module:
// it must pass on the module as built, and fail once a directive's
// expression changes without go generate.
func checkCI(t *testing.T, mod string, env []string, ci *readmeStep) {
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=readme", "-c", "user.email=readme@example.com"}, args...)...)
		cmd.Dir, cmd.Env = mod, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	git("init", "-q")
	writeFile(t, filepath.Join(mod, ".gitignore"), "/svc\n")
	git("add", "-A")
	git("commit", "-q", "-m", "svc")
	if out, err := runScript(mod, env, ci.body); err != nil {
		t.Fatalf("%s: the CI check fails on the module as the README built it: %v\n%s", ci.at, err, out)
	}

	jobsFile := filepath.Join(mod, "jobs", "jobs.go")
	src := readFile(t, jobsFile)
	directive := regexp.MustCompile(`(?m)^//cron:schedule "([^"]+)"`)
	m := directive.FindStringSubmatchIndex(src)
	if m == nil {
		t.Fatal("jobs/jobs.go has no //cron:schedule directive")
	}
	expr := src[m[2]:m[3]]
	changed := "*/2 * * * * *"
	if expr == changed {
		changed = "*/3 * * * * *"
	}
	writeFile(t, jobsFile, src[:m[2]]+changed+src[m[3]:])
	out, err := runScript(mod, env, ci.body)
	if err == nil {
		t.Errorf("%s: the CI check passed after the directive changed from %q to %q without go generate\n%s", ci.at, expr, changed, out)
	} else if !strings.Contains(out, outputName) {
		t.Errorf("%s: the CI check failed without naming %s:\n%s", ci.at, outputName, out)
	}
	// The README says either line fails the build on its own; the script
	// stops at the first, so each runs alone, from the committed
	// generated file (the first line regenerates it).
	for line := range strings.Lines(ci.body) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		git("checkout", "--", filepath.Join("jobs", outputName))
		out, err := runScript(mod, env, line)
		if err == nil {
			t.Errorf("%s: %q passed after the directive changed from %q to %q without go generate\n%s", ci.at, line, expr, changed, out)
		} else if !strings.Contains(out, outputName) {
			t.Errorf("%s: %q failed without naming %s:\n%s", ci.at, line, outputName, out)
		}
	}
}

// adoptReplica is one process of the README's service.
type adoptReplica struct {
	cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
	done           chan error
	admin          *url.URL // from the serving log line, once logged
}

func startAdoptReplica(t *testing.T, bin string, storeEnv []string) *adoptReplica {
	t.Helper()
	r := &adoptReplica{cmd: exec.Command(bin), stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	// The documented main reads its store's URL and HTTP_ADDR, with
	// defaults for a local run; port 0 keeps the test off ports a person
	// may be using.
	r.cmd.Env = append(append(os.Environ(), storeEnv...), "HTTP_ADDR=127.0.0.1:0")
	r.cmd.Stdout, r.cmd.Stderr = r.stdout, r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() { r.cmd.Process.Kill() })
	return r
}

var (
	servingRE = regexp.MustCompile(`msg=serving admin=(http://\S+)`)
	tickRE    = regexp.MustCompile(`msg=tick .*key=(cron:\S+)`)
)

// findAdmin reads the admin URL main logs at start-up.
func (r *adoptReplica) findAdmin() {
	if r.admin != nil {
		return
	}
	if m := servingRE.FindStringSubmatch(r.stderr.String()); m != nil {
		r.admin, _ = url.Parse(m[1])
	}
}

// base is the URL of path on the replica's HTTP server.
func (r *adoptReplica) base(path string) string {
	return (&url.URL{Scheme: "http", Host: r.admin.Host, Path: path}).String()
}

// ticks are the occurrence keys this replica's handler logged.
func (r *adoptReplica) ticks() []string {
	var keys []string
	sc := bufio.NewScanner(strings.NewReader(r.stderr.String()))
	for sc.Scan() {
		if m := tickRE.FindStringSubmatch(sc.Text()); m != nil {
			keys = append(keys, m[1])
		}
	}
	return keys
}

// stop sends SIGTERM and waits up to 20s for a clean exit.
func (r *adoptReplica) stop() error {
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-r.done:
		return err
	case <-time.After(20 * time.Second):
		r.cmd.Process.Kill()
		return fmt.Errorf("no exit within 20s of SIGTERM: %v", <-r.done)
	}
}

// namespaceOf is the namespace of an occurrence key,
// "cron:<namespace>/<name>:<slot>".
func namespaceOf(key string) string {
	ns, _, ok := strings.Cut(strings.TrimPrefix(key, "cron:"), "/")
	if !ok {
		return ""
	}
	return ns
}

type response struct {
	status int
	body   string
}

func get(t *testing.T, u string) response {
	t.Helper()
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(u)
	if err != nil {
		return response{body: err.Error()}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, body: string(body)}
}

// holdAdoptionLock makes concurrent runs of this test (from several
// checkouts, on one Redis) take turns: the README's service has a fixed
// namespace and queue, so two at once would be replicas of one service.
func holdAdoptionLock(t *testing.T, addr string) {
	t.Helper()
	const key = "belfry-test:readme-adoption"
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	token := randomHex(t)
	ctx := context.Background()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		ok, err := rdb.SetNX(ctx, key, token, 5*time.Minute).Result()
		if err != nil {
			t.Fatalf("redis at %s: %v", addr, err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("another run of this test held %s for 5 minutes", key)
		}
		time.Sleep(time.Second) // another run holds it for a minute or so
	}
	t.Cleanup(func() {
		release := redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)
		release.Run(ctx, rdb, []string{key}, token)
	})
}

// lockedBuffer is an output written by a process and read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testRedis returns the address of the Redis the tests share
// (BELFRY_TEST_REDIS, default 127.0.0.1:6379), failing the test when it
// does not answer: a missing Redis is never a skip.
func testRedis(t *testing.T) string {
	t.Helper()
	addr := cmp.Or(os.Getenv("BELFRY_TEST_REDIS"), "127.0.0.1:6379")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("redis at %s: %v (the test needs a real redis-server; set BELFRY_TEST_REDIS)", addr, err)
	}
	return addr
}

// cleanupRedis removes the keys a run left under namespace and asynq's
// keys of queue.
func cleanupRedis(t *testing.T, addr, namespace, queue string) {
	t.Helper()
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	for _, pattern := range []string{"belfry:{" + namespace + "}:*", "asynq:{" + queue + "}:*"} {
		// SCAN, not KEYS: KEYS would hold a shared Redis for as long
		// as it reads every key there.
		iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
	}
	rdb.SRem(ctx, "asynq:queues", queue)
}

func randomHex(t *testing.T) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// Command lintscale measures cronlint on a generated package of many
// schedules, half of them crowded into a few minutes:
//
//	go run ./analyzer/internal/lintscale -n 1000,10000
//
// For each size it writes a module into a temporary directory (a jobs
// package of handlers and a clock helper package), builds cronlint, runs
// it over the module as CI does (go vet -vettool) and standalone
// (cronlint ./...), each under /usr/bin/time -v when present, and prints
// one line per size and mode:
//
//	cronlint mode=vet schedules=10000 wall_s=W maxrss_mb=M diagnostics=D out_bytes=B longest_line=L
//
// maxrss_mb is the largest process of the run (cronlint, or a compile the
// go command starts). Before each run the package gets a fresh comment so
// go vet's cache never answers for it.
// -keep leaves the modules in place for a look, -cronlint uses a binary
// already built, -modes vet measures the CI path only.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("lintscale: ")
	sizes := flag.String("n", "1000,10000", "comma-separated numbers of schedules")
	keep := flag.Bool("keep", false, "keep the generated modules")
	bin := flag.String("cronlint", "", "cronlint binary to run (default: build it from this checkout)")
	trials := flag.Int("trials", 3, "runs per size and mode; the line shows the median wall time and the largest RSS")
	modes := flag.String("modes", "vet,standalone", "comma-separated modes: vet (go vet -vettool, as CI runs it), standalone (cronlint ./...)")
	flag.Parse()

	root, err := checkout()
	if err != nil {
		log.Fatal(err)
	}
	work, err := os.MkdirTemp("", "lintscale")
	if err != nil {
		log.Fatal(err)
	}
	if !*keep {
		defer os.RemoveAll(work)
	}
	if *bin == "" {
		*bin = filepath.Join(work, "cronlint")
		build := exec.Command("go", "build", "-o", *bin, "./cmd/cronlint")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			log.Fatalf("go build: %v\n%s", err, out)
		}
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 10 {
			log.Fatalf("-n: want numbers of schedules of at least 10, got %q", s)
		}
		dir := filepath.Join(work, fmt.Sprintf("svc%d", n))
		if err := writeModule(dir, root, n); err != nil {
			log.Fatal(err)
		}
		for _, mode := range strings.Split(*modes, ",") {
			if mode != "vet" && mode != "standalone" {
				log.Fatalf("-modes: unknown mode %q; want vet or standalone", mode)
			}
			args := []string{"go", "vet", "-vettool=" + *bin, "./..."}
			if mode == "standalone" {
				args = []string{*bin, "./..."}
			}
			var runs []result
			for range max(*trials, 1) {
				if err := touch(dir); err != nil {
					log.Fatal(err)
				}
				r, err := measure(dir, args)
				if err != nil {
					log.Fatal(err)
				}
				runs = append(runs, r)
			}
			slices.SortFunc(runs, func(a, b result) int { return cmp.Compare(a.wall, b.wall) })
			r := runs[len(runs)/2]
			for _, o := range runs {
				r.maxRSSKB = max(r.maxRSSKB, o.maxRSSKB)
			}
			fmt.Printf("cronlint mode=%s schedules=%d wall_s=%.2f maxrss_mb=%d diagnostics=%d out_bytes=%d longest_line=%d\n",
				mode, n, r.wall.Seconds(), r.maxRSSKB/1024, r.lines, r.bytes, r.longest)
		}
		if *keep {
			log.Printf("module kept in %s", dir)
		}
	}
}

// touch gives the first jobs file a fresh comment, so go vet's cache
// never answers for a run.
func touch(dir string) error {
	f, err := os.OpenFile(filepath.Join(dir, "jobs", "jobs000.go"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "\n// run at %s\n", time.Now().Format(time.RFC3339Nano)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// checkout is the root of the belfry checkout this file is in.
func checkout() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("no caller information")
	}
	return filepath.Abs(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// crowded are the expressions half of the schedules share: the minutes
// everyone picks.
var crowded = []string{"0 0 * * *", "0 0 * * *", "@daily", "0 3 * * *", "30 2 * * *", "0 * * * *", "0 9 * * MON-FRI", "0 0 1 * *"}

// writeModule writes a module with n schedules in package jobs.
func writeModule(dir, root string, n int) error {
	files := map[string]string{
		"go.mod":         "module example.com/svc\n\ngo 1.26.0\n\nrequire github.com/belfry/belfry v0.0.0\n\nreplace github.com/belfry/belfry => " + root + "\n",
		"clock/clock.go": "package clock\n\nimport \"time\"\n\nfunc Yesterday() time.Time { return time.Now().AddDate(0, 0, -1) }\n",
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		return err
	}
	files["go.sum"] = string(sum)
	const perFile = 500
	for f := 0; f*perFile < n; f++ {
		var b strings.Builder
		b.WriteString("package jobs\n\nimport (\n\t\"context\"\n\n\t\"github.com/belfry/belfry/registry\"\n\n\t\"example.com/svc/clock\"\n)\n\nvar _ = clock.Yesterday\n")
		for i := f * perFile; i < min(n, (f+1)*perFile); i++ {
			expr, keys := schedule(i)
			fmt.Fprintf(&b, "\n//cron:schedule %q name=job-%05d%s\nfunc Job%05d(ctx context.Context, occ registry.Occurrence) error {\n", expr, i, keys, i)
			if i%1000 == 7 {
				b.WriteString("\t_ = clock.Yesterday()\n")
			}
			b.WriteString("\treturn use(occ)\n}\n")
		}
		if f == 0 {
			b.WriteString("\nfunc use(occ registry.Occurrence) error { _ = occ.Key(); return nil }\n")
		}
		files[fmt.Sprintf("jobs/jobs%03d.go", f)] = b.String()
	}
	for name, data := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// schedule returns the i'th expression and extra keys: even ones crowd
// into a few minutes, odd ones spread over the day with some variety
// (zones, seconds fields, weekdays, frequent ones with a long timeout).
func schedule(i int) (expr, keys string) {
	if i%2 == 0 {
		return crowded[(i/2)%len(crowded)], ""
	}
	j := i / 2
	m, h := j%60, (j/60)%24
	switch j % 10 {
	case 0:
		return fmt.Sprintf("%d %d * * *", m, h), " tz=Europe/London"
	case 1:
		return fmt.Sprintf("%d %d %d * * *", j%60, m, h), ""
	case 2:
		return fmt.Sprintf("%d %d * * MON", m, h), ""
	case 3:
		return fmt.Sprintf("%d/15 * * * *", m%15), " timeout=20m"
	case 4:
		return fmt.Sprintf("%d * * * *", m), ""
	}
	return fmt.Sprintf("%d %d * * *", m, h), ""
}

type result struct {
	wall                  time.Duration
	maxRSSKB              int64
	lines, bytes, longest int
}

// measure runs args in dir, under /usr/bin/time -v when present.
func measure(dir string, args []string) (result, error) {
	timed := false
	if _, err := os.Stat("/usr/bin/time"); err == nil {
		args = append([]string{"/usr/bin/time", "-v"}, args...)
		timed = true
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		return result{}, err
	}
	r := result{wall: wall}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSSKB = ru.Maxrss // of the largest child: cronlint, not time
	}
	sc := bufio.NewScanner(&stderr)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if timed {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Maximum resident set size (kbytes): "); ok {
				r.maxRSSKB, _ = strconv.ParseInt(v, 10, 64)
				continue
			}
			if strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "Command exited") {
				continue // the rest of time -v's report
			}
		}
		if strings.Contains(line, ".go:") {
			r.lines++
			r.bytes += len(line) + 1
			r.longest = max(r.longest, len(line))
		}
	}
	if r.lines == 0 {
		return r, fmt.Errorf("cronlint reported nothing over %s; stdout:\n%s\nstderr:\n%s", dir, stdout.String(), stderr.String())
	}
	return r, nil
}

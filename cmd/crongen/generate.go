package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// generate writes zz_generated.cron.go for every package matching patterns,
// or, when any package has a problem, prints every problem and writes
// nothing at all: a half-regenerated tree is worse than a stale one.
func (a *app) generate(patterns []string) error {
	l := &loader{dir: a.dir, env: a.env}
	targets, err := l.load(patterns)
	if err != nil {
		return err
	}
	if err := a.reportProblems(l, targets, patterns); err != nil {
		return err
	}
	outputs := make(map[string][]byte, len(targets))
	for _, t := range targets {
		if len(t.schedules) == 0 {
			continue
		}
		src, err := render(t)
		if err != nil {
			return err
		}
		outputs[t.dir] = src
	}
	for _, t := range targets {
		file := filepath.Join(t.dir, outputName)
		src, ok := outputs[t.dir]
		switch {
		case !ok && t.stale:
			if err := os.Remove(file); err != nil {
				return err
			}
		case !ok:
		default:
			// An unchanged file keeps its modification time, so build
			// tools and editors see no change.
			if old, err := os.ReadFile(file); err == nil && bytes.Equal(old, src) {
				continue
			}
			if err := os.WriteFile(file, src, 0o666); err != nil {
				return err
			}
		}
	}
	return nil
}

// reportProblems prints the loader's problems, one per line, and returns
// errReported if there were any.
func (a *app) reportProblems(l *loader, targets []*target, patterns []string) error {
	problems := l.sortedProblems()
	if len(problems) == 0 && len(targets) == 0 {
		return fmt.Errorf("no packages match %s", strings.Join(patterns, " "))
	}
	for _, p := range problems {
		fmt.Fprintln(a.stderr, p)
	}
	if len(problems) > 0 {
		return errReported
	}
	return nil
}

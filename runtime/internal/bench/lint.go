package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// lintRow is cronlint's cost on one generated package, as CI runs it.
type lintRow struct {
	schedules   int
	wallS       float64
	maxRSSMB    int
	diagnostics int
	longestLine int
}

// benchLint runs analyzer/internal/lintscale (go vet -vettool=cronlint on
// generated packages, half their schedules crowded into a few minutes).
func benchLint(s settings, r *results) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	sizes := make([]string, len(s.lintSizes))
	for i, n := range s.lintSizes {
		sizes[i] = strconv.Itoa(n)
	}
	cmd := exec.Command("go", "run", "./analyzer/internal/lintscale", "-n", strings.Join(sizes, ","), "-trials", "1", "-modes", "vet")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("lintscale: %v\n%s", err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var row lintRow
		var outBytes int
		if _, err := fmt.Sscanf(sc.Text(), "cronlint mode=vet schedules=%d wall_s=%f maxrss_mb=%d diagnostics=%d out_bytes=%d longest_line=%d",
			&row.schedules, &row.wallS, &row.maxRSSMB, &row.diagnostics, &outBytes, &row.longestLine); err == nil {
			r.lint = append(r.lint, row)
		}
	}
	if len(r.lint) != len(s.lintSizes) {
		return fmt.Errorf("lintscale printed %d of %d lines:\n%s", len(r.lint), len(s.lintSizes), out)
	}
	return nil
}

package idempotent_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/belfry/belfry/analyzer/idempotent"
	"github.com/belfry/belfry/analyzer/internal/testmod"
)

func TestAnalyzer(t *testing.T) {
	dir := testmod.Extract(t, filepath.Join("testdata", "idempotent.txtar"))
	analysistest.Run(t, dir, idempotent.Analyzer, "./...")
}

func TestMethodHandlers(t *testing.T) {
	dir := testmod.Extract(t, filepath.Join("testdata", "methods.txtar"))
	analysistest.Run(t, dir, idempotent.Analyzer, "./...")
}

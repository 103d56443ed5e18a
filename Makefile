# belfry — `make` lists the targets. CI runs `make test` (through .ci/run).
SHELL := /bin/bash
GO    ?= go
PKGS  := ./...
MODULE := github.com/belfry/belfry

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z\/_-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: generate
generate: ## regenerate zz_generated.cron.go files (go generate)
	$(GO) generate $(PKGS)

.PHONY: zones
zones: ## rewrite registry/zonenames.txt from this Go's zone database (after a Go upgrade; commit the change)
	cd registry && $(GO) run zonenames_gen.go

.PHONY: verify/generate
verify/generate: generate ## fail if generated files are stale
	@if [ -n "$$(git status --porcelain -- '*zz_generated.cron.go')" ]; then \
		echo "generated files are stale; run make generate and commit:"; \
		git status --short -- '*zz_generated.cron.go'; git diff -- '*zz_generated.cron.go' | head -40; exit 1; fi

.PHONY: lint
lint: ## gofmt, go vet, and cronlint as a vet tool over the examples
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '/testdata/')); \
		if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) build -o bin/cronlint ./cmd/cronlint
	$(GO) vet -vettool=$(CURDIR)/bin/cronlint ./examples/...

.PHONY: test
test: verify/generate lint test/alerts ## everything CI checks: generated code, lint, alert rules, a bench smoke run, tests (race on the runtime), short fuzz runs
	BENCH_QUICK=1 $(GO) run ./runtime/internal/bench
	@# The registry and the runtime run once, under the race detector; every
	@# other package without it. Running them twice proved nothing the race
	@# run does not.
	$(GO) test -count=1 $$($(GO) list $(PKGS) | grep -v -E '^$(MODULE)/(registry|runtime)(/|$$)')
	$(GO) test -count=1 -race ./registry/... ./runtime/...
	@# Counted, not timed: Go 1.26's fuzz coordinator can fail a -fuzztime=10s
	@# run with "context deadline exceeded" when a worker is busy at the
	@# deadline (golang/go#75804, fixed in Go 1.27).
	$(GO) test -run='^$$' -fuzz='^FuzzParseCron$$' -fuzztime=100000x ./registry
	$(GO) test -run='^$$' -fuzz='^FuzzParseDirective$$' -fuzztime=200000x ./registry

.PHONY: test/alerts
test/alerts: ## check docs/alerts.yml and run its unit tests with promtool (Debian package prometheus)
	promtool check rules docs/alerts.yml
	promtool test rules docs/alerts_test.yml

.PHONY: test/long
test/long: ## the long differential run of Next against the brute-force oracle, and a 100,000-member family run once per member
	$(GO) test -count=1 -run Differential -timeout 30m ./registry -long
	$(GO) test -count=1 -run '^TestFamilyOfAHundredThousandMembersRunsEachOnceAtItsLocalTime$$' -timeout 30m ./runtime -long

.PHONY: demo
demo: ## run the example service: a private Redis, three replicas, the admin page
	@# Built, then run, not go run: go run exits 1 when Ctrl-C reaches it,
	@# and make would then report an error for a clean stop.
	$(GO) build -o bin/demo ./examples/service/demo
	bin/demo

.PHONY: chaos
chaos: ## kill, pause, skew and restart replicas and Redis; prove once-per-slot (CHAOS_REPLICAS, CHAOS_DURATION, CHAOS_SEED, CHAOS_FAULTS)
	@# go test prints its PASS/ok trailer after the test's output, so the
	@# harness writes its summary to a file and this prints it last.
	@rm -f $(CURDIR)/.chaos-summary; \
	$(GO) test ./runtime -run '^TestChaos$$' -chaos -count=1 -timeout 60m -v -chaos.summary=$(CURDIR)/.chaos-summary; rc=$$?; \
	cat $(CURDIR)/.chaos-summary 2>/dev/null; exit $$rc

.PHONY: bench
bench: ## compare belfry with robfig and asynq's Scheduler (BENCH_QUICK=1 for a smoke run)
	$(GO) run ./runtime/internal/bench

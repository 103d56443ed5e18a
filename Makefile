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
test: verify/generate ## everything CI checks: generated code, lint, alert rules, a bench smoke run, tests (race on the registry and the runtime), short fuzz runs
	@# Two lanes at once, each step printed whole when it ends, balanced
	@# so that neither waits long on the other. Lane 1 is the steps that
	@# mostly wait on real time (the bench smoke run's slots, windows and
	@# takeovers; the tests of WAIT_PKGS: private Redis servers and
	@# clusters, services that run for a few slots, a browser); lane 2 the
	@# ones that mostly compute (vet, the analyzers' and tools' tests,
	@# which build modules), then the race run, the longest step, which
	@# starts as soon as the checks are done.
	@$(MAKE) --no-print-directory -j2 --output-sync=target test/fuzz-then-bench test/checks-then-race

.PHONY: test/fuzz-then-bench
test/fuzz-then-bench: ## the fuzz runs, the bench smoke run, then the tests of WAIT_PKGS
	@$(MAKE) --no-print-directory -j1 test/fuzz test/bench-smoke test/unit-waits

.PHONY: test/checks-then-race
test/checks-then-race: ## lint, alert rules, the tests of neither RACE_PKGS nor WAIT_PKGS, then the race run, one after another
	@$(MAKE) --no-print-directory -j1 lint test/alerts test/unit-checks test/race

# WAIT_PKGS are the packages, outside RACE_PKGS, whose tests mostly wait
# on real time rather than on a core; make test runs them in the lane of
# the bench smoke run.
WAIT_PKGS := internal/redistest examples/service examples/service/demo runtime/admin runtime/metrics runtime/otelbelfry

# unit_pkgs lists $(PKGS) but those of the given short package paths.
unit_pkgs = $$($(GO) list $(PKGS) | grep -v -x -F $(foreach p,$(1),-e $(MODULE)/$(p)))

.PHONY: test/unit
test/unit: ## every package's tests but those of RACE_PKGS (those run under -race)
	@# -vet=off: lint ran go vet over every package, tests included, with
	@# more checks than go test's own subset; running them again costs a
	@# cold CI machine CPU and finds nothing new.
	$(GO) test -count=1 -vet=off $(call unit_pkgs,$(RACE_PKGS))

.PHONY: test/unit-checks
test/unit-checks: ## test/unit's share of lane 2: every package's tests but those of RACE_PKGS and WAIT_PKGS
	$(GO) test -count=1 -vet=off $(call unit_pkgs,$(RACE_PKGS) $(WAIT_PKGS))

.PHONY: test/unit-waits
test/unit-waits: ## test/unit's share of lane 1: the tests of WAIT_PKGS
	$(GO) test -count=1 -vet=off $(addprefix ./,$(WAIT_PKGS))

# RACE_PKGS run under the race detector: the packages whose code runs
# concurrently — the core, the engines and their internals, the parser
# shared by every goroutine — and the runtime's tests, which drive all of
# them (the admin, the metrics and the exporters included) from many
# goroutines. The rest (harnesses, the admin's and the metrics' own
# tests, the tools) run once without it: a race build of each of their
# test binaries and dependencies (OpenTelemetry's SDK among them) costs a
# cold CI machine minutes of CPU for code the runtime's race run already
# exercises.
RACE_PKGS := registry runtime runtime/core runtime/internal/lease runtime/internal/pipeline \
	runtime/internal/store runtime/internal/redisengine runtime/postgres

.PHONY: test/race
test/race: ## RACE_PKGS' tests, once, under the race detector
	@# Once, not also without -race: running them twice proved nothing the
	@# race run does not. -parallel above the core count: most of the
	@# runtime's tests wait on real time (a lease's TTL, a proxy's delay,
	@# a Sentinel failover), not on a core; three times the cores, not
	@# more, so that the tests judging lateness and lease trust are not
	@# starved (docs/testing.md).
	$(GO) test -count=1 -race -vet=off -parallel=6 $(addprefix ./,$(RACE_PKGS))

.PHONY: test/bench-smoke
test/bench-smoke: ## every benchmark step once, at small sizes: the harness runs end to end (figures not comparable with make bench)
	BENCH_QUICK=1 $(GO) run ./runtime/internal/bench

.PHONY: test/fuzz
test/fuzz: ## counted fuzz runs of the cron and directive parsers
	@# Counted, not timed: Go 1.26's fuzz coordinator can fail a -fuzztime=10s
	@# run with "context deadline exceeded" when a worker is busy at the
	@# deadline (golang/go#75804, fixed in Go 1.27).
	@# Short: make test's fuzzing is a smoke run that each parser still
	@# survives a stream of new inputs beyond its seeds (which the registry's
	@# tests run every time); one worker, so that the lane beside it keeps a
	@# core. Longer campaigns: go test -fuzz=... -fuzztime=10m ./registry.
	$(GO) test -run='^$$' -fuzz='^FuzzParseCron$$' -fuzztime=20000x -parallel=1 ./registry
	$(GO) test -run='^$$' -fuzz='^FuzzParseDirective$$' -fuzztime=30000x -parallel=1 ./registry

.PHONY: test/alerts
test/alerts: ## check docs/alerts.yml and run its unit tests with promtool (Debian package prometheus)
	promtool check rules docs/alerts.yml
	promtool test rules docs/alerts_test.yml

# The runtime's tests of faults that take real time to stage and recover
# from: each calls longTest, or (the repeated failovers) does more of them
# under -long. make test keeps a faster test of each guarantee, and
# docs/testing.md says which.
LONG_RACE_TESTS := TestSentinelFailoversWithReplicaAcksRunEverySlotOnce|TestSentinelFailoversWithReplicaAcksAloneRunNoSlotTwice|TestSentinelFailoverThenKillWithReplicaAcks|TestSentinelLostWritesWithoutReplicaAcksAreDetected|TestASlowLeaderHandsTheLeaseOver|TestASlowLeaderOfAFamilyHandsTheLeaseOver|TestEveryReplicaSlowDoesNotMakeTheLeaseFlap|TestFamilyLeaderCutOffMidSpike

.PHONY: test/long
test/long: ## the long differential run of Next against the brute-force oracle, a 100,000-member family run once per member, Redis Cluster resharding and masters killed, a checkpointed run through a worker's SIGKILL and SIGTERM, the example service's archive job through its timeout, a SIGTERM and a SIGKILL, the example service's replicas on a Redis Cluster through a leader's SIGKILL, a failover, a resharding and a master's SIGKILL, and the long fault tests under -race
	$(GO) test -count=1 -run Differential -timeout 30m ./registry -long
	$(GO) test -count=1 -run '^(TestFamilyOfAHundredThousandMembersRunsEachOnceAtItsLocalTime|TestRedisClusterReshardingAQueueSlotRunsEverySlotOnce|TestRedisClusterMastersKilledRunEverySlotOnce|TestCheckpointedRunSurvivesSIGKILLAndSIGTERMOnRedis)$$' -timeout 30m ./runtime -long
	$(GO) test -count=1 -run '^TestCheckpointedRunSurvivesSIGKILLAndSIGTERM$$' -timeout 5m ./runtime/postgres -long
	$(GO) test -count=1 -race -parallel=4 -run '^($(LONG_RACE_TESTS))$$' -timeout 30m ./runtime -long
	$(GO) test -count=1 -run '^(TestArchiveSurvivesTimeoutSIGTERMAndSIGKILLOn(Redis|Postgres)|TestServiceOnRedisClusterRunsEveryOccurrenceOnce)$$' -timeout 15m ./examples/service -long

.PHONY: demo
demo: ## run the example service: a private Redis, three replicas, the admin page
	@# Built, then run, not go run: go run exits 1 when Ctrl-C reaches it,
	@# and make would then report an error for a clean stop.
	$(GO) build -o bin/demo ./examples/service/demo
	bin/demo

DEMO_POSTGRES ?= postgres://postgres@127.0.0.1:5432/postgres

.PHONY: demo/postgres
demo/postgres: ## the demo on the local Postgres and River (DEMO_POSTGRES): a database of its own (belfry_demo, made afresh), three replicas, the admin page
	$(GO) build -o bin/demo ./examples/service/demo
	bin/demo -postgres '$(DEMO_POSTGRES)'

.PHONY: chaos
chaos: ## kill, pause, skew and restart replicas and Redis; prove once-per-slot (CHAOS_REPLICAS, CHAOS_DURATION, CHAOS_SEED, CHAOS_FAULTS; CHAOS_ENGINE=postgres for Postgres + River, CHAOS_ENGINE=cluster for a Redis Cluster)
	@# go test prints its PASS/ok trailer after the test's output, so the
	@# harness writes its summary to a file and this prints it last.
	@case "$(CHAOS_ENGINE)" in \
		""|redis) pkg=./runtime; run='^TestChaos$$';; \
		postgres) pkg=./runtime/postgres; run='^TestChaosPostgres$$';; \
		cluster) pkg=./runtime; run='^TestChaosCluster$$';; \
		*) echo "CHAOS_ENGINE=$(CHAOS_ENGINE): want redis (the default), postgres or cluster"; exit 2;; \
	esac; \
	rm -f $(CURDIR)/.chaos-summary; \
	$(GO) test $$pkg -run "$$run" -chaos -count=1 -timeout 60m -v -chaos.summary=$(CURDIR)/.chaos-summary; rc=$$?; \
	cat $(CURDIR)/.chaos-summary 2>/dev/null; exit $$rc

.PHONY: bench
bench: ## compare belfry with robfig and asynq's Scheduler (BENCH_QUICK=1 for a smoke run)
	$(GO) run ./runtime/internal/bench

# Every target works on a fresh machine with only Go installed: tools are
# fetched from the Go module proxy at pinned versions.
GO            ?= go
STATICCHECK_VERSION := v0.8.2
# Tools are built once into .bin (ignored by git), named with their version.
BIN           := $(CURDIR)/.bin
STATICCHECK   := $(BIN)/staticcheck-$(STATICCHECK_VERSION)
# mdatagen v0.159.0 is the newest the module proxy serves (it has none at the
# Collector's v0.165.0); its output builds against v0.165.0.
MDATAGEN_VERSION := v0.159.0
MDATAGEN      := $(BIN)/mdatagen-$(MDATAGEN_VERSION)
# Fuzzing is bounded by a count of executions, not a duration: with a
# duration, Go's fuzz coordinator can fail a clean run with "context
# deadline exceeded" (golang/go#75804, fixed in go1.27). 30000x is a few
# seconds per target on a 2-core machine.
FUZZTIME      ?= 30000x
BENCHTIME     ?= 1s
# Supported Go releases: the last two, as Go's own policy. The go line in
# go.mod is the lowest (1.26.0); `make compat` vets and tests with the newer.
GO_NEWER      ?= go1.27.4
# Nested modules keep heavy or peer dependencies out of the root go.mod (the
# root needs only the OpenTelemetry API and otelhttp): the demo with the SDK
# and exporters, otelbudget's SDK-based tests, the OTLP round-trip check with
# the Collector's pdata, and bench/ with the peer libraries; and out of each
# published module's go.mod, the tests-only modules beside it (test,
# natstest, interoptest: docs/modules.md). test and lint
# visit each of them, one target per module, so that `make -j2` runs two at
# once and a new module costs one `go vet` and one `go test` invocation.
SUBMODULES    := $(patsubst ./%/go.mod,%,$(shell find . -mindepth 2 -name go.mod -not -path './.git/*' -not -path './.bin/*' | sort))
# The Collector the OTLP check builds (otlpcheck/collector) is composition
# of the Collector's own components in one main.go: it has no tests (its
# test is otlpcheck's TestFleetMerge, which builds and runs it) and is
# vetted, not run under -race or staticcheck (either would analyse or
# rebuild the whole Collector: minutes, for one file of ours).
BUILD_ONLY    := $(filter %/otlpcheck/collector,$(SUBMODULES))
# bench/ runs its short mode here; `make bench` runs the comparison in full.
SHORT_MODULES := bench
# The root module's packages (make test names how many it ran), found in the
# source without the go command.
ROOT_PKGS     := $(sort $(dir $(shell find . -name '*.go' -not -path './.*' -not -path '*/testdata/*' $(foreach m,$(SUBMODULES),-not -path './$(m)/*'))))
# go test's timeout in the nested modules: a test that builds a program
# (tracedemo's make demo, otlpcheck's Collector) compiles it from an empty
# build cache, which on 2 loaded cores outlasted go test's default 10m.
TEST_TIMEOUT  ?= 30m
# How many targets `make ci` runs at once: tests wait on loopback and
# timers, so a second job overlaps one's waiting with the other's compiling.
CI_JOBS       ?= 2

.PHONY: generate all test test-all test-sims test-main test-sub test-oldest consumer-check compat demo fleetdemo bench bench-quick fuzz lint lint-files lint-cross fmt vet staticcheck staticcheck-root doc-check ci browser advise release-prepare release-check release-agree api-check

all: test

## test: the newcomer's command: go vet and every test of the root module
## (the libraries: deadline and its subpackages, deadlinehttp, otelbudget,
## budgetprop) with the race detector, vet compiling with -race so that the
## tests reuse its work. It needs no SDK, exporter, Collector or browser: a
## few minutes from empty Go caches on 2 cores (README.md, "Two commands").
test:
	@echo "make test: go vet -race and go test -race in the root module ($(words $(ROOT_PKGS)) packages); make test-all runs every module (what CI runs)"
	$(GO) vet -race ./...
	$(GO) test -race -count=1 ./...
	@echo "make test: passed: the root module's $(words $(ROOT_PKGS)) packages vetted and tested with -race; the nested modules, the oldest otelhttp, the browser test and the consumer check: make test-all"

## test-all: vet, then every test with the race detector, in every module,
## then the module-graph check of a program that adopts the libraries: what
## make ci runs.
test-all: vet test-main test-sims test-sub test-oldest consumer-check

## test-sims: the overload simulations at their full length (300 s and
## 60 s of virtual time), without the race detector, which slows them
## tenfold: under -race they model their short span (deadline/race_on_test.go).
test-sims:
	$(GO) test -count=1 -run 'TestLimiter(UniformBudgetsNoCollapse|MixedBudgetsNoDrift)' ./deadline

test-main:
	$(GO) test -race -count=1 ./...

test-sub: $(addprefix test-mod/,$(SUBMODULES))

# test-mod/DIR vets and tests the module in DIR: one target per module, so
# that make -j runs them side by side. vet runs with -race where the tests
# do: vet needs its dependencies compiled, and compiled as the race tests
# compile them, the tests reuse that work instead of compiling every
# dependency a second time (from a cold build cache, that second compile of
# the SDKs, gRPC and NATS was most of a module's time).
test-mod/%:
	@echo "== $*"
	@cd $* && $(GO) vet $(if $(filter $*,$(BUILD_ONLY)),,-race) ./...
	@$(if $(filter $*,$(BUILD_ONLY)),true,cd $* && $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(if $(filter $*,$(SHORT_MODULES)),-short) ./...)

# otlpcheck's TestFleetMerge builds the Collector (go build ./collector): its
# vet, first, compiles the Collector's packages once, and the test's build
# only links. Side by side, both would compile all of them.
test-mod/examples/tracedemo/otlpcheck: test-mod/examples/tracedemo/otlpcheck/collector

# budgetadvise's report test drives headless Chromium (Debian's chromium):
# installed before that module's tests, also under make -j.
test-sub: browser
test-mod/otelbudget/cmd/budgetadvise: browser

## browser: Debian's chromium for budgetadvise's browser test; nothing to do
## when /usr/bin/chromium exists. Outside CI a failed install only warns
## (the test then skips, saying why); under CI it fails.
browser:
	@[ -x /usr/bin/chromium ] || { apt-get update && apt-get install -y --no-install-recommends chromium; } || \
		{ [ -z "$$CI" ] && echo "make browser: chromium not installed: budgetadvise's browser test will skip"; }

## advise: the demo's learning runs (RUNS of them, ceilings opened to the
## budget) and one run of each scenario under the article's ceilings (the
## failed runs), exported, then read by budgetadvise: its advice, and the
## run report in advise-report.html.
RUNS ?= 1000
advise:
	cd examples/tracedemo && $(GO) run . -runs $(RUNS) > $(CURDIR)/advise-runs.json
	cd otelbudget/cmd/budgetadvise && $(GO) run . -report $(CURDIR)/advise-report.html $(CURDIR)/advise-runs.json

## test-oldest: otelbudget's SDK tests against the oldest otelhttp the root
## module supports (its go.mod's minimum; go.oldest.mod pins it).
test-oldest:
	cd otelbudget/test && $(GO) vet -modfile=go.oldest.mod ./... && $(GO) test -race -count=1 -modfile=go.oldest.mod ./...

## consumer-check: a scratch module per published module, importing all its
## library packages, gets none of its deny-list (the test-only dependencies:
## the NATS server, the SDK where the package does not need it, the xDS
## modules' code, exporters, ...); one importing only deadline and
## deadlinehttp gets no gRPC, OTel SDK, exporter, Prometheus or autoexport.
consumer-check:
	@./.ci/consumer-check

## compat: vet and test the root module with the newer supported Go release
## (fetched as a toolchain module from the Go module proxy). Only the root:
## the nested modules' code is the demo, tests and benchmarks, and their
## dependencies declare their own Go support; the race detector's run is
## test's.
compat:
	GOTOOLCHAIN=$(GO_NEWER) $(GO) vet ./...
	GOTOOLCHAIN=$(GO_NEWER) $(GO) test -count=1 -short ./...

## demo: the source article's agent run against loopback servers, exported to
## stdout. The demo is its own module (it needs the SDK and exporters).
demo:
	@cd examples/tracedemo && $(GO) run .

## fleetdemo: the fleet loop on loopback: a Collector with the deadlinebudget connector, 50 clients, a cold client picking up the fleet's ceilings over OpAMP (docs/fleet.md).
fleetdemo:
	@cd examples/fleetdemo && $(GO) run .

## bench: hot-path micro-benchmarks, then the side-by-side comparison with the peers.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...
	@if [ -d bench ]; then cd bench && $(GO) run ./cmd/compare; fi

bench-quick:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 100ms ./...
	@if [ -d bench ]; then cd bench && $(GO) run ./cmd/compare -quick; fi

## fuzz: every fuzz target in every module (bench/ excepted: it fuzzes
## nothing of ours), FUZZTIME executions each (a count: see FUZZTIME). The
## targets are found in the source, without building each package to list
## them; their seed corpora also run, as plain tests, in make test.
fuzz:
	@set -e; for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u | grep -v '^\./bench'); do \
		for f in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$dir/*_test.go); do \
			echo "== $$dir $$f"; \
			(cd $$dir && $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) .); \
		done; \
	done

vet:
	$(GO) vet ./...

fmt:
	gofmt -w .

## lint: no tracked file over 1 MiB unless allowed (.ci/large-files), gofmt,
## vet (also for Windows and macOS), staticcheck (pinned, from the module
## proxy, built once) in every module.
lint: lint-files vet lint-cross staticcheck

lint-files:
	@./.ci/large-files
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

lint-cross:
	GOOS=windows $(GO) vet ./...
	GOOS=darwin $(GO) build ./...

staticcheck: staticcheck-root $(addprefix staticcheck-mod/,$(filter-out $(BUILD_ONLY),$(SUBMODULES)))

staticcheck-root: $(STATICCHECK)
	$(STATICCHECK) ./... ./.ci/doccheck

staticcheck-mod/%: $(STATICCHECK)
	@echo "== staticcheck $*"
	@cd $* && $(STATICCHECK) ./...

$(STATICCHECK):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@mv $(BIN)/staticcheck $@

## generate: the Collector components' metadata, lifecycle tests and
## telemetry from their metadata.yaml (mdatagen); the output is committed.
generate: $(MDATAGEN)
	cd otelbudget/budgetconnector && $(MDATAGEN) metadata.yaml
	cd otelbudget/budgetconnector/opampextension && $(MDATAGEN) metadata.yaml

# Built in a scratch module (go install would look up the module's
# deprecation, which the proxy does not answer for mdatagen).
$(MDATAGEN):
	@mkdir -p $(BIN)/mdatagen-mod
	cd $(BIN)/mdatagen-mod && printf 'module tools\n\ngo 1.26.0\n\nrequire go.opentelemetry.io/collector/cmd/mdatagen $(MDATAGEN_VERSION)\n' >go.mod && \
		GOFLAGS=-mod=mod $(GO) build -o $@ go.opentelemetry.io/collector/cmd/mdatagen

## doc-check: every shell command in README.md and docs/ works as written
## from where it says to run it (.ci/doccheck).
doc-check:
	$(GO) vet ./.ci/doccheck
	$(GO) test -count=1 ./.ci/doccheck
	$(GO) run ./.ci/doccheck

## Releases (docs/modules.md, "Releasing"): versions.yaml groups the
## modules into release sets; .ci/release, a module of its own (so that
## golang.org/x/mod and x/exp never enter a published go.mod), reads it and
## every go.mod. A new module is a line in versions.yaml, not a change here.
RELEASE := $(GO) run -C .ci/release .

## release-prepare: VERSION=vX.Y.Z [SET=name] [TAG=1]: set the module set's
## version in versions.yaml, require it in every go.mod that requires one of
## the set's modules, and print the tags (v…, deadline/deadlinegrpc/v…, …);
## with TAG=1, once the changes are committed, create them at HEAD.
release-prepare:
	@[ -n "$(VERSION)" ] || { echo "make release-prepare: say VERSION=vX.Y.Z" >&2; exit 2; }
	$(RELEASE) prepare -version $(VERSION) $(if $(SET),-set $(SET)) $(if $(TAG),-tag)

## release-check: [REV=commit]: every released module of versions.yaml, at
## the version it declares, from zips of the commit (HEAD) in a file module
## proxy, fetched by a scratch module outside the repository with an empty
## module cache and GOWORK=off: each module on its own, then all of them, a
## program importing every library package built, every command installed
## with go install …@version.
release-check:
	$(RELEASE) check $(if $(REV),-rev $(REV))

## release-agree: versions.yaml, every go.mod (and go.oldest.mod),
## CHANGELOG.md and the tags tell one story: the module list, the versions
## required (never a pseudo-version), the release notes of the set's
## version naming its modules, dated only once tagged, links to tags that
## exist.
release-agree:
	$(RELEASE) agree

## api-check: every released package against its module's last release tag
## (golang.org/x/exp/apidiff); a change the version in versions.yaml does not
## allow fails. Modules with no release tag yet are reported as such.
api-check:
	$(RELEASE) api

## ci: what CI gates: lint, every module's tests (test-all), the newer Go
## release, bounded fuzzing, the documented commands, one release story,
## the release as a user would fetch it and the API against the last
## release; CI_JOBS targets at a time.
ci:
	$(MAKE) -j$(CI_JOBS) --output-sync=target lint test-all compat fuzz doc-check release-agree release-check api-check

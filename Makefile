# Every target works on a fresh machine with only Go installed: tools are
# fetched from the Go module proxy at pinned versions.
GO            ?= go
STATICCHECK   := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME      ?= 10s
BENCHTIME     ?= 1s
# Supported Go releases: the last two, as Go's own policy. The go line in
# go.mod is the lowest (1.26.0); `make compat` vets and tests with the newer.
GO_NEWER      ?= go1.27.4
# Nested modules keep heavy or peer dependencies out of the root go.mod (the
# root needs only the OpenTelemetry API and otelhttp): the demo with the SDK
# and exporters, otelbudget's SDK-based tests, the OTLP round-trip check with
# the Collector's pdata, and bench/ with the peer libraries. test and lint
# visit each of them.
SUBMODULES    := $(patsubst ./%/go.mod,%,$(shell find . -mindepth 2 -name go.mod -not -path './.git/*' | sort))

.PHONY: all test test-main test-sub test-oldest consumer-check compat demo bench bench-quick fuzz lint fmt vet staticcheck ci

all: test

## test: vet, then every test with the race detector, in every module, then
## the module-graph check of a program that adopts the libraries.
test: vet test-main test-sub test-oldest consumer-check

test-main:
	$(GO) test -race -count=1 ./...

# bench/ runs its short mode here; `make bench` runs the comparison in full.
# The Collector the OTLP check builds (otlpcheck/collector) has no tests of
# its own: otlpcheck's TestFleetMerge builds and runs it, so here it is only
# vetted (a -race build of the whole Collector would cost two minutes).
test-sub:
	@set -e; for m in $(SUBMODULES); do \
		short=; case $$m in bench) short=-short;; esac; \
		echo "== $$m"; \
		case $$m in */otlpcheck/collector) (cd $$m && $(GO) vet ./...); continue;; esac; \
		(cd $$m && $(GO) vet ./... && $(GO) test -race -count=1 $$short ./...); \
	done

## test-oldest: otelbudget's SDK tests against the oldest otelhttp the root
## module supports (its go.mod's minimum; go.oldest.mod pins it).
test-oldest:
	cd otelbudget/test && $(GO) vet -modfile=go.oldest.mod ./... && $(GO) test -race -count=1 -modfile=go.oldest.mod ./...

## consumer-check: a scratch module importing only deadline and deadlinehttp
## gets no gRPC, OTel SDK, exporter, Prometheus or autoexport module.
consumer-check:
	@./.ci/consumer-check

## compat: vet and test the root module with the newer supported Go release
## (fetched as a toolchain module from the Go module proxy).
compat:
	GOTOOLCHAIN=$(GO_NEWER) $(GO) vet ./...
	GOTOOLCHAIN=$(GO_NEWER) $(GO) test -count=1 ./...

## demo: the source article's agent run against loopback servers, exported to
## stdout. The demo is its own module (it needs the SDK and exporters).
demo:
	@cd examples/tracedemo && $(GO) run .

## bench: hot-path micro-benchmarks, then the side-by-side comparison with the peers.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...
	@if [ -d bench ]; then cd bench && $(GO) run ./cmd/compare; fi

bench-quick:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 100ms ./...
	@if [ -d bench ]; then cd bench && $(GO) run ./cmd/compare -quick; fi

## fuzz: every fuzz target in the main module for FUZZTIME each.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

vet:
	$(GO) vet ./...

fmt:
	gofmt -w .

## lint: no tracked file over 1 MiB unless allowed (.ci/large-files), gofmt check, vet (also for Windows and macOS) and staticcheck
## (pinned, from the module proxy).
lint: vet
	@./.ci/large-files
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	GOOS=windows $(GO) vet ./...
	GOOS=darwin $(GO) build ./...
	$(GO) run $(STATICCHECK) ./...
	@set -e; for m in $(SUBMODULES); do \
		echo "== staticcheck $$m"; (cd $$m && $(GO) run $(STATICCHECK) ./...); \
	done

## ci: what CI gates: lint, the tests, the newer Go release, bounded fuzzing.
ci: lint test compat
	$(MAKE) fuzz FUZZTIME=15s

# Every target works on a fresh machine with only Go installed: tools are
# fetched from the Go module proxy at pinned versions.
GO            ?= go
STATICCHECK   := honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME      ?= 10s
BENCHTIME     ?= 1s
# Nested modules (bench/, the OTLP round-trip check) keep heavy or peer
# dependencies out of the main go.mod; test and lint visit each of them.
SUBMODULES    := $(patsubst ./%/go.mod,%,$(shell find . -mindepth 2 -name go.mod -not -path './.git/*' | sort))

.PHONY: all test test-main test-sub demo bench bench-quick fuzz lint fmt vet staticcheck ci

all: test

## test: vet, then every test with the race detector, in every module.
test: vet test-main test-sub

test-main:
	$(GO) test -race -count=1 ./...

test-sub:
	@set -e; for m in $(SUBMODULES); do \
		echo "== $$m"; (cd $$m && $(GO) vet ./... && $(GO) test -race -count=1 -short ./...); \
	done

## demo: the source article's agent run against loopback servers, exported to stdout.
demo:
	$(GO) run ./examples/tracedemo

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

## lint: gofmt check, vet and staticcheck (pinned, from the module proxy).
lint: vet
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) run $(STATICCHECK) ./...
	@set -e; for m in $(SUBMODULES); do \
		echo "== staticcheck $$m"; (cd $$m && $(GO) run $(STATICCHECK) ./...); \
	done

## ci: what CI gates: lint, the tests, bounded fuzzing.
ci: lint test
	$(MAKE) fuzz FUZZTIME=15s

package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/deadlinebudget/budget/deadline"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// playInMemory plays scenario name with seed in memory: the providers'
// real handlers (budget middleware and otelhttp server spans included)
// behind memTransport. Call it inside a synctest bubble, where every
// duration comes out exact.
func playInMemory(t *testing.T, name string, seed uint64) (runRecord, *providers, *tracetest.SpanRecorder, error) {
	t.Helper()
	sc, err := findScenario(name)
	require.NoError(t, err)
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	ps := newProviders(sc)
	mem := memTransport{handlers: map[string]http.Handler{}}
	urls := map[string]string{}
	for _, s := range agentPlan() {
		host := s.name + ".test"
		mem.handlers[host] = ps.byStep[s.name].handler(tp)
		urls[s.name] = "http://" + host
	}
	rec, planErr := play(context.Background(), sc, seed, sc.budget, tp, mem, urls)
	return rec, ps, sr, planErr
}

// renderPlain renders the waterfall and the summary without colour.
func renderPlain(t *testing.T, rec runRecord) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, writeWaterfall(&b, rec, false))
	require.NoError(t, writeSummary(&b, rec, false))
	return b.String()
}

// TestWaterfallGolden renders the ok scenario with the article's seed from
// a real run of the plan in virtual time, so that every duration, and so
// every bar, is the same on every machine. Regenerate with
// go test ./examples/tracedemo -run WaterfallGolden -update.
func TestWaterfallGolden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, _, _, err := playInMemory(t, "ok", defaultSeed)
		require.NoError(t, err)
		got := renderPlain(t, rec)
		path := filepath.Join("testdata", "ok.golden")
		if *update {
			require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, string(want), got)
	})
}

// callLines summarises a recorded call as "step verdict reason attempts".
func callLines(rec runRecord) []string {
	var out []string
	for _, c := range rec.Calls {
		out = append(out, fmt.Sprintf("%s %s %s %d", c.Name, c.Verdict, c.Reason, c.Started))
	}
	return out
}

// scenarioCases states, independently of the scenarios' own declarations,
// how each scenario must end: each call's verdict, stop reason and
// attempts, and how many requests each provider received.
var scenarioCases = []struct {
	name     string
	calls    []string
	requests map[string]int
}{
	{"ok", []string{"search ok success 1", "fetch ok success 2", "extract ok success 1"},
		map[string]int{"search": 1, "fetch": 2, "extract": 1}},
	{"tight", []string{"search ok success 1", "fetch ok success 2", "extract deadline_too_small deadline_exceeded 1"},
		map[string]int{"search": 1, "fetch": 2, "extract": 1}},
	{"slow", []string{"search ok success 1", "fetch operation_too_slow attempts_exhausted 3"},
		map[string]int{"search": 1, "fetch": 3, "extract": 0}},
	{"ratelimited", []string{"search ok success 1", "fetch throttled retry_after_exceeds_budget 2"},
		map[string]int{"search": 1, "fetch": 2, "extract": 0}},
	{"flaky", []string{"search ok success 1", "fetch ok success 3", "extract ok success 2"},
		map[string]int{"search": 1, "fetch": 3, "extract": 2}},
	{"refused", []string{"search deadline_too_small refused 0"},
		map[string]int{"search": 0, "fetch": 0, "extract": 0}},
}

// requestCounts returns how many requests each provider received.
func requestCounts(ps *providers) map[string]int {
	out := map[string]int{}
	for name, p := range ps.byStep {
		out[name] = len(p.requests())
	}
	return out
}

// TestScenariosInMemory plays every scenario in virtual time, where the
// timing is exact, so it can also check the leases the budget granted.
func TestScenariosInMemory(t *testing.T) {
	for _, tc := range scenarioCases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec, ps, _, _ := playInMemory(t, tc.name, defaultSeed)
				assert.Equal(t, tc.calls, callLines(rec))
				assert.Equal(t, tc.requests, requestCounts(ps))
				sc, err := findScenario(tc.name)
				require.NoError(t, err)
				assert.NoError(t, check(sc, rec, ps))
				for _, c := range rec.Calls {
					for _, a := range c.Attempts {
						assert.LessOrEqual(t, a.Granted, c.Ceiling, "%s #%d: a lease never exceeds its ceiling", c.Name, a.Number)
						assert.Less(t, a.Start+a.Granted, rec.Budget-rec.Floor+time.Nanosecond, "%s #%d: a lease never reaches into the floor", c.Name, a.Number)
					}
				}
				assert.Greater(t, rec.Left, time.Duration(0), "every scenario ends inside its budget")
			})
		})
	}
}

// TestScenarioTimingInMemory checks, in virtual time, the grants that make
// each scenario what it is.
func TestScenarioTimingInMemory(t *testing.T) {
	t.Run("ok: fetch's first attempt runs its whole ceiling", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec, _, _, err := playInMemory(t, "ok", defaultSeed)
			require.NoError(t, err)
			f := rec.Calls[1]
			require.Len(t, f.Attempts, 2)
			assert.Equal(t, 100*time.Millisecond, f.Attempts[0].Granted)
			assert.Equal(t, deadline.LimitCeiling, f.Attempts[0].LimitedBy)
			assert.Equal(t, deadline.EndedAttemptTimeout, f.Attempts[0].EndedBy)
			assert.Equal(t, 100*time.Millisecond, f.Attempts[0].Used)
			require.Len(t, f.Waits, 1)
			assert.Equal(t, f.Attempts[0].Start+f.Attempts[0].Used+f.Waits[0].Delay, f.Attempts[1].Start, "the retry starts when the backoff ends")
		})
	})
	t.Run("tight: extract's lease is cut by the deadline, which ends it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec, ps, _, err := playInMemory(t, "tight", defaultSeed)
			require.Error(t, err)
			assert.ErrorIs(t, err, deadline.ErrDeadlineReached)
			x := rec.Calls[2]
			require.Len(t, x.Attempts, 1)
			a := x.Attempts[0]
			assert.Equal(t, deadline.LimitDeadline, a.LimitedBy)
			assert.Less(t, a.Granted, workExtract, "the lease is shorter than the work")
			assert.Equal(t, rec.Budget-rec.Floor, a.Start+a.Granted, "the lease ends at the deadline less the floor")
			assert.Equal(t, deadline.EndedDeadline, a.EndedBy)
			seen := ps.byStep["extract"].requests()
			require.Len(t, seen, 1)
			roundedUp := (a.Granted + time.Millisecond - 1).Truncate(time.Millisecond)
			assert.Equal(t, roundedUp, seen[0].Budget, "the provider was told the lease in whole milliseconds, rounded up")
		})
	})
	t.Run("ratelimited: the first Retry-After is waited in full", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec, _, _, err := playInMemory(t, "ratelimited", defaultSeed)
			require.Error(t, err)
			assert.ErrorIs(t, err, deadline.ErrRetryAfterExceedsBudget)
			f := rec.Calls[1]
			require.Len(t, f.Waits, 2)
			assert.Equal(t, time.Second, f.Waits[0].Delay)
			assert.Equal(t, deadline.SourceRetryAfter, f.Waits[0].Source)
			assert.True(t, f.Waits[0].Fits)
			assert.Equal(t, 5*time.Second, f.Waits[1].Delay)
			assert.False(t, f.Waits[1].Fits)
			assert.Equal(t, f.Attempts[0].Start+f.Attempts[0].Used+time.Second, f.Attempts[1].Start)
		})
	})
	t.Run("refused: nothing is sent", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec, _, sr, err := playInMemory(t, "refused", defaultSeed)
			require.Error(t, err)
			assert.ErrorIs(t, err, deadline.ErrRefused)
			assert.Empty(t, rec.Calls[0].Attempts)
			for _, s := range sr.Ended() {
				assert.NotContains(t, []string{"client", "server"}, s.SpanKind().String(), "span %s: nothing went on the wire", s.Name())
			}
		})
	})
}

// TestWaterfallColour: colour codes only when asked for.
func TestWaterfallColour(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, _, _, err := playInMemory(t, "tight", defaultSeed)
		require.Error(t, err)
		var plain, colour bytes.Buffer
		require.NoError(t, writeWaterfall(&plain, rec, false))
		require.NoError(t, writeSummary(&plain, rec, false))
		require.NoError(t, writeWaterfall(&colour, rec, true))
		require.NoError(t, writeSummary(&colour, rec, true))
		assert.NotContains(t, plain.String(), "\x1b[")
		assert.Contains(t, colour.String(), ansiRed+"deadline_too_small")
		assert.Contains(t, colour.String(), ansiGreen+"ok")
	})
}

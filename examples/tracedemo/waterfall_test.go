package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
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
	out, err := executeInMemory(context.Background(), sc, seed, sc.budget, tp, metricnoop.NewMeterProvider())
	require.NoError(t, err)
	return out.rec, out.ps, sr, out.stepErr
}

// renderPlain renders the waterfall and the summary without colour.
func renderPlain(t *testing.T, rec runRecord) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, writeWaterfall(&b, rec, false))
	require.NoError(t, writeSummary(&b, rec, false))
	return b.String()
}

// TestWaterfallGolden renders scenarios with the article's seed from a real
// run of the plan in virtual time, so that every duration, and so every bar,
// is the same on every machine: ok (the article's run), tight (a lease cut
// by the deadline, then a refusal), slow (a step not run) and refused.
// Regenerate with go test ./examples/tracedemo -run WaterfallGolden -update.
func TestWaterfallGolden(t *testing.T) {
	for _, name := range []string{"ok", "tight", "slow", "refused"} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec, _, _, _ := playInMemory(t, name, defaultSeed)
				got := renderPlain(t, rec)
				path := filepath.Join("testdata", name+".golden")
				if *update {
					require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
				}
				want, err := os.ReadFile(path)
				require.NoError(t, err)
				assert.Equal(t, string(want), got)
			})
		})
	}
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
// attempts, the steps never started, and how many requests each provider
// received.
var scenarioCases = []struct {
	name     string
	calls    []string
	notRun   []string
	requests map[string]int
}{
	{"ok", []string{"search ok success 1", "fetch ok success 2", "extract ok success 1"}, nil,
		map[string]int{"search": 1, "fetch": 2, "extract": 1}},
	{"tight", []string{"search ok success 1", "fetch deadline_too_small deadline_exceeded 1", "extract deadline_too_small refused 0"}, nil,
		map[string]int{"search": 1, "fetch": 1, "extract": 0}},
	{"slow", []string{"search ok success 1", "fetch operation_too_slow attempts_exhausted 3"}, []string{"extract after fetch: attempts_exhausted"},
		map[string]int{"search": 1, "fetch": 3, "extract": 0}},
	{"ratelimited", []string{"search ok success 1", "fetch throttled retry_after_exceeds_budget 2", "extract ok success 1"}, nil,
		map[string]int{"search": 1, "fetch": 2, "extract": 1}},
	{"flaky", []string{"search ok success 1", "fetch ok success 3", "extract ok success 2"}, nil,
		map[string]int{"search": 1, "fetch": 3, "extract": 2}},
	{"refused", []string{"search deadline_too_small refused 0", "fetch deadline_too_small refused 0", "extract deadline_too_small refused 0"}, nil,
		map[string]int{"search": 0, "fetch": 0, "extract": 0}},
}

// notRunLines summarises the steps never started as "step after step:
// cause".
func notRunLines(rec runRecord) []string {
	var out []string
	for _, n := range rec.NotRun {
		out = append(out, fmt.Sprintf("%s after %s: %s", n.Name, n.After, n.Cause))
	}
	return out
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
// timing is exact: each ends exactly as designed, whatever the machine's
// load, and the leases the budget granted can be checked too.
func TestScenariosInMemory(t *testing.T) {
	for _, tc := range scenarioCases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec, ps, sr, _ := playInMemory(t, tc.name, defaultSeed)
				assert.Equal(t, tc.calls, callLines(rec))
				assert.Equal(t, tc.notRun, notRunLines(rec))
				assert.Equal(t, tc.requests, requestCounts(ps))
				sc, err := findScenario(tc.name)
				require.NoError(t, err)
				assert.NoError(t, check(sc, rec, ps))
				// What the loopback runs check holds here too, exactly.
				assertGuarantees(t, transportHTTP, sc, rec, ps, sr.Ended())
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
	t.Run("tight: fetch's lease is cut by the deadline, which ends it, then extract is refused", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec, ps, _, err := playInMemory(t, "tight", defaultSeed)
			require.Error(t, err)
			assert.ErrorIs(t, err, deadline.ErrDeadlineReached, "fetch's error is in the joined errors")
			assert.ErrorIs(t, err, deadline.ErrRefused, "extract's error is in the joined errors")
			require.Len(t, rec.Calls, 3)
			f := rec.Calls[1]
			require.Len(t, f.Attempts, 1)
			a := f.Attempts[0]
			assert.Equal(t, deadline.LimitDeadline, a.LimitedBy)
			assert.Equal(t, 80*time.Millisecond, a.Granted, "110ms budget, less search's 10ms, less the 20ms floor")
			assert.Less(t, a.Granted, f.Ceiling, "the lease is shorter than the ceiling")
			assert.Less(t, a.Granted, workFetchTight, "the lease is shorter than the work")
			assert.Equal(t, rec.Budget-rec.Floor, a.Start+a.Granted, "the lease ends at the deadline less the floor")
			assert.Equal(t, deadline.EndedDeadline, a.EndedBy)
			assert.Equal(t, a.Granted, a.Used, "the deadline ended it at the end of its lease")
			seen := ps.byStep["fetch"].requests()
			require.Len(t, seen, 1)
			assert.Equal(t, 80*time.Millisecond, seen[0].Budget, "the provider was told the lease")

			x := rec.Calls[2]
			assert.Equal(t, deadline.ReasonRefused, x.Reason)
			assert.Empty(t, x.Attempts, "refused before the first attempt")
			assert.Equal(t, rec.Budget-rec.Floor, x.Start, "extract is asked for when fetch ends")
			assert.Equal(t, rec.Floor, x.Left, "exactly the floor is left, and the floor is kept back")
			assert.Empty(t, ps.byStep["extract"].requests())
			assert.Empty(t, rec.NotRun)
		})
	})
	t.Run("slow: the plan stops at fetch, extract is not run", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec, ps, _, err := playInMemory(t, "slow", defaultSeed)
			require.Error(t, err)
			assert.ErrorIs(t, err, deadline.ErrAttemptsExhausted)
			assert.Len(t, rec.Calls, 2)
			assert.Equal(t, []notRunRecord{{Name: "extract", After: "fetch", Cause: "attempts_exhausted"}}, rec.NotRun)
			assert.Empty(t, ps.byStep["extract"].requests())
			assert.Equal(t, rec.Calls[1].End, rec.Used, "the run ends when fetch gives up")
		})
	})
	t.Run("ratelimited: the first Retry-After is waited in full", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec, _, _, err := playInMemory(t, "ratelimited", defaultSeed)
			require.Error(t, err)
			assert.ErrorIs(t, err, deadline.ErrRetryAfterExceedsBudget)
			f := rec.Calls[1]
			assertThrottledWaits(t, f)
			x := rec.Calls[2]
			require.Len(t, x.Attempts, 1, "throttled is a budget stop: extract still runs")
			assert.Equal(t, f.End, x.Start, "extract starts as soon as fetch gives up, without waiting the 5s")
			assert.Equal(t, deadline.LimitCeiling, x.Attempts[0].LimitedBy, "what is left is far more than extract's ceiling")
			assert.Equal(t, workExtract, x.Attempts[0].Used)
		})
	})
	t.Run("refused: every step is refused, nothing is sent", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rec, _, sr, err := playInMemory(t, "refused", defaultSeed)
			require.Error(t, err)
			assert.ErrorIs(t, err, deadline.ErrRefused)
			require.Len(t, rec.Calls, 3, "every step is asked for, and refused")
			for _, c := range rec.Calls {
				assert.Empty(t, c.Attempts, c.Name)
				assert.Equal(t, rec.Budget, c.Left, "%s: a refusal spends nothing", c.Name)
			}
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

		rec, _, _, err = playInMemory(t, "slow", defaultSeed)
		require.Error(t, err)
		colour.Reset()
		require.NoError(t, writeSummary(&colour, rec, true))
		assert.Contains(t, colour.String(), "extract="+ansiDim+"not_run"+ansiReset)
	})
}

// TestCheckSaysWhyAStepDidNotRun: when a scenario expects a step that the
// plan never started, check says which step stopped the plan, and why.
func TestCheckSaysWhyAStepDidNotRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, ps, _, err := playInMemory(t, "slow", defaultSeed)
		require.Error(t, err)
		sc, err := findScenario("slow")
		require.NoError(t, err)
		require.NoError(t, check(sc, rec, ps))

		sc.want = append(sc.want, stepWant{"extract", expect{verdict: deadline.VerdictOK, reason: deadline.ReasonSuccess, attempts: 1, requests: 1}})
		err = check(sc, rec, ps)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "extract: did not run (fetch stopped the plan with attempts_exhausted)")
		assert.Contains(t, err.Error(), "extract: the provider received 0 requests, want 1")
	})
}

// assertThrottledWaits checks fetch's waits in the ratelimited scenario,
// the same over HTTP (Retry-After) and gRPC (pushback): the first, 1s, fits
// and is waited in full; the second, 5s, does not fit.
func assertThrottledWaits(t *testing.T, f callRecord) {
	t.Helper()
	require.Len(t, f.Waits, 2)
	assert.Equal(t, time.Second, f.Waits[0].Delay)
	assert.Equal(t, deadline.SourceRetryAfter, f.Waits[0].Source)
	assert.True(t, f.Waits[0].Fits)
	assert.Equal(t, 5*time.Second, f.Waits[1].Delay)
	assert.False(t, f.Waits[1].Fits)
	assert.Equal(t, f.Attempts[0].Start+f.Attempts[0].Used+time.Second, f.Attempts[1].Start)
}

// TestWaterfallColumnsFitTheirContent: every row's bar starts in the same
// column as the axis, over HTTP and over gRPC, whose codes
// ("gRPC ResourceExhausted") are longer than any HTTP status: the text
// columns are as wide as their longest cell.
func TestWaterfallColumnsFitTheirContent(t *testing.T) {
	for _, transport := range []string{transportHTTP, transportGRPC} {
		for _, name := range []string{"ratelimited", "flaky"} {
			t.Run(transport+"/"+name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					play := playInMemory
					if transport == transportGRPC {
						play = playGRPCInMemory
					}
					rec, _, _, _ := play(t, name, defaultSeed)
					lines := strings.Split(renderPlain(t, rec), "\n")
					header := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "step ") })
					require.GreaterOrEqual(t, header, 0, "the waterfall has a header")
					axisAt := strings.Index(lines[header], "0ms")
					rows := 0
					for _, l := range lines[header+1:] {
						if l == "" {
							break
						}
						assert.Equal(t, axisAt, strings.Index(l, "|"), "the bar starts under the axis:\n%s\n%s", lines[header], l)
						rows++
					}
					assert.Greater(t, rows, 3)
					if transport == transportGRPC && name == "ratelimited" {
						assert.Contains(t, strings.Join(lines, "\n"), "gRPC ResourceExhausted |", "the longest cell, a space, then the bar")
					}
				})
			})
		}
	}
}

// The axis's ticks are round, as the run report's: equally spaced by 1, 2
// or 5 times a power of ten (it was 0ms 3ms 5ms 8ms 10ms for 10ms), each
// label within the bar, none past the budget.
func TestAxisTicksRound(t *testing.T) {
	for _, budget := range []time.Duration{10 * time.Millisecond, 110 * time.Millisecond, time.Second, 3 * time.Second} {
		line := axis(budget)
		var vals []time.Duration
		for _, f := range strings.Fields(line) {
			d, err := time.ParseDuration(f)
			require.NoError(t, err, "%q in %q", f, line)
			vals = append(vals, d)
		}
		require.GreaterOrEqual(t, len(vals), 3, "%s: %q", budget, line)
		step := vals[1] - vals[0]
		mant := float64(step) / math.Pow(10, math.Floor(math.Log10(float64(step))))
		assert.True(t, slices.ContainsFunc([]float64{1, 2, 5}, func(m float64) bool { return math.Abs(m-mant) < 1e-9 }),
			"%s: the step %s is 1, 2 or 5 times a power of ten: %q", budget, step, line)
		for k := 1; k < len(vals); k++ {
			assert.Equal(t, step, vals[k]-vals[k-1], "%s: equally spaced: %q", budget, line)
		}
		assert.LessOrEqual(t, vals[len(vals)-1], budget, "%s: %q", budget, line)
		assert.LessOrEqual(t, len(line), barWidth+2, "%s: within the bar: %q", budget, line)
	}
}

package main

import (
	"bytes"
	"context"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline/learn"
)

// memStage is a stager that serves sc's providers in memory (memTransport):
// inside a synctest bubble every duration is exact.
func memStage(ctx context.Context, sc scenario, tp trace.TracerProvider) (player, func(context.Context) error, error) {
	ps := newProviders(sc)
	mem := memTransport{handlers: map[string]http.Handler{}}
	urls := map[string]string{}
	for _, s := range agentPlan() {
		host := s.name + ".test"
		h, err := ps.byStep[s.name].handler(tp)
		if err != nil {
			return nil, nil, err
		}
		mem.handlers[host] = h
		urls[s.name] = "http://" + host
	}
	play := func(ctx context.Context, seed uint64, tp trace.TracerProvider, mp metric.MeterProvider, o playOptions) (runRecord, error) {
		return playWith(ctx, sc, seed, sc.budget, tp, mp, mem, urls, o)
	}
	return play, func(context.Context) error { return nil }, nil
}

// The quantile function that the suggestion is checked against agrees
// with 10^6 draws of the distribution.
func TestHeavyTailQuantileMatchesDraws(t *testing.T) {
	r := mrand.New(mrand.NewPCG(1, 2))
	xs := make([]time.Duration, 1_000_000)
	for i := range xs {
		xs[i] = fetchLatency.draw(r)
	}
	slices.Sort(xs)
	for _, q := range []float64{0.5, 0.9, 0.99} {
		emp := xs[int(math.Ceil(q*float64(len(xs))))-1]
		assert.InEpsilon(t, float64(fetchLatency.quantile(q)), float64(emp), 0.02, "p%g", q*100)
	}
	p99 := fetchLatency.quantile(0.99)
	assert.InDelta(t, 226*time.Millisecond, p99, float64(3*time.Millisecond), "the documented p99")
	assert.InDelta(t, 0.27, 1-fetchLatency.cdf(100*time.Millisecond), 0.01, "the documented share above the article's ceiling")
}

// After 2 000 runs the suggested fetch ceiling is within ±10% of the true
// p99 × margin, and re-running with the suggested ceilings cuts the runs
// with operation_too_slow and the time wasted on attempts a limit cut,
// compared with the article's static 100ms.
func TestRunsSuggestsFetchCeilingAndBeatsStatic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spans := &spanBuffer{}
		rep, err := runMany(t.Context(), runsOptions{
			n: 2000, parallel: 1, seed: defaultSeed, stage: memStage,
			tp: sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)), mp: metricnoop.NewMeterProvider(), spans: spans.snapshot,
		})
		require.NoError(t, err)

		fetch := rep.Suggestions["fetch"]
		want := float64(fetchLatency.quantile(learn.DefaultQuantile)) * learn.DefaultMargin
		assert.InEpsilon(t, want, float64(fetch.Ceiling), 0.10, "fetch ceiling %s, true p99 × 1.2 = %s", fetch.Ceiling, time.Duration(want))
		assert.False(t, fetch.Censored)
		assert.GreaterOrEqual(t, fetch.Samples, uint64(2000))
		assert.True(t, rep.StaticNote["fetch"].Censored, "the static 100ms ceiling hides fetch's p99")
		require.NoError(t, rep.BudgetErr)
		assert.Greater(t, rep.Budget.Budget, time.Duration(0))

		assert.Equal(t, 2000, rep.Static.Runs)
		assert.Equal(t, 2000, rep.Suggested.Runs)
		assert.Greater(t, rep.Static.TooSlow, 0)
		assert.Less(t, rep.Suggested.TooSlow, rep.Static.TooSlow, "runs with operation_too_slow")
		assert.Less(t, rep.Suggested.DoomedTime, rep.Static.DoomedTime, "time on attempts a limit cut")

		var out bytes.Buffer
		require.NoError(t, writeRunsReport(&out, rep))
		t.Log("\n" + out.String())
		assert.Contains(t, out.String(), "static ceilings")
		assert.Contains(t, out.String(), "runs with operation_too_slow")
	})
}

// run with -runs prints the report, and says why a step has no suggestion
// when the runs are too few.
func TestRunWithRunsTooFewSamples(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := defaultConfig()
		cfg.runs, cfg.parallel, cfg.exporter, cfg.stage = 50, 1, exporterNone, memStage
		var out, errOut bytes.Buffer
		require.NoError(t, run(t.Context(), cfg, &out, &errOut))
		assert.Contains(t, out.String(), `learn: step "fetch": 50 samples recorded, 1000 needed to suggest a ceiling from p99`)
		assert.Contains(t, out.String(), "plan budget: none")
	})
}

// -runs exports, with the learning runs, one run of each scenario under the
// article's ceilings: failed runs (too small, too slow, throttled) and the
// configured ceilings, for budgetadvise's report.
func TestRunsExportsScenarioRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sr := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
		rep, err := runMany(t.Context(), runsOptions{
			n: 20, parallel: 1, seed: defaultSeed, scenarios: true, stage: memStage, tp: tp, mp: metricnoop.NewMeterProvider(),
		})
		require.NoError(t, err)
		verdicts := map[string]bool{}
		ceilings := map[int64]bool{}
		status := map[int64]bool{}
		for _, sp := range sr.Ended() {
			for _, kv := range sp.Attributes() {
				switch string(kv.Key) {
				case "deadline.verdict":
					verdicts[kv.Value.AsString()] = true
				case "deadline.attempt.ceiling_ms":
					ceilings[kv.Value.AsInt64()] = true
				case "http.response.status_code":
					status[kv.Value.AsInt64()] = true
				}
			}
		}
		for _, v := range []string{"ok", "operation_too_slow", "deadline_too_small", "throttled"} {
			assert.True(t, verdicts[v], "a call with verdict %s exported: %v", v, verdicts)
		}
		assert.True(t, ceilings[100], "fetch's configured 100ms ceiling exported: %v", ceilings)
		assert.True(t, ceilings[defaultBudget.Milliseconds()], "the learning runs' opened ceiling exported: %v", ceilings)
		assert.True(t, status[429], "the throttled run's 429 exported: %v", status)
		var names []string
		for _, r := range rep.Scenarios {
			names = append(names, r.Scenario)
		}
		assert.Equal(t, scenarioNames(), names)
		var out bytes.Buffer
		require.NoError(t, writeRunsReport(&out, rep))
		assert.Contains(t, out.String(), "The demo's scenarios, once each")
	})
}

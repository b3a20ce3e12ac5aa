package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/otelbudget/truthtest"
)

// genSet is the generated data set of the known-truth tests: 1500 runs on
// each of two instances, traces in lines of 100 runs, and each instance's
// cumulative metrics, whose streams started an hour before the first run
// and were exported a minute after the last.
type genSet struct {
	runs                   []genRun
	traces, metrics        string // the files
	firstSpan, last        time.Time
	metricsFrom, metricsTo time.Time
}

func newGenSet(t *testing.T) genSet {
	t.Helper()
	sets := truthtest.KnownTruth(t0)
	a, b := genSetRuns(sets[0]), genSetRuns(sets[1])
	runs := append(a, b...)
	var last time.Time
	for _, r := range runs {
		if e := r.start.Add(r.calls[len(r.calls)-1].end); e.After(last) {
			last = e
		}
	}
	g := genSet{runs: runs, firstSpan: t0, last: last, metricsFrom: t0.Add(-time.Hour), metricsTo: last.Add(time.Minute)}
	g.traces = writeFile(t, append(traceLines(t, a, 100), traceLines(t, b, 100)...)...)
	g.metrics = writeFile(t, genMetricLine(t, a, g.metricsFrom, g.metricsTo), genMetricLine(t, b, g.metricsFrom, g.metricsTo))
	return g
}

func adviseJSON(t *testing.T, files ...string) report {
	t.Helper()
	code, out, errOut := runCmd(t, append([]string{"-format", "json"}, files...)...)
	require.Equal(t, 0, code, errOut)
	var rep report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	return rep
}

func stepOf(t *testing.T, rep report, step, source string) stepReport {
	t.Helper()
	for _, s := range rep.Steps {
		if s.Step == step && s.Source == source {
			return s
		}
	}
	require.FailNow(t, "no step", "%s from %s", step, source)
	return stepReport{}
}

// On the generated data set: the completed attempts' percentiles within 3%
// of the exact ones, the censored share exact, no ceiling suggested at or
// below the binding one, from traces and from metrics; the date range
// from traces, from metrics (StartTimeUnixNano included) and from both.
func TestKnownTruth(t *testing.T) {
	g := newGenSet(t)
	fetch := truthOf(g.runs, "fetch")
	share := float64(fetch.cut) / float64(fetch.attempts)
	require.InDelta(t, 0.11, share, 0.02, "the 100ms ceiling cuts about 11%% of fetch's attempts")

	traces := adviseJSON(t, g.traces)
	metrics := adviseJSON(t, g.metrics)
	both := adviseJSON(t, g.traces, g.metrics)
	assert.Equal(t, g.firstSpan, traces.From.UTC(), "traces: from the first span's start")
	assert.Equal(t, g.last, traces.To.UTC(), "traces: to the last span's end")
	assert.Equal(t, g.metricsFrom, metrics.From.UTC(), "metrics: from the streams' StartTimeUnixNano")
	assert.Equal(t, g.metricsTo, metrics.To.UTC())
	assert.Equal(t, g.metricsFrom, both.From.UTC())
	assert.Equal(t, g.metricsTo, both.To.UTC())
	assert.Equal(t, 3000, traces.Runs)

	for _, tc := range []struct {
		rep    report
		source string
	}{{traces, "traces"}, {metrics, "metrics"}, {both, "traces"}, {both, "metrics"}} {
		t.Run(tc.source, func(t *testing.T) {
			for _, name := range []string{"search", "fetch", "extract"} {
				tr := truthOf(g.runs, name)
				s := stepOf(t, tc.rep, name, tc.source)
				assert.Equal(t, uint64(tr.attempts), s.Attempts, name)
				assert.Equal(t, uint64(len(tr.completed)), s.Completed, name)
				assert.Equal(t, float64(tr.cut)/float64(tr.attempts), s.CensoredShare, "%s: the censored share, exactly", name)
				for _, p := range percentiles {
					want := ms(percentile(tr.completed, p.q))
					assert.InEpsilon(t, want, s.CompletedMs[p.name], 0.03, "%s %s of the completed attempts", name, p.name)
				}
				if tr.cut > 0 && s.SuggestedCeilingMs != 0 {
					assert.Greater(t, s.SuggestedCeilingMs, ms(genPlanStep(name).ceiling), "%s: a ceiling at or below the binding one is never suggested", name)
				}
			}
			f := stepOf(t, tc.rep, "fetch", tc.source)
			assert.True(t, f.Censored, "11% cut hides fetch's p99")
			assert.Nil(t, f.KaplanMeierMs["p99"], "the Kaplan–Meier p99 is above the cuts: unknown")
			assert.NotNil(t, f.KaplanMeierMs["p50"])
			assert.InEpsilon(t, 100.0, f.RaiseAboveMs, 0.011, "the cut, within a metric bucket")
			assert.Zero(t, f.SuggestedCeilingMs, "none suggested: the binding 100ms ceiling hides the p99")
			assert.Less(t, f.CompletedMs["p99"], 100.0, "the completed attempts' own p99 is below the cut: what a dashboard shows")
		})
	}
}

func genPlanStep(name string) genStep {
	for _, s := range genPlan {
		if s.name == name {
			return s
		}
	}
	return genStep{}
}

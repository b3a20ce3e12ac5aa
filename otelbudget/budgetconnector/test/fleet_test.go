package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget/budgetconnector"
	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/test/fleettest"
	"github.com/deadlinebudget/budget/otelbudget/budgetopamp"
	"github.com/deadlinebudget/budget/otelbudget/truthtest"
)

const (
	clients        = 50
	exportInterval = 500 * time.Millisecond
)

// sendRuns has clients clients send the runs over OTLP/HTTP, client i the
// runs i, i+clients, …, ten runs a request, client i to cols[i%len(cols)].
func sendRuns(t *testing.T, runs []truthtest.Run, cols ...*fleettest.Collector) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			hc := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
			defer hc.CloseIdleConnections()
			var mine []truthtest.Run
			var ids []uint64
			for i := c; i < len(runs); i += clients {
				mine, ids = append(mine, runs[i]), append(ids, uint64(i))
			}
			for i := 0; i < len(mine); i += 10 {
				td := ptrace.NewTraces()
				for j := i; j < min(i+10, len(mine)); j++ {
					tracesOf(mine[j:j+1], ids[j]).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
				}
				body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
				if err == nil {
					err = fleettest.SendTraces(ctx, hc, cols[c%len(cols)].OTLP, body)
				}
				if err != nil {
					errs <- fmt.Errorf("client %d: %w", c, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// attemptsOf counts the data set's attempts per step.
func attemptsOf(runs []truthtest.Run) map[string]int {
	n := map[string]int{}
	for _, r := range runs {
		for _, c := range r.Calls {
			n["agent/"+c.Step] += len(c.Attempts)
		}
	}
	return n
}

// waitSamples waits until the Collector's exported suggestions rest on
// want samples per step, and returns the batches then.
func waitSamples(t *testing.T, col *fleettest.Collector, want map[string]int) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		batches, changed := col.Metrics.Batches()
		got := fleettest.Gauges(batches, budgetconnector.MetricSamples)
		ok := true
		for k, n := range want {
			ok = ok && got[k] == float64(n)
		}
		if ok {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			require.FailNow(t, "the Collector never exported every sample", "got %v, want %v", got, want)
		}
	}
}

// adviseSteps runs budgetadvise over the traces file and returns its
// suggested ceilings (ms) and censored flags by step, from the traces.
func adviseSteps(t *testing.T, file string) (map[string]float64, map[string]bool) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "budgetadvise")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "..", "cmd", "budgetadvise")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	cmd := exec.Command(bin, "-format", "json", file)
	out, err = cmd.Output()
	require.NoError(t, err)
	var rep struct {
		Steps []struct {
			Step               string  `json:"step"`
			Source             string  `json:"source"`
			SuggestedCeilingMs float64 `json:"suggested_ceiling_ms"`
			Censored           bool    `json:"censored"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal(out, &rep))
	ceil, cens := map[string]float64{}, map[string]bool{}
	for _, s := range rep.Steps {
		if s.Source == "traces" {
			ceil[s.Step], cens[s.Step] = s.SuggestedCeilingMs, s.Censored
		}
	}
	return ceil, cens
}

// writeTraces writes the runs as OTLP JSON lines, as a Collector's file
// exporter does: what budgetadvise reads offline.
func writeTraces(t *testing.T, runs []truthtest.Run) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "traces.jsonl")
	var data []byte
	for i := 0; i < len(runs); i += 100 {
		b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(tracesOf(runs[i:min(i+100, len(runs))], uint64(i)))
		require.NoError(t, err)
		data = append(append(data, b...), '\n')
	}
	require.NoError(t, os.WriteFile(f, data, 0o600))
	return f
}

// Fifty clients send the known-truth data set's attempt spans through a
// real Collector running the connector: the ceilings it emits are within
// 5% of those budgetadvise computes offline from the same spans (they are
// the same: one span rule, one estimator), fetch's p99 hidden by its
// ceiling in both.
func TestFleetCeilingsMatchBudgetadvise(t *testing.T) {
	runs := truthRuns(t)
	col, err := fleettest.Start(context.Background(), fleettest.Options{ExportInterval: exportInterval})
	require.NoError(t, err)
	defer func() { require.NoError(t, col.Shutdown()) }()

	start := time.Now()
	sendRuns(t, runs, col)
	waitSamples(t, col, attemptsOf(runs))
	t.Logf("%d clients sent %d runs' spans; all in the exported suggestions after %s", clients, len(runs), time.Since(start).Round(time.Millisecond))

	batches, _ := col.Metrics.Batches()
	ceil := fleettest.Gauges(batches, budgetconnector.MetricCeiling)
	raise := fleettest.Gauges(batches, budgetconnector.MetricRaiseAbove)
	want, censored := adviseSteps(t, writeTraces(t, runs))
	for _, step := range []string{"search", "extract"} {
		require.NotZero(t, want[step], step)
		got := ceil["agent/"+step] * 1000
		assert.InEpsilon(t, want[step], got, 0.05, "%s: the Collector's ceiling %.3fms, budgetadvise's %.3fms", step, got, want[step])
		t.Logf("%s: Collector %.3fms, budgetadvise %.3fms (%.4f%% apart)", step, got, want[step], 100*(got-want[step])/want[step])
	}
	assert.True(t, censored["fetch"], "budgetadvise: fetch's p99 is above its 100ms ceiling")

	// A process started cold gets the fleet's ceilings from the Collector
	// over OpAMP, within two export intervals.
	var rec learn.Recorder
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Second}})
	require.NoError(t, err)
	_, ok := live.Ceiling("search")
	require.False(t, ok, "cold: no ceiling of its own")
	began := time.Now()
	client, err := budgetopamp.Start(context.Background(), col.OpAMP, live, budgetopamp.WithServiceName("agent"))
	require.NoError(t, err)
	defer func() { require.NoError(t, client.Stop(context.Background())) }()
	require.Eventually(t, func() bool { return client.Status().Applied > 0 }, 2*exportInterval, time.Millisecond,
		"the fleet's ceilings applied within two export intervals")
	t.Logf("a fresh client applied the fleet's ceilings %s after it started (export interval %s)", time.Since(began).Round(time.Millisecond), exportInterval)
	for _, step := range []string{"search", "extract"} {
		lc, ok := live.Ceiling(step)
		require.True(t, ok, step)
		assert.InDelta(t, ceil["agent/"+step], lc.Ceiling.Seconds(), 1e-6, "%s: the Collector's ceiling", step)
	}
	_, ok = live.Ceiling("fetch")
	assert.False(t, ok, "no fleet ceiling for fetch: none was suggested")
	assert.NotContains(t, ceil, "agent/fetch", "the Collector suggests no ceiling for fetch either")
	assert.InEpsilon(t, 0.1, raise["agent/fetch"], 0.011, "raise fetch's ceiling above 100ms")
}

// Two agent Collectors, each receiving the spans of half the clients,
// export their histograms to a gateway Collector, whose connector merges
// them: its ceilings, estimates, censored shares and sample counts are
// those of one Collector that received every span (the previous test's,
// budgetadvise's).
func TestGatewayMergesAgents(t *testing.T) {
	runs := truthRuns(t)
	ctx := context.Background()
	gateway, err := fleettest.Start(ctx, fleettest.Options{ExportInterval: exportInterval})
	require.NoError(t, err)
	defer func() { require.NoError(t, gateway.Shutdown()) }()
	var agents []*fleettest.Collector
	for range 2 {
		a, err := fleettest.Start(ctx, fleettest.Options{ExportInterval: exportInterval, ExportTo: gateway.OTLP})
		require.NoError(t, err)
		defer func() { require.NoError(t, a.Shutdown()) }()
		agents = append(agents, a)
	}
	one, err := fleettest.Start(ctx, fleettest.Options{ExportInterval: exportInterval})
	require.NoError(t, err)
	defer func() { require.NoError(t, one.Shutdown()) }()

	sendRuns(t, runs, agents...)
	sendRuns(t, runs, one)
	want := attemptsOf(runs)
	waitSamples(t, gateway, want)
	waitSamples(t, one, want)
	gb, _ := gateway.Metrics.Batches()
	ob, _ := one.Metrics.Batches()
	for _, name := range []string{budgetconnector.MetricCeiling, budgetconnector.MetricEstimate, budgetconnector.MetricRaiseAbove,
		budgetconnector.MetricCensoredShare, budgetconnector.MetricSamples, budgetconnector.MetricWindowStart, budgetconnector.MetricWindowEnd} {
		w := fleettest.Gauges(ob, name)
		require.NotEmpty(t, w, name)
		assert.Equal(t, w, fleettest.Gauges(gb, name), name)
	}
	t.Logf("gateway = one Collector: ceilings %v", fleettest.Gauges(gb, budgetconnector.MetricCeiling))
}

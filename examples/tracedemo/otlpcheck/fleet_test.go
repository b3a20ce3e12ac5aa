package otlpcheck

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/deadlinebudget/budget/otelbudget"
)

// writeFileExport writes what s received as a Collector's file exporter
// does: one OTLP JSON object a line (ptrace/pmetric JSONMarshaler). It
// stands in for a real Collector, which is not available offline.
func writeFileExport(t *testing.T, s *sink, path string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var b bytes.Buffer
	for _, td := range s.traces {
		line, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	for _, md := range s.metrics {
		line, err := (&pmetric.JSONMarshaler{}).MarshalMetrics(md)
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o600))
}

// attemptCounts sums, per step, the attempts recorded in the
// deadline.attempt.duration exponential histograms that s received, over
// every process (resource): the fleet's total. Canceled and panicked
// attempts are left out, as learn leaves them out.
func attemptCounts(s *sink) map[string]uint64 {
	out := map[string]uint64{}
	for _, m := range s.metricsByName()[otelbudget.MetricAttemptDuration] {
		if m.m.Type() != pmetric.MetricTypeExponentialHistogram {
			continue
		}
		for _, dp := range m.m.ExponentialHistogram().DataPoints().All() {
			step, _ := dp.Attributes().Get(string(otelbudget.AttrStep))
			ended, _ := dp.Attributes().Get(string(otelbudget.AttrAttemptEndedBy))
			switch ended.Str() {
			case "completed", "error", "attempt_timeout", "deadline":
				out[step.Str()] += dp.Count()
			}
		}
	}
	return out
}

// TestFleetMerge: two demo processes (tracedemo -runs) export their
// exponential attempt-duration histograms to one OTLP receiver, which
// writes them as a Collector's file exporter would; budgetadvise reads the
// file, and its per-step attempt counts from the metrics equal the sum of
// both processes' counts (and the count of attempt spans).
func TestFleetMerge(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo twice with -runs and builds budgetadvise")
	}
	dir := t.TempDir()
	advise := filepath.Join(dir, "budgetadvise")
	build := exec.Command("go", "build", "-o", advise, ".")
	build.Dir = filepath.Join("..", "..", "..", "otelbudget", "cmd", "budgetadvise")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build budgetadvise: %s", out)

	s := &sink{}
	endpoint := httpReceiver(t, s)
	var perProcess []map[string]uint64
	for _, service := range []string{"fleet-a", "fleet-b"} {
		before := attemptCounts(s)
		env := otlpEnv("http/protobuf", endpoint, service)
		env["OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION"] = "base2_exponential_bucket_histogram"
		r := runDemo(t, demoBin, env, "-runs", "20", "-parallel", "20")
		require.Equal(t, 0, r.code, "stderr:\n%s", r.stderr)
		after := attemptCounts(s)
		mine := map[string]uint64{}
		for k, v := range after {
			mine[k] = v - before[k]
		}
		require.NotZero(t, mine["fetch"], "%s recorded fetch attempts", service)
		perProcess = append(perProcess, mine)
	}
	file := filepath.Join(dir, "otlp.jsonl")
	writeFileExport(t, s, file)

	cmd := exec.Command(advise, "-format", "json", "-min-samples", "10", file)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "budgetadvise: %s", stderr.String())
	var rep struct {
		Steps []struct {
			Step     string `json:"step"`
			Source   string `json:"source"`
			Attempts uint64 `json:"attempts"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep), stdout.String())
	text, err := exec.Command(advise, "-min-samples", "10", file).Output()
	require.NoError(t, err)
	t.Logf("budgetadvise on the merged file:\n%s", text)
	for _, m := range s.metricsByName()[otelbudget.MetricAttemptDuration] {
		for _, dp := range m.m.ExponentialHistogram().DataPoints().All() {
			step, _ := dp.Attributes().Get(string(otelbudget.AttrStep))
			t.Logf("exported %s point: scale %d, %d buckets", step.Str(), dp.Scale(), dp.Positive().BucketCounts().Len())
		}
	}
	got := map[string]map[string]uint64{"traces": {}, "metrics": {}}
	for _, st := range rep.Steps {
		got[st.Source][st.Step] = st.Attempts
	}
	for _, step := range []string{"search", "fetch", "extract"} {
		sum := perProcess[0][step] + perProcess[1][step]
		assert.Equal(t, sum, got["metrics"][step], "%s: the merged histogram counts both processes' attempts", step)
		assert.Equal(t, sum, got["traces"][step], "%s: as many attempt spans", step)
	}
}

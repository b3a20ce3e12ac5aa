package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/otelbudget"
)

// stubSpan is the part of the stdout span exporter's JSON a test reads.
type stubSpan struct {
	Name        string
	SpanKind    int
	SpanContext struct{ TraceID string }
	Attributes  []struct {
		Key   string
		Value struct{ Value any }
	}
}

// stubMetrics is the part of the stdout metric exporter's JSON a test reads.
type stubMetrics struct {
	ScopeMetrics []struct {
		Metrics []struct{ Name string }
	}
}

// decodeStdout decodes out as jq reads it, a stream of JSON values, and
// fails the test unless every byte of it belongs to a span or a metrics
// object: the demo's stdout must carry nothing else when it exports there.
func decodeStdout(t *testing.T, out []byte) ([]stubSpan, []stubMetrics) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(out))
	var spans []stubSpan
	var metrics []stubMetrics
	for {
		var raw map[string]json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return spans, metrics
		}
		off := dec.InputOffset()
		require.NoError(t, err, "stdout is not a stream of JSON objects at byte %d: %q", off, out[off:min(len(out), int(off)+80)])
		obj, err := json.Marshal(raw)
		require.NoError(t, err)
		switch {
		case raw["SpanContext"] != nil:
			var s stubSpan
			require.NoError(t, json.Unmarshal(obj, &s))
			spans = append(spans, s)
		case raw["ScopeMetrics"] != nil:
			var m stubMetrics
			require.NoError(t, json.Unmarshal(obj, &m))
			metrics = append(metrics, m)
		default:
			t.Fatalf("stdout carries a JSON object that is neither a span nor metrics: %s", obj)
		}
	}
}

// metricNames returns the names of the metrics in ms, in order.
func metricNames(ms []stubMetrics) []string {
	var names []string
	for _, m := range ms {
		for _, sm := range m.ScopeMetrics {
			for _, x := range sm.Metrics {
				names = append(names, x.Name)
			}
		}
	}
	return names
}

// golden returns testdata/<name>.golden: the waterfall and summary of
// scenario name, as TestWaterfallGolden renders them.
func golden(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name + ".golden")
	require.NoError(t, err)
	return string(b)
}

// TestRunDemo is `make demo` in virtual time: the ok scenario, with no
// environment, writes every span and metric to stdout as JSON and nothing
// else (`make demo | jq` works), and the waterfall, the summary and the
// export line to stderr; the run succeeds.
func TestRunDemo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out, errOut bytes.Buffer
		cfg := defaultConfig()
		cfg.execute = executeInMemory
		require.NoError(t, run(t.Context(), cfg, &out, &errOut))

		spans, metrics := decodeStdout(t, out.Bytes())
		// 1 run span, 3 call spans, 4 client and 4 server spans.
		require.Len(t, spans, 12, "every span of the run is exported")
		kinds := map[int]int{}
		for _, s := range spans {
			kinds[s.SpanKind]++
			assert.Equal(t, spans[0].SpanContext.TraceID, s.SpanContext.TraceID, "span %s is in the one trace", s.Name)
		}
		assert.Equal(t, 4, kinds[int(trace.SpanKindClient)], "CLIENT spans")
		assert.Equal(t, 4, kinds[int(trace.SpanKindServer)], "SERVER spans")
		runAttrs := map[string]any{}
		for _, s := range spans {
			if s.Name == "agent run" {
				for _, a := range s.Attributes {
					runAttrs[a.Key] = a.Value.Value
				}
			}
		}
		assert.Equal(t, "ok", runAttrs[string(otelbudget.AttrRunOutcome)], "the run span's story (otelbudget.StartRun)")
		assert.Equal(t, []any{"search", "fetch", "extract"}, runAttrs[string(otelbudget.AttrRunSteps)])
		require.Len(t, metrics, 1, "the metrics are exported once, at the end")
		assert.Subset(t, metricNames(metrics), []string{
			otelbudget.MetricCallDuration, otelbudget.MetricAttemptDuration,
			otelbudget.MetricCallAttempts, otelbudget.MetricCallSlack,
		}, "no call is refused in the ok scenario: no refusal counter")

		// 3 calls × (duration, attempts, slack); attempt durations of
		// search, fetch (attempt_timeout and completed) and extract; the
		// 4 points of otelhttp's client metrics (duration and body size of
		// the GETs and the POST).
		assert.Equal(t, golden(t, "ok")+"tracedemo: exported 12 spans and 21 metric points to stdout\n", errOut.String(),
			"stderr: the waterfall, the summary, the export line")
	})
}

// TestRunWaterfallToStdout: with nothing exported to stdout (-exporter
// none), stdout carries the waterfall and the summary, and stderr nothing.
func TestRunWaterfallToStdout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out, errOut bytes.Buffer
		cfg := defaultConfig()
		cfg.execute = executeInMemory
		cfg.exporter = exporterNone
		require.NoError(t, run(t.Context(), cfg, &out, &errOut))
		assert.Equal(t, golden(t, "ok"), out.String())
		assert.Empty(t, errOut.String())
	})
}

// TestRunUserBudget: a budget the caller chose is shown, not checked: the
// ok scenario under 10ms has every step refused, and run succeeds, saying
// that the verdicts were not checked.
func TestRunUserBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out, errOut bytes.Buffer
		cfg := defaultConfig()
		cfg.execute = executeInMemory
		cfg.exporter = exporterNone
		cfg.budget = 10 * time.Millisecond
		require.NoError(t, run(t.Context(), cfg, &out, &errOut))
		assert.Contains(t, out.String(), "verdicts search=deadline_too_small fetch=deadline_too_small extract=deadline_too_small\n")
		assert.True(t, strings.HasSuffix(out.String(), "-budget 10ms replaces the scenario's 1s: the verdicts are shown, not checked against its design\n"), out.String())
		assert.Empty(t, errOut.String())
	})
}

// TestRunFailsWhenTheScenarioMisbehaves: when the run does not go as the
// scenario's design says (here an executor that gives the ok scenario a
// 10ms budget behind run's back), run reports what differed, and fails.
func TestRunFailsWhenTheScenarioMisbehaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out, errOut bytes.Buffer
		cfg := defaultConfig()
		cfg.exporter = exporterNone
		cfg.waterfall = false
		cfg.execute = func(ctx context.Context, sc scenario, seed uint64, _ time.Duration, tp trace.TracerProvider, mp metric.MeterProvider) (outcome, error) {
			return executeInMemory(ctx, sc, seed, 10*time.Millisecond, tp, mp) // below the floor: search is refused
		}
		err := run(t.Context(), cfg, &out, &errOut)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "scenario ok did not behave as designed")
		// Refusal is a budget stop: the plan goes on, and the budget refuses
		// every step in turn.
		for _, step := range []string{"search", "fetch", "extract"} {
			assert.Contains(t, err.Error(), step+": verdict deadline_too_small, want ok")
			assert.Contains(t, err.Error(), step+": stopped with refused, want success")
		}
		assert.Contains(t, err.Error(), "(steps failed with: search: ")
		assert.NotContains(t, out.String(), "step     try", "-waterfall=false prints no waterfall")
		assert.Contains(t, out.String(), "verdicts search=deadline_too_small fetch=deadline_too_small extract=deadline_too_small\n")
	})
}

// TestRunUnreachableCollector: with the OTLP exporters pointed at a port
// nobody listens on, the run is unaffected, the export gives up, and stderr
// gets exactly one line saying what was not exported and why; for both
// OTLP protocols. The refused scenario makes the same spans and points
// whatever the machine's load (nothing it does depends on timing), so the
// line is known exactly; the time the export takes is checked, loosely, by
// the subprocess test in otlpcheck.
func TestRunUnreachableCollector(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nobody listens there now

	for _, proto := range []string{"http/protobuf", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			t.Setenv("OTEL_TRACES_EXPORTER", "")
			t.Setenv("OTEL_METRICS_EXPORTER", "")
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
			var out, errOut bytes.Buffer
			cfg := defaultConfig()
			cfg.scenario = "refused"
			cfg.exporter = exporterOTLP
			cfg.getenv = os.Getenv
			require.NoError(t, run(context.Background(), cfg, &out, &errOut))
			assert.Contains(t, out.String(), "verdicts search=deadline_too_small fetch=deadline_too_small extract=deadline_too_small",
				"with nothing exported to stdout, the summary goes there")
			lines := strings.Split(strings.TrimRight(errOut.String(), "\n"), "\n")
			require.Len(t, lines, 1, "one line on stderr: %q", errOut.String())
			// 1 run span and 3 call spans; 3 calls × (duration, attempts,
			// slack, refusals).
			q := regexp.QuoteMeta
			assert.Regexp(t, "^"+q("tracedemo: 4 spans not exported to otlp "+proto+": ")+".+"+
				q("; 12 metric points not exported to otlp "+proto+": ")+".+"+q(" (the run itself is unaffected)")+"$", lines[0])
		})
	}
}

func TestParseFlags(t *testing.T) {
	env := func(string) string { return "" }
	cfg, err := parseFlags(nil, env, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "ok", cfg.scenario)
	assert.Equal(t, transportHTTP, cfg.transport)
	assert.Equal(t, uint64(defaultSeed), cfg.seed)
	assert.Equal(t, exporterAuto, cfg.exporter)
	assert.Zero(t, cfg.budget, "the scenario's own budget")
	assert.True(t, cfg.waterfall)
	assert.Equal(t, 500*time.Millisecond, cfg.exportTimeout, "the export's grace after the run")

	cfg, err = parseFlags([]string{"-scenario", "ratelimited", "-seed", "42", "-budget", "4s", "-exporter", "none", "-waterfall=false", "-transport", "grpc"}, env, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, config{scenario: "ratelimited", transport: transportGRPC, seed: 42, budget: 4 * time.Second, exporter: exporterNone, waterfall: false, exportTimeout: defaultExportGrace, parallel: 32, scenarioRuns: true}, withoutFuncs(cfg))

	cfg, err = parseFlags([]string{"-runs", "2000", "-parallel", "4"}, env, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 2000, cfg.runs)
	assert.Equal(t, 4, cfg.parallel)
	assert.True(t, cfg.scenarioRuns, "the scenario runs are exported with the learning runs unless asked not to")

	cfg, err = parseFlags([]string{"-runs", "20", "-scenario-runs=false"}, env, io.Discard)
	require.NoError(t, err)
	assert.False(t, cfg.scenarioRuns)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-scenario", "fast"}, `unknown scenario "fast": want one of ok, tight, slow, ratelimited, flaky, refused`},
		{[]string{"-exporter", "jaeger"}, `-exporter "jaeger": want stdout, otlp or none`},
		{[]string{"-budget", "-1s"}, "-budget -1s: want a positive duration such as 1s or 300ms"},
		{[]string{"-budget", "0"}, "-budget 0s: want a positive duration such as 1s or 300ms"},
		{[]string{"-budget", "0s"}, "-budget 0s: want a positive duration such as 1s or 300ms"},
		{[]string{"-export-timeout", "0s"}, "-export-timeout 0s: want a positive duration such as 500ms"},
		{[]string{"extra"}, `unexpected arguments ["extra"]`},
		{[]string{"-runs", "-1"}, "-runs -1 -parallel 32: want -runs >= 0 and -parallel >= 1"},
		{[]string{"-runs", "10", "-parallel", "0"}, "want -runs >= 0 and -parallel >= 1"},
		{[]string{"-runs", "10", "-scenario", "slow"}, "-runs plays the ok scenario's plan and budget"},
		{[]string{"-runs", "10", "-budget", "2s"}, "-runs plays the ok scenario's plan and budget"},
		{[]string{"-transport", "quic"}, `-transport "quic": want http, grpc or agent`},
		{[]string{"-runs", "10", "-transport", "grpc"}, "-runs plays its plan over HTTP only: -transport grpc does not apply"},
	} {
		_, err := parseFlags(tc.args, env, io.Discard)
		require.Error(t, err, "%v", tc.args)
		assert.Contains(t, err.Error(), tc.want)
	}
}

// withoutFuncs clears the function fields so that configs compare.
func withoutFuncs(c config) config {
	c.getenv = nil
	c.execute = nil
	c.stage = nil
	return c
}

func TestExporterChoice(t *testing.T) {
	ctx := context.Background()
	noEnv := func(string) string { return "" }

	exp, where, err := newSpanExporter(ctx, exporterAuto, io.Discard, noEnv)
	require.NoError(t, err)
	assert.Equal(t, exporterStdout, where, "stdout unless OTEL_TRACES_EXPORTER is set")
	require.NoError(t, exp.Shutdown(ctx))

	exp, where, err = newSpanExporter(ctx, exporterNone, io.Discard, noEnv)
	require.NoError(t, err)
	assert.Nil(t, exp)
	assert.Equal(t, exporterNone, where)

	_, _, err = newSpanExporter(ctx, exporterOTLP, io.Discard, func(k string) string {
		if k == "OTEL_TRACES_EXPORTER" {
			return "console"
		}
		return ""
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-exporter otlp contradicts OTEL_TRACES_EXPORTER=console")

	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	exp, where, err = newSpanExporter(ctx, exporterAuto, io.Discard, os.Getenv)
	require.NoError(t, err)
	assert.Nil(t, exp, "none means no export")
	assert.Equal(t, exporterNone, where)

	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	_, _, err = newSpanExporter(ctx, exporterAuto, io.Discard, os.Getenv)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "OTEL_TRACES_EXPORTER=zipkin")
}

func TestMetricReaderChoice(t *testing.T) {
	ctx := context.Background()
	t.Setenv("OTEL_METRICS_EXPORTER", "")

	r, where, err := newMetricReader(ctx, exporterAuto, io.Discard, os.Getenv)
	require.NoError(t, err)
	assert.Equal(t, exporterStdout, where, "stdout unless OTEL_METRICS_EXPORTER is set, where the specification's default is otlp")
	require.NoError(t, r.Shutdown(ctx))

	r, where, err = newMetricReader(ctx, exporterNone, io.Discard, os.Getenv)
	require.NoError(t, err)
	assert.Nil(t, r)
	assert.Equal(t, exporterNone, where)

	r, where, err = newMetricReader(ctx, exporterOTLP, io.Discard, os.Getenv)
	require.NoError(t, err)
	assert.Equal(t, "otlp http/protobuf", where, "-exporter otlp: OTLP over http/protobuf by default")
	require.NoError(t, r.Shutdown(ctx))

	t.Setenv("OTEL_METRICS_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "grpc")
	r, where, err = newMetricReader(ctx, exporterAuto, io.Discard, os.Getenv)
	require.NoError(t, err)
	assert.Equal(t, "otlp grpc", where, "the signal's own protocol variable wins")
	require.NoError(t, r.Shutdown(ctx))

	t.Setenv("OTEL_METRICS_EXPORTER", "console")
	_, _, err = newMetricReader(ctx, exporterOTLP, io.Discard, os.Getenv)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-exporter otlp contradicts OTEL_METRICS_EXPORTER=console")

	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	r, where, err = newMetricReader(ctx, exporterAuto, io.Discard, os.Getenv)
	require.NoError(t, err)
	assert.Nil(t, r, "none means no export")
	assert.Equal(t, exporterNone, where)

	t.Setenv("OTEL_METRICS_EXPORTER", "zipkin")
	_, _, err = newMetricReader(ctx, exporterAuto, io.Discard, os.Getenv)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "OTEL_METRICS_EXPORTER=zipkin")
}

func TestExportReportLine(t *testing.T) {
	spans := func(n int, to string, err error) signalReport {
		return signalReport{what: "span", to: to, exported: true, n: n, err: err}
	}
	points := func(n int, to string, err error) signalReport {
		return signalReport{what: "metric point", to: to, exported: true, n: n, err: err}
	}
	refused := errors.New("connection refused\nby the collector")
	for _, tc := range []struct {
		name string
		r    exportReport
		want string
	}{
		{"nothing exported", exportReport{}, ""},
		{"both to one place", exportReport{spans: spans(12, "stdout", nil), points: points(21, "stdout", nil)},
			"tracedemo: exported 12 spans and 21 metric points to stdout"},
		{"two places", exportReport{spans: spans(1, "otlp grpc", nil), points: points(1, "stdout", nil)},
			"tracedemo: exported 1 span to otlp grpc; exported 1 metric point to stdout"},
		{"spans only", exportReport{spans: spans(4, "otlp grpc", nil)},
			"tracedemo: exported 4 spans to otlp grpc"},
		{"one fails", exportReport{spans: spans(4, "otlp grpc", refused), points: points(12, "stdout", nil)},
			"tracedemo: 4 spans not exported to otlp grpc: connection refused; by the collector; exported 12 metric points to stdout (the run itself is unaffected)"},
		{"both fail", exportReport{spans: spans(4, "otlp grpc", refused), points: points(12, "otlp grpc", refused)},
			"tracedemo: 4 spans not exported to otlp grpc: connection refused; by the collector; 12 metric points not exported to otlp grpc: connection refused; by the collector (the run itself is unaffected)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.r.line())
		})
	}
}

// failingExporter fails every export, to check how flush reports it.
type failingExporter struct{ shutdown bool }

func (f *failingExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return errors.New("collector said no\nand explained at length")
}

func (f *failingExporter) Shutdown(context.Context) error {
	f.shutdown = true
	return nil
}

func TestSpanBufferFlush(t *testing.T) {
	buf := &spanBuffer{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(buf))
	_, span := tp.Tracer("test").Start(context.Background(), "one")
	span.End()
	require.NoError(t, tp.Shutdown(context.Background()))

	f := &failingExporter{}
	n, err := buf.flush(context.Background(), f)
	assert.Equal(t, 1, n)
	require.Error(t, err)
	assert.True(t, f.shutdown, "the exporter is shut down even when the export fails")
	assert.Equal(t, "collector said no; and explained at length", oneLine(err))

	n, err = buf.flush(context.Background(), &failingExporter{})
	assert.Equal(t, 0, n, "flushed spans are not sent twice")
	assert.NoError(t, err, "nothing to export, nothing to fail")
}

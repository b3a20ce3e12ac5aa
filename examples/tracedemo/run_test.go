package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// stubSpan is the part of the stdout exporter's JSON a test reads.
type stubSpan struct {
	Name        string
	SpanKind    int
	SpanContext struct{ TraceID string }
	Attributes  []struct{ Key string }
}

// splitExport decodes the stdout exporter's span objects at the start of
// out and returns them with the text that follows.
func splitExport(t *testing.T, out []byte) ([]stubSpan, string) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(out))
	var spans []stubSpan
	end := int64(0)
	for {
		var s stubSpan
		if err := dec.Decode(&s); err != nil {
			break
		}
		spans = append(spans, s)
		end = dec.InputOffset()
	}
	return spans, string(out[end:])
}

// TestRunDemo is `make demo`: the ok scenario exported to stdout prints the
// spans as JSON, then the waterfall, then the summary, and succeeds.
func TestRunDemo(t *testing.T) {
	var out, errOut bytes.Buffer
	cfg := defaultConfig()
	cfg.exporter = exporterStdout
	require.NoError(t, run(context.Background(), cfg, &out, &errOut))
	assert.Empty(t, errOut.String())

	spans, rest := splitExport(t, out.Bytes())
	// 1 run span, 3 call spans, 4 client and 4 server spans.
	require.Len(t, spans, 12, "every span of the run is exported")
	kinds := map[int]int{}
	for _, s := range spans {
		kinds[s.SpanKind]++
		assert.Equal(t, spans[0].SpanContext.TraceID, s.SpanContext.TraceID, "span %s is in the one trace", s.Name)
	}
	assert.Equal(t, 4, kinds[3], "CLIENT spans (SpanKind 3)")
	assert.Equal(t, 4, kinds[2], "SERVER spans (SpanKind 2)")

	assert.Contains(t, rest, "scenario ok · budget 1s · floor 20ms · seed 7")
	assert.Contains(t, rest, "step     try   lease")
	assert.Contains(t, rest, "fetch    #1    100ms ceiling")
	lines := strings.Split(strings.TrimSpace(rest), "\n")
	summary := lines[len(lines)-1]
	assert.True(t, strings.HasPrefix(summary, "budget 1s · used "), summary)
	assert.True(t, strings.HasSuffix(summary, "verdicts search=ok fetch=ok extract=ok"), summary)
	assert.NotContains(t, out.String(), "\x1b[", "no colour unless asked for")
}

// TestRunFailsWhenTheScenarioMisbehaves: a budget too small for the ok
// scenario's design makes run report what differed, and fail.
func TestRunFailsWhenTheScenarioMisbehaves(t *testing.T) {
	var out, errOut bytes.Buffer
	cfg := defaultConfig()
	cfg.exporter = exporterNone
	cfg.waterfall = false
	cfg.budget = 10 * time.Millisecond // below the floor: search is refused
	err := run(context.Background(), cfg, &out, &errOut)
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
}

// TestRunUnreachableCollector: with the OTLP exporter pointed at a port
// nobody listens on, the run still behaves as designed, the export gives up
// within -export-timeout, and stderr gets exactly one line saying so; for
// both OTLP protocols.
func TestRunUnreachableCollector(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nobody listens there now

	for _, proto := range []string{"http/protobuf", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			t.Setenv("OTEL_TRACES_EXPORTER", "")
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
			var out, errOut bytes.Buffer
			cfg := defaultConfig()
			cfg.exporter = exporterOTLP
			cfg.getenv = os.Getenv
			cfg.exportTimeout = 300 * time.Millisecond
			require.NoError(t, run(context.Background(), cfg, &out, &errOut))
			assert.Contains(t, out.String(), "verdicts search=ok fetch=ok extract=ok")
			lines := strings.Split(strings.TrimRight(errOut.String(), "\n"), "\n")
			require.Len(t, lines, 1, "one line on stderr: %q", errOut.String())
			assert.Contains(t, lines[0], "tracedemo: 12 spans not exported (otlp "+proto+")")
		})
	}
}

func TestParseFlags(t *testing.T) {
	env := func(string) string { return "" }
	cfg, err := parseFlags(nil, env, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "ok", cfg.scenario)
	assert.Equal(t, uint64(defaultSeed), cfg.seed)
	assert.Equal(t, exporterAuto, cfg.exporter)
	assert.True(t, cfg.waterfall)

	cfg, err = parseFlags([]string{"-scenario", "ratelimited", "-seed", "42", "-budget", "4s", "-exporter", "none", "-waterfall=false"}, env, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, config{scenario: "ratelimited", seed: 42, budget: 4 * time.Second, exporter: exporterNone, waterfall: false, exportTimeout: 3 * time.Second}, withoutEnv(cfg))

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-scenario", "fast"}, `unknown scenario "fast": want one of ok, tight, slow, ratelimited, flaky, refused`},
		{[]string{"-exporter", "jaeger"}, `-exporter "jaeger": want stdout, otlp or none`},
		{[]string{"-budget", "-1s"}, "-budget -1s: want a positive duration"},
		{[]string{"-export-timeout", "0s"}, "-export-timeout 0s: want a positive duration"},
		{[]string{"extra"}, `unexpected arguments ["extra"]`},
	} {
		_, err := parseFlags(tc.args, env, io.Discard)
		require.Error(t, err, "%v", tc.args)
		assert.Contains(t, err.Error(), tc.want)
	}
}

// withoutEnv clears the function field so that configs compare.
func withoutEnv(c config) config {
	c.getenv = nil
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
	assert.Nil(t, exp, "autoexport's none exporter means no export")
	assert.Equal(t, exporterNone, where)

	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	_, _, err = newSpanExporter(ctx, exporterAuto, io.Discard, os.Getenv)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "OTEL_TRACES_EXPORTER=zipkin")
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
	n, err := buf.flush(context.Background(), f, time.Second)
	assert.Equal(t, 1, n)
	require.Error(t, err)
	assert.True(t, f.shutdown, "the exporter is shut down even when the export fails")
	assert.Equal(t, "collector said no; and explained at length", oneLine(err))

	n, err = buf.flush(context.Background(), &failingExporter{}, time.Second)
	assert.Equal(t, 0, n, "flushed spans are not sent twice")
	assert.NoError(t, err, "nothing to export, nothing to fail")
}

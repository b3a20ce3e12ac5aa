package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// record makes spans spans and points metric points (one counter, one
// attribute set each) on tel's providers.
func record(t *testing.T, tel *telemetry, spans, points int) {
	t.Helper()
	tr := tel.tp.Tracer("test")
	for range spans {
		_, span := tr.Start(context.Background(), "work")
		span.End()
	}
	c, err := tel.mp.Meter("test").Int64Counter("test.count")
	require.NoError(t, err)
	for i := range points {
		c.Add(context.Background(), 1, metric.WithAttributes(attribute.Int("i", i)))
	}
}

// unsetOTLPEnv removes every OTEL_ variable for the test (t.Setenv restores
// them after), so that the exporters see their defaults: an empty variable
// is not an unset one to them.
func unsetOTLPEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "")
			require.NoError(t, os.Unsetenv(k))
		}
	}
}

// TestFlushStdoutIsNotCut: writing to stdout takes as long as the work,
// and the grace for a collector does not cut it: with a grace already over,
// every span and point is written and counted (-runs 2000 lost its metrics
// when the spans' JSON outlasted the grace).
func TestFlushStdoutIsNotCut(t *testing.T) {
	var out bytes.Buffer
	tel, err := newTelemetry(context.Background(), exporterStdout, &out, func(string) string { return "" })
	require.NoError(t, err)
	record(t, tel, 50, 18)
	r := tel.flush(context.Background(), time.Nanosecond)
	assert.Equal(t, "tracedemo: exported 50 spans and 18 metric points to stdout", r.line())
	assert.Equal(t, 50, strings.Count(out.String(), `"Name": "work"`), "every span is written")
	assert.Contains(t, out.String(), `"Name": "test.count"`, "the metrics are written after the spans")
}

// TestFlushCountsWhatWasLost: when the export to a collector gives up, the
// line counts what was not exported (not 0) and says why once.
func TestFlushCountsWhatWasLost(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nobody listens there now
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + addr}
	unsetOTLPEnv(t)
	for k, v := range env {
		t.Setenv(k, v)
	}

	tel, err := newTelemetry(context.Background(), exporterOTLP, io.Discard, os.Getenv)
	require.NoError(t, err)
	record(t, tel, 3, 18)
	line := tel.flush(context.Background(), time.Nanosecond).line() // the grace is over before the export starts
	assert.Contains(t, line, "tracedemo: 3 spans not exported to otlp http/protobuf: gave up after 1ns: ")
	assert.Contains(t, line, "; 18 metric points not exported to otlp http/protobuf: gave up after 1ns: ")
	assert.Equal(t, 2, strings.Count(line, "context deadline exceeded"), "once per signal: %s", line)
}

// TestOTLPDefaultEndpointIsPlainHTTP: -exporter otlp with no endpoint set
// sends to the specification's default, http://localhost:4318, in plain
// text (the exporters on their own would speak TLS there). It needs the
// port: it is skipped when something else holds it.
func TestOTLPDefaultEndpointIsPlainHTTP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:4318")
	if err != nil {
		t.Skipf("port 4318 is taken, the default endpoint cannot be checked: %v", err)
	}
	var mu sync.Mutex
	var paths []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { require.NoError(t, srv.Close()); <-done })
	unsetOTLPEnv(t)

	tel, err := newTelemetry(context.Background(), exporterOTLP, io.Discard, os.Getenv)
	require.NoError(t, err)
	record(t, tel, 2, 3)
	assert.Equal(t, "tracedemo: exported 2 spans and 3 metric points to otlp http/protobuf", tel.flush(context.Background(), 10*time.Second).line())
	mu.Lock()
	defer mu.Unlock()
	assert.ElementsMatch(t, []string{"POST /v1/traces", "POST /v1/metrics"}, paths)
}

func TestPlainByDefault(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector:4318"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://collector:4318/v1/traces"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_INSECURE": "false"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_INSECURE": "false"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "https://collector:4318/v1/metrics"}, true}, // the other signal's
	} {
		assert.Equal(t, tc.want, plainByDefault(signalTraces, func(k string) string { return tc.env[k] }), "%v", tc.env)
	}
}

func TestCheckExportEnv(t *testing.T) {
	for _, tc := range []struct {
		kind string
		env  map[string]string
		want string // "" for no error
	}{
		{exporterAuto, nil, ""},
		{exporterAuto, map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none"}, ""},
		{exporterOTLP, map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, ""},
		{exporterAuto, map[string]string{"OTEL_TRACES_EXPORTER": "bogus"}, "OTEL_TRACES_EXPORTER=bogus: want otlp, console or none"},
		{exporterAuto, map[string]string{"OTEL_METRICS_EXPORTER": "prometheus"}, "OTEL_METRICS_EXPORTER=prometheus: not supported here"},
		{exporterOTLP, map[string]string{"OTEL_METRICS_EXPORTER": "console"}, "-exporter otlp contradicts OTEL_METRICS_EXPORTER=console"},
		{exporterAuto, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL=http/json: want http/protobuf or grpc"},
		{exporterAuto, map[string]string{"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "udp"}, "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL=udp: want http/protobuf or grpc"},
	} {
		err := checkExportEnv(tc.kind, func(k string) string { return tc.env[k] })
		if tc.want == "" {
			assert.NoError(t, err, "%v", tc.env)
			continue
		}
		require.Error(t, err, "%v", tc.env)
		assert.Contains(t, err.Error(), tc.want)
	}
}

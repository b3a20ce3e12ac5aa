package otlpcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/deadlinebudget/budget/otelbudget"
)

// demoBin is the demo binary, built once by TestMain for every test.
var demoBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "otlpcheck")
	if err != nil {
		fmt.Fprintln(os.Stderr, "otlpcheck:", err)
		os.Exit(1)
	}
	code := 1
	if demoBin, err = buildDemo(dir); err != nil {
		fmt.Fprintln(os.Stderr, "otlpcheck:", err)
	} else {
		code = m.Run()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "otlpcheck: leaked goroutines:", err)
			code = 1
		}
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// sink keeps every span and metric an OTLP receiver decodes.
type sink struct {
	mu      sync.Mutex
	traces  []ptrace.Traces
	metrics []pmetric.Metrics
}

func (s *sink) addTraces(td ptrace.Traces) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.traces = append(s.traces, td)
}

func (s *sink) addMetrics(md pmetric.Metrics) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.metrics = append(s.metrics, md)
}

// received is one span with the resource it came with.
type received struct {
	service string
	span    ptrace.Span
}

func (s *sink) spans() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []received
	for _, td := range s.traces {
		for _, rs := range td.ResourceSpans().All() {
			svc, _ := rs.Resource().Attributes().Get("service.name")
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					out = append(out, received{service: svc.AsString(), span: sp})
				}
			}
		}
	}
	return out
}

// metric is one metric received, with the service it came from.
type metric struct {
	service string
	m       pmetric.Metric
}

// metricsByName returns every metric received, by name.
func (s *sink) metricsByName() map[string][]metric {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]metric{}
	for _, md := range s.metrics {
		for _, rm := range md.ResourceMetrics().All() {
			svc, _ := rm.Resource().Attributes().Get("service.name")
			for _, sm := range rm.ScopeMetrics().All() {
				for _, m := range sm.Metrics().All() {
					out[m.Name()] = append(out[m.Name()], metric{service: svc.AsString(), m: m})
				}
			}
		}
	}
	return out
}

// dataPoints returns the number of data points received.
func (s *sink) dataPoints() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, md := range s.metrics {
		n += md.DataPointCount()
	}
	return n
}

// otlpHTTP decodes one OTLP/HTTP export request (binary protobuf) with
// unmarshal and answers it with response.
func otlpHTTP(w http.ResponseWriter, r *http.Request, unmarshal func([]byte) error, response func() ([]byte, error)) {
	if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "want application/x-protobuf, got "+ct, http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := unmarshal(body); err != nil {
		http.Error(w, "not an OTLP export request: "+err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := response()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(resp)
}

// httpReceiver is an OTLP/HTTP endpoint (POST /v1/traces and /v1/metrics,
// binary protobuf) that decodes with the collector's pdata.
func httpReceiver(t *testing.T, s *sink) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		req := ptraceotlp.NewExportRequest()
		otlpHTTP(w, r, func(b []byte) error {
			if err := req.UnmarshalProto(b); err != nil {
				return err
			}
			s.addTraces(req.Traces())
			return nil
		}, ptraceotlp.NewExportResponse().MarshalProto)
	})
	mux.HandleFunc("POST /v1/metrics", func(w http.ResponseWriter, r *http.Request) {
		req := pmetricotlp.NewExportRequest()
		otlpHTTP(w, r, func(b []byte) error {
			if err := req.UnmarshalProto(b); err != nil {
				return err
			}
			s.addMetrics(req.Metrics())
			return nil
		}, pmetricotlp.NewExportResponse().MarshalProto)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// traceService and metricService are the OTLP/gRPC services, registered
// with the collector's pdata.
type traceService struct {
	ptraceotlp.UnimplementedGRPCServer
	s *sink
}

func (g *traceService) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	g.s.addTraces(req.Traces())
	return ptraceotlp.NewExportResponse(), nil
}

type metricService struct {
	pmetricotlp.UnimplementedGRPCServer
	s *sink
}

func (g *metricService) Export(_ context.Context, req pmetricotlp.ExportRequest) (pmetricotlp.ExportResponse, error) {
	g.s.addMetrics(req.Metrics())
	return pmetricotlp.NewExportResponse(), nil
}

// grpcReceiver is an OTLP/gRPC endpoint on loopback for traces and
// metrics.
func grpcReceiver(t *testing.T, s *sink) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	ptraceotlp.RegisterGRPCServer(srv, &traceService{s: s})
	pmetricotlp.RegisterGRPCServer(srv, &metricService{s: s})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return "http://" + ln.Addr().String() // http://: no TLS
}

// receivers are the two OTLP protocols, each with its receiver.
var receivers = []struct {
	protocol string
	start    func(*testing.T, *sink) string
}{
	{"http/protobuf", httpReceiver},
	{"grpc", grpcReceiver},
}

// buildDemo builds the demo in its own module (examples/tracedemo, the
// parent directory) into dir, as a person's `go build` would.
func buildDemo(dir string) (string, error) {
	src, err := filepath.Abs("..")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "tracedemo")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./examples/tracedemo: %w: %s", err, out)
	}
	return bin, nil
}

// demoRun is what one run of the demo binary did.
type demoRun struct {
	stdout, stderr string
	code           int
	elapsed        time.Duration // from start to exit, as the test saw it
}

// runDemo runs the demo binary with env added to the test's environment
// (the OTEL_* variables the test does not set are removed).
func runDemo(t *testing.T, bin string, env map[string]string, args ...string) demoRun {
	t.Helper()
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := demoRun{stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		r.code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return r
}

// otlpEnv returns the standard variables that send both signals to
// endpoint with protocol.
func otlpEnv(protocol, endpoint, service string) map[string]string {
	return map[string]string{
		"OTEL_TRACES_EXPORTER":        "otlp",
		"OTEL_METRICS_EXPORTER":       "otlp",
		"OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
		"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
		"OTEL_SERVICE_NAME":           service,
		"NO_COLOR":                    "1",
	}
}

// exportedLine matches the demo's line on a successful export.
var exportedLine = regexp.MustCompile(`(?m)^tracedemo: exported (\d+) spans? and (\d+) metric points? to (.+)$`)

// exported returns the counts of the demo's export line, and checks where
// it says they went.
func exported(t *testing.T, stderr, to string) (spans, points int) {
	t.Helper()
	m := exportedLine.FindStringSubmatch(stderr)
	require.NotNil(t, m, "stderr says what was exported:\n%s", stderr)
	assert.Equal(t, to, m[3])
	spans, _ = strconv.Atoi(m[1])
	points, _ = strconv.Atoi(m[2])
	return spans, points
}

func attrOf(sp ptrace.Span, key string) (pcommon.Value, bool) {
	return sp.Attributes().Get(key)
}

// histogramPoints returns the data points of the histograms named name.
func histogramPoints(ms []metric) []pmetric.HistogramDataPoint {
	var out []pmetric.HistogramDataPoint
	for _, x := range ms {
		if x.m.Type() == pmetric.MetricTypeHistogram {
			for _, dp := range x.m.Histogram().DataPoints().All() {
				out = append(out, dp)
			}
		}
	}
	return out
}

// TestOTLPRoundTrip runs the demo's ok scenario with the OTLP exporters
// configured by the standard variables, once per protocol,
// and checks that what the demo says it exported arrives: the client and
// server spans in one trace with http.request.resend_count and the
// deadline.* attributes, and the deadline.* metrics with their attributes.
//
// The run is on real loopback: how many attempts each step makes depends
// on timing under load, so -budget (shown, not checked) keeps the exit
// code independent of it, and the test checks what holds whatever the
// attempts: the structure, and that every span and point the demo counted
// arrived.
func TestOTLPRoundTrip(t *testing.T) {
	for _, tc := range receivers {
		t.Run(tc.protocol, func(t *testing.T) {
			s := &sink{}
			endpoint := tc.start(t, s)
			service := "otlpcheck-" + strings.ReplaceAll(tc.protocol, "/", "-")
			r := runDemo(t, demoBin, otlpEnv(tc.protocol, endpoint, service), "-scenario", "ok", "-budget", "1s")
			require.Equal(t, 0, r.code, "stderr:\n%s", r.stderr)
			assert.Contains(t, r.stdout, "verdicts search=", "with nothing exported to stdout, the summary goes there")
			assert.NotContains(t, r.stdout, `"SpanContext"`, "spans went to the collector, not to stdout")
			assert.NotContains(t, r.stdout, `"ScopeMetrics"`, "metrics went to the collector, not to stdout")
			nSpans, nPoints := exported(t, r.stderr, "otlp "+tc.protocol)

			spans := s.spans()
			require.Len(t, spans, nSpans, "every span the demo exported arrived")
			traceID := spans[0].span.TraceID()
			byID := map[pcommon.SpanID]ptrace.Span{}
			for _, r := range spans {
				assert.Equal(t, service, r.service, "OTEL_SERVICE_NAME names the service")
				assert.Equal(t, traceID, r.span.TraceID(), "span %s is in the run's one trace", r.span.Name())
				byID[r.span.SpanID()] = r.span
			}

			var clients, servers []ptrace.Span
			calls := map[string]ptrace.Span{}
			for _, r := range spans {
				switch r.span.Kind() {
				case ptrace.SpanKindClient:
					clients = append(clients, r.span)
				case ptrace.SpanKindServer:
					servers = append(servers, r.span)
				case ptrace.SpanKindInternal:
					if _, ok := attrOf(r.span, string(otelbudget.AttrVerdict)); ok {
						budget, ok := attrOf(r.span, string(otelbudget.AttrBudgetMs))
						require.True(t, ok, "call %s carries %s", r.span.Name(), otelbudget.AttrBudgetMs)
						assert.Equal(t, int64(1000), budget.Int())
						calls[r.span.Name()] = r.span
					}
				}
			}
			require.Contains(t, calls, "search")
			require.Contains(t, calls, "fetch")

			attempts := map[string]int{}
			for _, c := range clients {
				step, ok := attrOf(c, string(otelbudget.AttrStep))
				require.True(t, ok, "client span %s carries %s", c.Name(), otelbudget.AttrStep)
				attempts[step.AsString()]++
				assert.Equal(t, calls[step.AsString()].SpanID(), c.ParentSpanID(), "the call span parents the attempt")
				for _, k := range []string{
					string(otelbudget.AttrAttemptGrantedMs), string(otelbudget.AttrAttemptRemainingMs),
					string(otelbudget.AttrAttemptLimitedBy), string(otelbudget.AttrAttemptEndedBy),
				} {
					_, ok := attrOf(c, k)
					assert.True(t, ok, "client span of %s carries %s", step.AsString(), k)
				}
				n, ok := attrOf(c, string(otelbudget.AttrAttemptNumber))
				require.True(t, ok, "client span of %s carries %s", step.AsString(), otelbudget.AttrAttemptNumber)
				resend, ok := attrOf(c, "http.request.resend_count")
				if n.Int() == 1 {
					assert.False(t, ok, "the first attempt is not a resend")
				} else if assert.True(t, ok, "attempt %d of %s carries http.request.resend_count", n.Int(), step.AsString()) {
					assert.Equal(t, n.Int()-1, resend.Int())
				}
			}
			// fetch's first request hangs until its lease ends: fetch
			// always retries, so a resend_count crossed the wire.
			assert.GreaterOrEqual(t, attempts["fetch"], 2, "fetch retries")
			for _, sv := range servers {
				parent, ok := byID[sv.ParentSpanID()]
				require.True(t, ok, "server span %s has its parent in the trace", sv.Name())
				assert.Equal(t, ptrace.SpanKindClient, parent.Kind(), "server span %s is the child of the client span that sent it", sv.Name())
			}

			// The metrics: every point the demo counted arrived, and
			// the deadline.* instruments carry their attributes.
			assert.Equal(t, nPoints, s.dataPoints(), "every metric point the demo exported arrived")
			metrics := s.metricsByName()
			for _, name := range []string{otelbudget.MetricCallDuration, otelbudget.MetricAttemptDuration, otelbudget.MetricCallAttempts, otelbudget.MetricCallSlack} {
				require.Len(t, metrics[name], 1, "%s arrived once", name)
				assert.Equal(t, service, metrics[name][0].service)
			}
			attemptPoints := histogramPoints(metrics[otelbudget.MetricAttemptDuration])
			require.NotEmpty(t, attemptPoints, "%s is a histogram", otelbudget.MetricAttemptDuration)
			assert.Equal(t, "s", metrics[otelbudget.MetricAttemptDuration][0].m.Unit())
			recorded := map[string]uint64{}
			for _, dp := range attemptPoints {
				step, ok := dp.Attributes().Get(string(otelbudget.AttrStep))
				require.True(t, ok, "every attempt duration carries %s", otelbudget.AttrStep)
				_, ok = dp.Attributes().Get(string(otelbudget.AttrAttemptEndedBy))
				assert.True(t, ok, "every attempt duration carries %s", otelbudget.AttrAttemptEndedBy)
				recorded[step.AsString()] += dp.Count()
			}
			for step, n := range attempts {
				assert.Equal(t, uint64(n), recorded[step], "%s: one attempt duration per CLIENT span", step)
			}
			slack := histogramPoints(metrics[otelbudget.MetricCallSlack])
			var slackCount uint64
			for _, dp := range slack {
				for _, k := range []string{string(otelbudget.AttrStep), string(otelbudget.AttrStopReason), string(otelbudget.AttrVerdict)} {
					_, ok := dp.Attributes().Get(k)
					assert.True(t, ok, "every slack point carries %s", k)
				}
				slackCount += dp.Count()
			}
			assert.Equal(t, uint64(len(calls)), slackCount, "one slack measurement per call")
		})
	}
}

// TestOTLPRoundTripGRPCTransport runs the demo with -transport grpc (the
// providers are gRPC services, called through otelbudgetgrpc) and exports to
// a real OTLP/HTTP receiver: every span and point arrives, the trace is call
// span > otelgrpc CLIENT span > otelgrpc SERVER span, the attempt attributes
// are on the CLIENT spans and the server's budget on the SERVER spans, no
// gRPC attempt carries http.request.resend_count, and the deadline.*
// metrics arrive. As in TestOTLPRoundTrip, -budget keeps the exit code
// independent of the attempts a loaded machine makes.
func TestOTLPRoundTripGRPCTransport(t *testing.T) {
	s := &sink{}
	endpoint := httpReceiver(t, s)
	r := runDemo(t, demoBin, otlpEnv("http/protobuf", endpoint, "otlpcheck-grpc"), "-scenario", "ok", "-budget", "1s", "-transport", "grpc")
	require.Equal(t, 0, r.code, "stderr:\n%s", r.stderr)
	assert.Contains(t, r.stdout, "verdicts search=")
	nSpans, nPoints := exported(t, r.stderr, "otlp http/protobuf")

	spans := s.spans()
	require.Len(t, spans, nSpans, "every span the demo exported arrived")
	byID := map[pcommon.SpanID]ptrace.Span{}
	for _, r := range spans {
		assert.Equal(t, spans[0].span.TraceID(), r.span.TraceID(), "span %s is in the run's one trace", r.span.Name())
		byID[r.span.SpanID()] = r.span
	}
	var clients, servers int
	for _, r := range spans {
		sp := r.span
		switch sp.Kind() {
		case ptrace.SpanKindClient:
			clients++
			assert.True(t, strings.HasPrefix(sp.Name(), "tracedemo.Provider/"), "client span %s is otelgrpc's", sp.Name())
			call, ok := byID[sp.ParentSpanID()]
			require.True(t, ok, "client span %s has its call span", sp.Name())
			_, ok = attrOf(call, string(otelbudget.AttrVerdict))
			assert.True(t, ok, "the parent of %s is a call span, with its verdict", sp.Name())
			for _, k := range []string{
				string(otelbudget.AttrAttemptNumber), string(otelbudget.AttrAttemptGrantedMs), string(otelbudget.AttrAttemptRemainingMs),
				string(otelbudget.AttrAttemptLimitedBy), string(otelbudget.AttrAttemptEndedBy),
			} {
				_, ok := attrOf(sp, k)
				assert.True(t, ok, "client span %s carries %s", sp.Name(), k)
			}
			_, ok = attrOf(sp, "http.request.resend_count")
			assert.False(t, ok, "no resend count on a gRPC attempt")
		case ptrace.SpanKindServer:
			servers++
			parent, ok := byID[sp.ParentSpanID()]
			require.True(t, ok, "server span %s has its parent in the trace", sp.Name())
			assert.Equal(t, ptrace.SpanKindClient, parent.Kind(), "server span %s is the child of the CLIENT span that sent it", sp.Name())
			for _, k := range []string{
				string(otelbudget.AttrServerInboundBudgetMs), string(otelbudget.AttrServerMaxBudgetMs), string(otelbudget.AttrServerBudgetMs),
				string(otelbudget.AttrServerLimitedBy), string(otelbudget.AttrServerFloorMs),
			} {
				_, ok := attrOf(sp, k)
				assert.True(t, ok, "server span %s carries %s", sp.Name(), k)
			}
		}
	}
	assert.GreaterOrEqual(t, clients, 4, "search, fetch at least twice (its first request hangs), extract")
	assert.Positive(t, servers)

	assert.Equal(t, nPoints, s.dataPoints(), "every metric point the demo exported arrived")
	metrics := s.metricsByName()
	for _, name := range []string{otelbudget.MetricCallDuration, otelbudget.MetricAttemptDuration, otelbudget.MetricCallAttempts, otelbudget.MetricCallSlack} {
		require.Len(t, metrics[name], 1, "%s arrived once", name)
	}
}

// TestOTLPRefusals runs the refused scenario, where every step is refused
// below the floor (nothing in it depends on timing), and checks the
// refusals counter at the collector: one per step, on each protocol.
func TestOTLPRefusals(t *testing.T) {
	for _, tc := range receivers {
		t.Run(tc.protocol, func(t *testing.T) {
			s := &sink{}
			endpoint := tc.start(t, s)
			r := runDemo(t, demoBin, otlpEnv(tc.protocol, endpoint, "otlpcheck"), "-scenario", "refused")
			require.Equal(t, 0, r.code, "the refused scenario behaves as designed; stderr:\n%s", r.stderr)
			assert.Equal(t, "tracedemo: exported 4 spans and 12 metric points to otlp "+tc.protocol+"\n", r.stderr)
			assert.Len(t, s.spans(), 4, "the run span and 3 call spans")
			assert.Equal(t, 12, s.dataPoints(), "3 calls × (duration, attempts, slack, refusals)")

			refusals := s.metricsByName()[otelbudget.MetricRefusals]
			require.Len(t, refusals, 1)
			m := refusals[0].m
			require.Equal(t, pmetric.MetricTypeSum, m.Type(), "a counter")
			assert.True(t, m.Sum().IsMonotonic())
			got := map[string]int64{}
			for _, dp := range m.Sum().DataPoints().All() {
				step, ok := dp.Attributes().Get(string(otelbudget.AttrStep))
				require.True(t, ok, "every refusal carries %s", otelbudget.AttrStep)
				got[step.AsString()] = dp.IntValue()
			}
			assert.Equal(t, map[string]int64{"search": 1, "fetch": 1, "extract": 1}, got)
			assert.NotEmpty(t, histogramPoints(s.metricsByName()[otelbudget.MetricCallSlack]), "slack of the refused calls: their whole budget")
		})
	}
}

// TestOTLPExponentialHistogram: with the standard variable
// OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION set to
// base2_exponential_bucket_histogram, which the OTLP metric exporters
// honour, the duration histograms arrive as exponential histograms (the
// explicit boundaries otelbudget advises give way to the exporter's
// choice), still with deadline.step.
func TestOTLPExponentialHistogram(t *testing.T) {
	for _, tc := range receivers {
		t.Run(tc.protocol, func(t *testing.T) {
			s := &sink{}
			endpoint := tc.start(t, s)
			env := otlpEnv(tc.protocol, endpoint, "otlpcheck")
			env["OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION"] = "base2_exponential_bucket_histogram"
			r := runDemo(t, demoBin, env, "-scenario", "ok", "-budget", "1s")
			require.Equal(t, 0, r.code, "stderr:\n%s", r.stderr)
			_, nPoints := exported(t, r.stderr, "otlp "+tc.protocol)
			assert.Equal(t, nPoints, s.dataPoints())

			metrics := s.metricsByName()
			for _, name := range []string{otelbudget.MetricAttemptDuration, otelbudget.MetricCallDuration, otelbudget.MetricCallSlack} {
				require.Len(t, metrics[name], 1, name)
				m := metrics[name][0].m
				require.Equal(t, pmetric.MetricTypeExponentialHistogram, m.Type(), "%s is an exponential histogram", name)
				require.NotZero(t, m.ExponentialHistogram().DataPoints().Len())
				for _, dp := range m.ExponentialHistogram().DataPoints().All() {
					_, ok := dp.Attributes().Get(string(otelbudget.AttrStep))
					assert.True(t, ok, "%s carries %s", name, otelbudget.AttrStep)
				}
			}
		})
	}
}

// TestUnreachableCollector runs the demo as a person does, with both
// signals sent to a port nobody listens on (127.0.0.1:9), on each
// protocol: it exits 0, says on one line of stderr what was not exported
// and why, and ends within its budget plus the export's 500ms grace. The
// bound allows a further 1.5s for starting and stopping the process on a
// loaded machine; before the grace bounded both signals together, a gRPC
// collector that did not answer kept the process for 3s after the run.
func TestUnreachableCollector(t *testing.T) {
	const (
		budget    = time.Second
		grace     = 500 * time.Millisecond // the demo's default -export-timeout
		allowance = 1500 * time.Millisecond
	)
	for _, proto := range []string{"http/protobuf", "grpc"} {
		t.Run(proto, func(t *testing.T) {
			r := runDemo(t, demoBin, otlpEnv(proto, "http://127.0.0.1:9", "otlpcheck"), "-scenario", "ok", "-budget", budget.String())
			t.Logf("%s: the process took %s (bound: budget %s + grace %s + %s)", proto, r.elapsed.Round(time.Millisecond), budget, grace, allowance)
			require.Equal(t, 0, r.code, "an export failure does not fail the run; stderr:\n%s", r.stderr)
			assert.Less(t, r.elapsed, budget+grace+allowance)
			assert.Contains(t, r.stdout, "verdicts search=")
			lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
			require.Len(t, lines, 1, "one line on stderr: %q", r.stderr)
			assert.Regexp(t, `^tracedemo: \d+ spans not exported to otlp `+regexp.QuoteMeta(proto)+`: .+; \d+ metric points not exported to otlp `+
				regexp.QuoteMeta(proto)+`: .+ \(the run itself is unaffected\)$`, lines[0])
		})
	}
}

package otlpcheck

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/deadlinebudget/budget/otelbudget"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// sink keeps every span an OTLP receiver decodes.
type sink struct {
	mu     sync.Mutex
	traces []ptrace.Traces
}

func (s *sink) add(td ptrace.Traces) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.traces = append(s.traces, td)
}

// received is one span with the resource and scope it came with.
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

// httpReceiver is an OTLP/HTTP endpoint (POST /v1/traces, binary protobuf)
// that decodes with the collector's pdata.
func httpReceiver(t *testing.T, s *sink) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.Error(w, "OTLP/HTTP traces only: POST /v1/traces", http.StatusNotFound)
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
			http.Error(w, "want application/x-protobuf, got "+ct, http.StatusUnsupportedMediaType)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(body); err != nil {
			http.Error(w, "not an OTLP ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
			return
		}
		s.add(req.Traces())
		resp, err := ptraceotlp.NewExportResponse().MarshalProto()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// grpcReceiver is an OTLP/gRPC TraceService on loopback, registered with
// the collector's pdata.
type grpcReceiver struct {
	ptraceotlp.UnimplementedGRPCServer
	s *sink
}

func (g *grpcReceiver) Export(_ context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	g.s.add(req.Traces())
	return ptraceotlp.NewExportResponse(), nil
}

func startGRPCReceiver(t *testing.T, s *sink) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	ptraceotlp.RegisterGRPCServer(srv, &grpcReceiver{s: s})
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

// buildDemo builds the demo in its own module (examples/tracedemo, the
// parent directory).
func buildDemo(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "tracedemo")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build ./examples/tracedemo: %s", out)
	return bin
}

// runDemo runs the demo binary with env added to the test's environment
// (the OTEL_* variables the test does not set are removed) and returns its
// stdout and stderr.
func runDemo(t *testing.T, bin string, env map[string]string, args ...string) (string, string) {
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
	require.NoError(t, cmd.Run(), "tracedemo %v: stdout:\n%s\nstderr:\n%s", args, stdout.String(), stderr.String())
	return stdout.String(), stderr.String()
}

func attrOf(sp ptrace.Span, key string) (pcommon.Value, bool) {
	return sp.Attributes().Get(key)
}

// TestOTLPRoundTrip runs the demo's ok scenario with the OTLP exporter that
// autoexport builds from the standard variables, once per protocol, and
// checks that the client and server spans arrive in one trace with
// http.request.resend_count and the deadline.* attributes.
func TestOTLPRoundTrip(t *testing.T) {
	bin := buildDemo(t)
	for _, tc := range []struct {
		protocol string
		start    func(*testing.T, *sink) string
	}{
		{"http/protobuf", httpReceiver},
		{"grpc", startGRPCReceiver},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			s := &sink{}
			endpoint := tc.start(t, s)
			service := "otlpcheck-" + strings.ReplaceAll(tc.protocol, "/", "-")
			stdout, stderr := runDemo(t, bin, map[string]string{
				"OTEL_TRACES_EXPORTER":        "otlp",
				"OTEL_EXPORTER_OTLP_PROTOCOL": tc.protocol,
				"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
				"OTEL_SERVICE_NAME":           service,
				"NO_COLOR":                    "1",
			}, "-scenario", "ok")
			assert.Empty(t, stderr, "the export succeeded: nothing on stderr")
			assert.Contains(t, stdout, "verdicts search=ok fetch=ok extract=ok")
			assert.NotContains(t, stdout, `"SpanContext"`, "spans went to the collector, not to stdout")

			spans := s.spans()
			require.Len(t, spans, 12, "1 run span, 3 call spans, 4 client and 4 server spans")
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
					if v, ok := attrOf(r.span, string(otelbudget.AttrVerdict)); ok {
						assert.Equal(t, "ok", v.AsString(), "call %s", r.span.Name())
						budget, ok := attrOf(r.span, string(otelbudget.AttrBudgetMs))
						require.True(t, ok, "call %s carries %s", r.span.Name(), otelbudget.AttrBudgetMs)
						assert.Equal(t, int64(1000), budget.Int())
						calls[r.span.Name()] = r.span
					}
				}
			}
			require.Len(t, calls, 3, "a call span per step")
			require.Len(t, clients, 4, "search 1, fetch 2, extract 1")
			require.Len(t, servers, 4, "one server span per request received")

			resends := map[string][]int64{}
			for _, c := range clients {
				step, ok := attrOf(c, string(otelbudget.AttrStep))
				require.True(t, ok, "client span %s carries %s", c.Name(), otelbudget.AttrStep)
				assert.Equal(t, calls[step.AsString()].SpanID(), c.ParentSpanID(), "the call span parents the attempt")
				for _, k := range []string{
					string(otelbudget.AttrAttemptNumber), string(otelbudget.AttrAttemptGrantedMs),
					string(otelbudget.AttrAttemptRemainingMs), string(otelbudget.AttrAttemptLimitedBy),
					string(otelbudget.AttrAttemptEndedBy),
				} {
					_, ok := attrOf(c, k)
					assert.True(t, ok, "client span of %s carries %s", step.AsString(), k)
				}
				n := int64(0)
				if v, ok := attrOf(c, "http.request.resend_count"); ok {
					n = v.Int()
				}
				resends[step.AsString()] = append(resends[step.AsString()], n)
			}
			assert.ElementsMatch(t, []int64{0, 1}, resends["fetch"], "fetch's retry carries http.request.resend_count 1")
			assert.Equal(t, []int64{0}, resends["search"])

			for _, sv := range servers {
				parent, ok := byID[sv.ParentSpanID()]
				require.True(t, ok, "server span %s has its parent in the trace", sv.Name())
				assert.Equal(t, ptrace.SpanKindClient, parent.Kind(), "server span %s is the child of the client span that sent it", sv.Name())
			}
		})
	}
}

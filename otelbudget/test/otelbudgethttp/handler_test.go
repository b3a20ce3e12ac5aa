package otelbudgethttp_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgethttp"
)

// The server tests use loopback httptest servers outside a synctest
// bubble. A lease that must end is a real one of a few tens of
// milliseconds; the tests wait for it with generous guards and never
// assert a wall-clock duration.

// site is a loopback server whose handler is otelbudgethttp.NewHandler
// over next, with a signal each time that handler has returned (a panic
// included), so that a test reads the SERVER span only once it has ended.
type site struct {
	*httptest.Server
	returned chan struct{}
	called   atomic.Int32 // how many times next ran
}

func newSite(t *testing.T, h *harness, next http.HandlerFunc, opts ...deadlinehttp.HandlerOption) *site {
	t.Helper()
	return newSiteIn(t, h, nil, next, opts...)
}

// newSiteIn is newSite with the handler run inside outer (an outer layer),
// when outer is not nil.
func newSiteIn(t *testing.T, h *harness, outer func(http.Handler) http.Handler, next http.HandlerFunc, opts ...deadlinehttp.HandlerOption) *site {
	t.Helper()
	s := &site{returned: make(chan struct{}, 16)}
	hh, err := otelbudgethttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.called.Add(1)
		next(w, r)
	}), "api", h.obs, opts...)
	require.NoError(t, err)
	if outer != nil {
		hh = outer(hh)
	}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { s.returned <- struct{}{} }()
		hh.ServeHTTP(w, r)
	}))
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// wait waits until the handler has returned for one more request.
func (s *site) wait(t *testing.T) {
	t.Helper()
	select {
	case <-s.returned:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not return within 10s")
	}
}

// get sends one GET with the given budget header lines, over h.base
// (no client instrumentation), and returns the status (0 on an error).
func (s *site) get(t *testing.T, h *harness, ctx context.Context, header ...string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	require.NoError(t, err)
	for _, v := range header {
		req.Header.Add(deadlinehttp.DefaultHeader, v)
	}
	resp, err := (&http.Client{Transport: h.base}).Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	return resp.StatusCode
}

// serverSpan returns the one SERVER span recorded.
func (h *harness) serverSpan(t *testing.T) sdktrace.ReadOnlySpan {
	t.Helper()
	var out []sdktrace.ReadOnlySpan
	for _, s := range h.rec.Ended() {
		if s.SpanKind() == trace.SpanKindServer {
			out = append(out, s)
		}
	}
	require.Len(t, out, 1, "one SERVER span")
	assert.Equal(t, otelhttpScope, out[0].InstrumentationScope().Name)
	return out[0]
}

// serverMetrics is what the server instruments recorded.
type serverMetrics struct {
	refusals map[string]int64  // by deadline.server.refusal
	clamps   int64             // sum
	budgets  map[string]uint64 // histogram count by deadline.server.limited_by
}

func (h *harness) serverMetrics(t *testing.T) serverMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	m := serverMetrics{refusals: map[string]int64{}, budgets: map[string]uint64{}}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelbudget.ScopeName {
			continue
		}
		for _, x := range sm.Metrics {
			switch x.Name {
			case otelbudget.MetricServerRefusals:
				assert.Equal(t, "{request}", x.Unit)
				for _, dp := range x.Data.(metricdata.Sum[int64]).DataPoints {
					v, _ := dp.Attributes.Value(otelbudget.AttrServerRefusal)
					m.refusals[v.AsString()] += dp.Value
				}
			case otelbudget.MetricServerClamps:
				for _, dp := range x.Data.(metricdata.Sum[int64]).DataPoints {
					assert.Zero(t, dp.Attributes.Len())
					m.clamps += dp.Value
				}
			case otelbudget.MetricServerBudget:
				assert.Equal(t, "s", x.Unit)
				for _, dp := range x.Data.(metricdata.Histogram[float64]).DataPoints {
					assert.Equal(t, 0.001, dp.Bounds[0])
					assert.Equal(t, 30.0, dp.Bounds[len(dp.Bounds)-1])
					v, _ := dp.Attributes.Value(otelbudget.AttrServerLimitedBy)
					m.budgets[v.AsString()] += dp.Count
				}
			}
		}
	}
	return m
}

func i64(v int64) attribute.Value  { return attribute.Int64Value(v) }
func str(v string) attribute.Value { return attribute.StringValue(v) }

// TestServerSpanAdmission: the SERVER span carries what the middleware
// decided, a refusal is an Error with a description, and the metrics count
// refusals, clamps and effective budgets.
func TestServerSpanAdmission(t *testing.T) {
	max, floor := deadlinehttp.WithMaxBudget(2*time.Second), deadlinehttp.WithFloor(20*time.Millisecond)
	common := map[attribute.Key]attribute.Value{
		otelbudget.AttrServerMaxBudgetMs: i64(2000),
		otelbudget.AttrServerFloorMs:     i64(20),
	}
	cases := []struct {
		name     string
		header   []string
		opts     []deadlinehttp.HandlerOption
		status   int
		want     map[attribute.Key]attribute.Value
		absent   []attribute.Key
		desc     string // the status description when refused
		refusal  string
		clamps   int64
		limitMet string
	}{
		{
			name: "header within the maximum", header: []string{"500"}, status: 200,
			want: map[attribute.Key]attribute.Value{
				otelbudget.AttrServerInboundBudgetMs: i64(500), otelbudget.AttrServerBudgetMs: i64(500),
				otelbudget.AttrServerLimitedBy: str("header"), otelbudget.AttrServerEndedBy: str("completed"),
			},
			absent:   []attribute.Key{otelbudget.AttrServerHeaderMalformed, otelbudget.AttrServerHeaderStripped, otelbudget.AttrServerContextRemainingMs},
			limitMet: "header",
		},
		{
			name: "header clamped to the maximum", header: []string{"60000"}, status: 200,
			want: map[attribute.Key]attribute.Value{
				otelbudget.AttrServerInboundBudgetMs: i64(60000), otelbudget.AttrServerBudgetMs: i64(2000),
				otelbudget.AttrServerLimitedBy: str("max"), otelbudget.AttrServerEndedBy: str("completed"),
			},
			clamps: 1, limitMet: "max",
		},
		{
			name: "no header", status: 200,
			want: map[attribute.Key]attribute.Value{
				otelbudget.AttrServerBudgetMs: i64(2000), otelbudget.AttrServerLimitedBy: str("max"),
			},
			absent:   []attribute.Key{otelbudget.AttrServerInboundBudgetMs, otelbudget.AttrServerHeaderMalformed},
			limitMet: "max",
		},
		{
			name: "malformed", header: []string{"soon"}, status: 200,
			want: map[attribute.Key]attribute.Value{
				otelbudget.AttrServerHeaderMalformed: attribute.BoolValue(true),
				otelbudget.AttrServerBudgetMs:        i64(2000), otelbudget.AttrServerLimitedBy: str("max"),
			},
			absent:   []attribute.Key{otelbudget.AttrServerInboundBudgetMs},
			limitMet: "max",
		},
		{
			name: "malformed with a valid member", header: []string{"soon, 300"}, status: 200,
			want: map[attribute.Key]attribute.Value{
				otelbudget.AttrServerHeaderMalformed: attribute.BoolValue(true),
				otelbudget.AttrServerInboundBudgetMs: i64(300), otelbudget.AttrServerBudgetMs: i64(300),
				otelbudget.AttrServerLimitedBy: str("header"),
			},
			limitMet: "header",
		},
		{
			name: "stripped at a trust edge", header: []string{"300"}, opts: []deadlinehttp.HandlerOption{deadlinehttp.WithStripHeader()}, status: 200,
			want: map[attribute.Key]attribute.Value{
				otelbudget.AttrServerHeaderStripped: attribute.BoolValue(true),
				otelbudget.AttrServerBudgetMs:       i64(2000), otelbudget.AttrServerLimitedBy: str("max"),
			},
			absent:   []attribute.Key{otelbudget.AttrServerInboundBudgetMs},
			limitMet: "max",
		},
		{
			name: "zero: spent", header: []string{"0"}, status: 504,
			want: map[attribute.Key]attribute.Value{
				otelbudget.AttrServerInboundBudgetMs: i64(0), otelbudget.AttrServerBudgetMs: i64(0),
				otelbudget.AttrServerLimitedBy: str("header"),
				otelbudget.AttrServerRefused:   attribute.BoolValue(true), otelbudget.AttrServerRefusal: str("spent"),
				semconv.ErrorTypeKey: str("deadline_refused"),
			},
			absent:  []attribute.Key{otelbudget.AttrServerEndedBy},
			desc:    "budget spent: the request's header said 0",
			refusal: "spent", limitMet: "header",
		},
		{
			name: "below the floor", header: []string{"5"}, status: 504,
			want: map[attribute.Key]attribute.Value{
				otelbudget.AttrServerInboundBudgetMs: i64(5), otelbudget.AttrServerBudgetMs: i64(5),
				otelbudget.AttrServerLimitedBy: str("header"),
				otelbudget.AttrServerRefused:   attribute.BoolValue(true), otelbudget.AttrServerRefusal: str("floor"),
				semconv.ErrorTypeKey: str("deadline_refused"),
			},
			absent:  []attribute.Key{otelbudget.AttrServerEndedBy},
			desc:    "budget 5ms at or below the 20ms floor",
			refusal: "floor", limitMet: "header",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			s := newSite(t, h, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") },
				append([]deadlinehttp.HandlerOption{max, floor}, tc.opts...)...)
			assert.Equal(t, tc.status, s.get(t, h, context.Background(), tc.header...))
			s.wait(t)
			h.requireAllEnded(t)

			span := h.serverSpan(t)
			a := attrs(span)
			for k, v := range common {
				assert.Equal(t, v, a[k], "%s", k)
			}
			for k, v := range tc.want {
				assert.Equal(t, v, a[k], "%s", k)
			}
			for _, k := range tc.absent {
				assert.NotContains(t, a, k)
			}
			assert.Equal(t, int64(tc.status), a[semconv.HTTPResponseStatusCodeKey].AsInt64(), "otelhttp's attributes are kept")

			m := h.serverMetrics(t)
			assert.Equal(t, tc.clamps, m.clamps)
			assert.Equal(t, map[string]uint64{tc.limitMet: 1}, m.budgets)
			if tc.refusal == "" {
				assert.Equal(t, int32(1), s.called.Load())
				assert.Equal(t, codes.Unset, span.Status().Code)
				assert.Empty(t, m.refusals)
				return
			}
			assert.Zero(t, s.called.Load(), "a refused request never reaches next")
			assert.Equal(t, sdktrace.Status{Code: codes.Error, Description: tc.desc}, span.Status(),
				"the description survives otelhttp's status for the 504")
			assert.Equal(t, map[string]int64{tc.refusal: 1}, m.refusals)
		})
	}
}

// TestServerSpanOuterDeadline: an outer layer's deadline shorter than the
// header and the maximum sets the budget.
func TestServerSpanOuterDeadline(t *testing.T) {
	h := newHarness(t)
	s := newSiteIn(t, h, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
			defer cancel()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}, func(w http.ResponseWriter, r *http.Request) {})
	assert.Equal(t, 200, s.get(t, h, context.Background(), "20000"))
	s.wait(t)
	h.requireAllEnded(t)
	a := attrs(h.serverSpan(t))
	assert.Equal(t, "context", a[otelbudget.AttrServerLimitedBy].AsString())
	assert.Equal(t, int64(20000), a[otelbudget.AttrServerInboundBudgetMs].AsInt64())
	budget := a[otelbudget.AttrServerBudgetMs].AsInt64()
	assert.Positive(t, budget)
	assert.LessOrEqual(t, budget, int64(5000))
	assert.Equal(t, budget, a[otelbudget.AttrServerContextRemainingMs].AsInt64())
	assert.Equal(t, map[string]uint64{"context": 1}, h.serverMetrics(t).budgets)
}

// TestServerSpanLeaseEnded: a handler whose lease ends while it runs is an
// Error on the SERVER span with ended_by, whatever it answered, and however
// it stopped (returning or aborting the response).
func TestServerSpanLeaseEnded(t *testing.T) {
	cases := []struct {
		name    string
		next    http.HandlerFunc
		status  int // 0: no response
		endedBy string
	}{
		{"returns with a 504", func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
			http.Error(w, "too late", http.StatusGatewayTimeout)
		}, 504, "deadline"},
		{"returns with a 200", func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}, 200, "deadline"},
		{"aborts", func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
			panic(http.ErrAbortHandler)
		}, 0, "abort"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			s := newSite(t, h, tc.next)
			assert.Equal(t, tc.status, s.get(t, h, context.Background(), "30"))
			s.wait(t)
			h.requireAllEnded(t)
			span := h.serverSpan(t)
			a := attrs(span)
			assert.Equal(t, tc.endedBy, a[otelbudget.AttrServerEndedBy].AsString())
			assert.Equal(t, "deadline_exceeded", a[semconv.ErrorTypeKey].AsString())
			assert.Equal(t, sdktrace.Status{Code: codes.Error, Description: "the handler's lease ended (budget 30ms)"}, span.Status())
			if tc.status == 0 {
				require.NotEmpty(t, span.Events(), "otelhttp's End still records the panic")
				assert.Equal(t, "exception", span.Events()[0].Name)
			}
		})
	}
}

// TestServerSpanCanceled: a caller that goes away while the handler runs
// is recorded (ended_by=canceled), not as an error.
func TestServerSpanCanceled(t *testing.T) {
	h := newHarness(t)
	arrived := make(chan struct{})
	s := newSite(t, h, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	assert.Zero(t, s.get(t, h, ctx, "10000"))
	s.wait(t)
	h.requireAllEnded(t)
	span := h.serverSpan(t)
	assert.Equal(t, "canceled", attrs(span)[otelbudget.AttrServerEndedBy].AsString())
	assert.NotContains(t, attrs(span), semconv.ErrorTypeKey)
	assert.Equal(t, codes.Unset, span.Status().Code)
}

// TestServerPanicPropagates: a panic in next reaches the caller of
// ServeHTTP with its own value, and the SERVER span is ended with what
// happened.
func TestServerPanicPropagates(t *testing.T) {
	cases := []struct {
		name    string
		value   any
		endedBy string
		errType string
		desc    string
	}{
		{"any value", "boom", "panic", "panic", "panic"},
		{"abort with the lease left", http.ErrAbortHandler, "abort", "aborted", "the handler aborted the response (http.ErrAbortHandler)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			hh, err := otelbudgethttp.NewHandler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
				panic(tc.value)
			}), "api", h.obs)
			require.NoError(t, err)
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.Header.Set(deadlinehttp.DefaultHeader, "1000")
			require.PanicsWithValue(t, tc.value, func() { hh.ServeHTTP(httptest.NewRecorder(), req) })
			h.requireAllEnded(t)
			span := h.serverSpan(t)
			a := attrs(span)
			assert.Equal(t, tc.endedBy, a[otelbudget.AttrServerEndedBy].AsString())
			assert.Equal(t, tc.errType, a[semconv.ErrorTypeKey].AsString())
			assert.Equal(t, sdktrace.Status{Code: codes.Error, Description: tc.desc}, span.Status())
			require.NotEmpty(t, span.Events())
			assert.Equal(t, "exception", span.Events()[0].Name, "the SDK's exception event is kept")
		})
	}
}

// TestServerTwoHop: a call through otelbudgethttp.NewTransport to a server
// built with otelbudgethttp.NewHandler is one trace: call span > CLIENT
// span > SERVER span, the server's budget the client's lease.
func TestServerTwoHop(t *testing.T) {
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })

	h := newHarness(t)
	leases := make(chan time.Duration, 1)
	s := newSite(t, h, func(w http.ResponseWriter, r *http.Request) {
		d, _ := deadline.FromContext(r.Context())
		leases <- d.Budget()
		_, _ = io.WriteString(w, "ok")
	}, deadlinehttp.WithMaxBudget(5*time.Second), deadlinehttp.WithFloor(20*time.Millisecond))

	client := &http.Client{Transport: otelbudgethttp.NewTransport(h.base, h.obs, deadlinehttp.WithPolicy(policy("fetch")))}
	ctx := deadline.NewContext(context.Background(), deadline.New(10*time.Second))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	s.wait(t)
	h.requireAllEnded(t)
	assert.Equal(t, 2*time.Second, <-leases, "the server runs under the client's lease")

	require.Len(t, h.rec.Ended(), 3)
	call := h.byScope(otelbudget.ScopeName)[0]
	var clientSpan sdktrace.ReadOnlySpan
	for _, sp := range h.byScope(otelhttpScope) {
		if sp.SpanKind() == trace.SpanKindClient {
			clientSpan = sp
		}
	}
	require.NotNil(t, clientSpan)
	server := h.serverSpan(t)
	for _, sp := range []sdktrace.ReadOnlySpan{clientSpan, server} {
		assert.Equal(t, call.SpanContext().TraceID(), sp.SpanContext().TraceID(), "one trace")
	}
	assert.Equal(t, call.SpanContext().SpanID(), clientSpan.Parent().SpanID(), "CLIENT span under the call span")
	assert.Equal(t, clientSpan.SpanContext().SpanID(), server.Parent().SpanID(), "SERVER span under the CLIENT span")
	assert.True(t, server.Parent().IsRemote())

	granted := attrs(clientSpan)[otelbudget.AttrAttemptGrantedMs].AsInt64()
	a := attrs(server)
	assert.Equal(t, int64(2000), granted)
	assert.Equal(t, granted, a[otelbudget.AttrServerInboundBudgetMs].AsInt64(), "the server saw the client's lease")
	assert.Equal(t, granted, a[otelbudget.AttrServerBudgetMs].AsInt64())
	assert.Equal(t, "header", a[otelbudget.AttrServerLimitedBy].AsString())
	assert.Equal(t, int64(5000), a[otelbudget.AttrServerMaxBudgetMs].AsInt64())
	assert.Equal(t, "completed", a[otelbudget.AttrServerEndedBy].AsString())
}

// TestServerKeepsCallersAdmission: a WithAdmission the caller passes runs
// too, after the composition's.
func TestServerKeepsCallersAdmission(t *testing.T) {
	h := newHarness(t)
	var seen []deadlinehttp.Admission
	var spanHadBudget bool
	s := newSite(t, h, func(w http.ResponseWriter, r *http.Request) {},
		deadlinehttp.WithAdmission(func(r *http.Request, a deadlinehttp.Admission) {
			seen = append(seen, a)
			spanHadBudget = trace.SpanFromContext(r.Context()).IsRecording()
		}))
	assert.Equal(t, 200, s.get(t, h, context.Background(), "700"))
	s.wait(t)
	require.Len(t, seen, 1)
	assert.Equal(t, 700*time.Millisecond, seen[0].Budget)
	assert.True(t, spanHadBudget, "the caller's callback sees the SERVER span")
	assert.Equal(t, int64(700), attrs(h.serverSpan(t))[otelbudget.AttrServerBudgetMs].AsInt64())
}

// TestServerFilteredRequest: a request otelhttp's filter excludes has no
// span, and still its budget and metrics; another span in the context is
// not decorated.
func TestServerFilteredRequest(t *testing.T) {
	h := newHarness(t)
	called := 0
	hh, err := otelbudgethttp.NewHandlerWith(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called++ }),
		"api", h.obs, []otelhttp.Option{otelhttp.WithFilter(func(*http.Request) bool { return false })},
		deadlinehttp.WithFloor(20*time.Millisecond))
	require.NoError(t, err)
	ctx, outer := h.obs.TracerProvider().Tracer("outer").Start(context.Background(), "outer")
	for _, v := range []string{"500", "5"} {
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
		req.Header.Set(deadlinehttp.DefaultHeader, v)
		hh.ServeHTTP(httptest.NewRecorder(), req)
	}
	outer.End()
	assert.Equal(t, 1, called)
	require.Len(t, h.rec.Ended(), 1)
	for k := range attrs(h.rec.Ended()[0]) {
		assert.NotContains(t, string(k), "deadline.", "the outer span is not this handler's")
	}
	m := h.serverMetrics(t)
	assert.Equal(t, map[string]int64{"floor": 1}, m.refusals)
	assert.Equal(t, map[string]uint64{"header": 2}, m.budgets)
}

func TestServerInvalidOptions(t *testing.T) {
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for name, build := range map[string]func() (http.Handler, error){
		"floor": func() (http.Handler, error) {
			return otelbudgethttp.NewHandler(ok, "api", nil, deadlinehttp.WithFloor(-1))
		},
		"nil next": func() (http.Handler, error) { return otelbudgethttp.NewHandler(nil, "api", nil) },
		"with": func() (http.Handler, error) {
			return otelbudgethttp.NewHandlerWith(ok, "api", nil, nil, deadlinehttp.WithMaxBudget(0))
		},
	} {
		t.Run(name, func(t *testing.T) {
			hh, err := build()
			assert.Nil(t, hh)
			require.ErrorIs(t, err, deadline.ErrInvalidPolicy)
			var pe *deadline.PolicyError
			assert.ErrorAs(t, err, &pe)
		})
	}
	hh, err := otelbudgethttp.NewHandler(ok, "api", nil, nil)
	require.NoError(t, err, "a nil observer means the global providers; nil options are ignored")
	assert.NotNil(t, hh)
}

// TestServerAllocations: with no-op providers the composition allocates
// no more per request than otelhttp around deadlinehttp, built by hand.
// The figures are means over many requests, interleaved, and compared with
// half an allocation of slack: under the race detector sync.Pool drops
// items at random (fmt's printers in http.Error, otelhttp's pools), which
// moves either mean by a fraction; one more allocation per request would
// move it by one.
func TestServerAllocations(t *testing.T) {
	tp, mp := tracenoop.NewTracerProvider(), metricnoop.NewMeterProvider()
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp), otelbudget.WithMeterProvider(mp))
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	floor := deadlinehttp.WithFloor(20 * time.Millisecond)
	composed, err := otelbudgethttp.NewHandler(next, "api", obs, floor)
	require.NoError(t, err)
	inner, err := deadlinehttp.NewHandler(next, floor)
	require.NoError(t, err)
	byHand := otelhttp.NewHandler(inner, "api", otelhttp.WithTracerProvider(tp), otelhttp.WithMeterProvider(mp))
	w := discardWriter{http.Header{}}
	for _, v := range []string{"500", "5"} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set(deadlinehttp.DefaultHeader, v)
		var base, got float64
		for range 3 {
			base += meanAllocs(1000, func() { byHand.ServeHTTP(w, req) })
			got += meanAllocs(1000, func() { composed.ServeHTTP(w, req) })
		}
		base, got = base/3, got/3
		assert.Less(t, got, base+0.5, "header %s: composed %.2f allocations, by hand %.2f", v, got, base)
		t.Logf("header %s: composed %.2f allocations per request, otelhttp(deadlinehttp) by hand %.2f", v, got, base)
	}
}

// meanAllocs is testing.AllocsPerRun without its rounding down to an
// integer: the mean number of allocations of f over n calls, after a
// warm-up call, on one P.
func meanAllocs(n int, f func()) float64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs-before.Mallocs) / float64(n)
}

// discardWriter is a ResponseWriter that keeps nothing, so that it
// allocates the same for every request (a recorder's body would grow).
type discardWriter struct{ h http.Header }

func (w discardWriter) Header() http.Header         { return w.h }
func (w discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w discardWriter) WriteHeader(int)             {}

package otelbudgethttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgethttp"
)

// These tests use real loopback HTTP (httptest) outside a synctest bubble:
// they assert counts, kinds, links and attributes, never wall-clock
// durations.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const otelhttpScope = "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

type harness struct {
	rec    *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	obs    *otelbudget.Observer
	base   *http.Transport
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	return &harness{
		rec: rec, reader: reader, base: base,
		obs: otelbudget.New(otelbudget.WithTracerProvider(tp), otelbudget.WithMeterProvider(mp)),
	}
}

func (h *harness) requireAllEnded(t *testing.T) {
	t.Helper()
	require.Equal(t, len(h.rec.Started()), len(h.rec.Ended()), "started spans == ended spans")
}

func (h *harness) byScope(scope string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range h.rec.Ended() {
		if s.InstrumentationScope().Name == scope {
			out = append(out, s)
		}
	}
	return out
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// flaky answers 503 to the first n requests, then 200 "ok".
func flaky(n int32, seen *atomic.Int32, budgets chan<- string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if budgets != nil {
			budgets <- r.Header.Get(deadlinehttp.DefaultHeader)
		}
		if seen.Add(1) <= n {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}
}

func policy(name string) deadline.Policy {
	return deadline.Policy{
		Name: name, MaxAttempts: 3, AttemptTimeout: 2 * time.Second, Floor: 20 * time.Millisecond,
		Backoff: deadline.Backoff{Base: time.Millisecond, Max: time.Millisecond, Jitter: deadline.JitterNone},
	}
}

func TestOneClientSpanPerPhysicalRequest(t *testing.T) {
	h := newHarness(t)
	var seen atomic.Int32
	budgets := make(chan string, 3)
	srv := httptest.NewServer(flaky(2, &seen, budgets))
	defer srv.Close()

	client := &http.Client{Transport: otelbudgethttp.NewTransport(h.base, h.obs, deadlinehttp.WithPolicy(policy("fetch")))}
	ctx := deadline.NewContext(context.Background(), deadline.New(10*time.Second))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, "ok", string(body))
	assert.Equal(t, int32(3), seen.Load())
	close(budgets)
	for b := range budgets {
		assert.NotEmpty(t, b, "every attempt sends its lease")
	}

	h.requireAllEnded(t)
	require.Len(t, h.rec.Ended(), 4, "one span per physical request plus the call span")
	calls := h.byScope(otelbudget.ScopeName)
	require.Len(t, calls, 1)
	call := calls[0]
	assert.Equal(t, "fetch", call.Name())
	assert.Equal(t, trace.SpanKindInternal, call.SpanKind())
	for k := range attrs(call) {
		assert.False(t, strings.HasPrefix(string(k), "http."), "no http.* on the call span: %s", k)
	}
	assert.Equal(t, "ok", attrs(call)[otelbudget.AttrVerdict].AsString())
	assert.Equal(t, int64(3), attrs(call)[otelbudget.AttrAttempts].AsInt64())

	reqs := h.byScope(otelhttpScope)
	require.Len(t, reqs, 3)
	wantStatus := []int64{503, 503, 200}
	wantEnded := []string{"error", "error", "completed"}
	for i, s := range reqs {
		a := attrs(s)
		n := int64(i + 1)
		assert.Equal(t, trace.SpanKindClient, s.SpanKind())
		assert.Equal(t, "HTTP GET", s.Name())
		assert.Equal(t, call.SpanContext().SpanID(), s.Parent().SpanID(), "request %d is a child of the call span", n)
		assert.Equal(t, wantStatus[i], a[semconv.HTTPResponseStatusCodeKey].AsInt64())
		assert.Equal(t, "GET", a[semconv.HTTPRequestMethodKey].AsString(), "otelhttp's own attributes are kept")
		assert.Equal(t, n, a[otelbudget.AttrAttemptNumber].AsInt64())
		assert.Equal(t, int64(2000), a[otelbudget.AttrAttemptGrantedMs].AsInt64())
		assert.Equal(t, "ceiling", a[otelbudget.AttrAttemptLimitedBy].AsString())
		assert.Contains(t, a, otelbudget.AttrAttemptRemainingMs)
		assert.Equal(t, wantEnded[i], a[otelbudget.AttrAttemptEndedBy].AsString())
		if n == 1 {
			assert.NotContains(t, a, semconv.HTTPRequestResendCountKey, "absent on the first request")
		} else {
			assert.Equal(t, n-1, a[semconv.HTTPRequestResendCountKey].AsInt64())
		}
		if n < 3 {
			assert.Equal(t, codes.Error, s.Status().Code)
			assert.True(t, a[otelbudget.AttrAttemptRetryable].AsBool())
			assert.Equal(t, "policy", a[otelbudget.AttrBackoffSource].AsString())
			assert.Equal(t, "503", a[semconv.ErrorTypeKey].AsString())
		} else {
			assert.Equal(t, codes.Unset, s.Status().Code)
		}
	}

	// otelhttp's client metrics go to the observer's meter provider.
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	scopes := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		scopes[sm.Scope.Name] = true
	}
	assert.True(t, scopes[otelhttpScope], "otelhttp metrics on the observer's provider")
	assert.True(t, scopes[otelbudget.ScopeName])
}

func TestRetryAfterTooLongIsThrottled(t *testing.T) {
	h := newHarness(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	client := &http.Client{Transport: otelbudgethttp.NewTransport(h.base, h.obs, deadlinehttp.WithPolicy(policy("search")))}
	ctx := deadline.NewContext(context.Background(), deadline.New(5*time.Second))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err) // the 503 is the response; StopOf says why it was not retried
	require.NoError(t, resp.Body.Close())
	stop, ok := deadlinehttp.StopOf(resp)
	require.True(t, ok)
	require.ErrorIs(t, stop, deadline.ErrRetryAfterExceedsBudget)
	h.requireAllEnded(t)
	call := h.byScope(otelbudget.ScopeName)[0]
	assert.Equal(t, "throttled", attrs(call)[otelbudget.AttrVerdict].AsString())
	assert.Equal(t, codes.Error, call.Status().Code)
	reqs := h.byScope(otelhttpScope)
	require.Len(t, reqs, 1)
	a := attrs(reqs[0])
	assert.Equal(t, int64(30000), a[otelbudget.AttrRetryAfterMs].AsInt64())
	assert.Equal(t, "retry_after", a[otelbudget.AttrBackoffSource].AsString())
	assert.False(t, a[otelbudget.AttrBackoffFits].AsBool())
}

// TestCanceledMidRequest: the caller cancels while the server holds the
// request; every span ends and none is an error.
func TestCanceledMidRequest(t *testing.T) {
	h := newHarness(t)
	arrived := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
	}))
	defer srv.Close()
	client := &http.Client{Transport: otelbudgethttp.NewTransport(h.base, h.obs, deadlinehttp.WithPolicy(policy("fetch")))}
	ctx, cancel := context.WithCancel(deadline.NewContext(context.Background(), deadline.New(10*time.Second)))
	go func() {
		<-arrived
		cancel()
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	_, err = client.Do(req)
	require.ErrorIs(t, err, context.Canceled)
	h.requireAllEnded(t)
	require.Len(t, h.rec.Ended(), 2)
	call := h.byScope(otelbudget.ScopeName)[0]
	assert.Equal(t, "canceled", attrs(call)[otelbudget.AttrVerdict].AsString())
	assert.Equal(t, codes.Unset, call.Status().Code)
	r := h.byScope(otelhttpScope)[0]
	assert.Equal(t, "canceled", attrs(r)[otelbudget.AttrAttemptEndedBy].AsString())
	assert.Equal(t, codes.Unset, r.Status().Code, "a caller's cancellation is not an error")
}

type panicky struct{}

func (panicky) RoundTrip(*http.Request) (*http.Response, error) { panic("base transport") }

// TestPanicEndsEverySpan: a panic in the base transport still ends the
// CLIENT span otelhttp started and the call span.
func TestPanicEndsEverySpan(t *testing.T) {
	h := newHarness(t)
	tr := otelbudgethttp.NewTransport(panicky{}, h.obs, deadlinehttp.WithPolicy(policy("fetch")))
	req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/", nil)
	require.NoError(t, err)
	require.PanicsWithValue(t, "base transport", func() { _, _ = tr.RoundTrip(req) })
	h.requireAllEnded(t)
	require.Len(t, h.rec.Ended(), 2)
	r := h.byScope(otelhttpScope)[0]
	assert.Equal(t, "panic", attrs(r)[otelbudget.AttrAttemptEndedBy].AsString())
	assert.Equal(t, "panic", attrs(h.byScope(otelbudget.ScopeName)[0])[otelbudget.AttrStopReason].AsString())
}

// TestNewBasePropagates: otelhttp options pass through NewBase, and the
// CLIENT span's context reaches the server.
func TestNewBasePropagates(t *testing.T) {
	h := newHarness(t)
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Traceparent")
	}))
	defer srv.Close()
	base := otelbudgethttp.NewBase(h.base, h.obs, otelhttp.WithPropagators(propagation.TraceContext{}))
	tr := deadlinehttp.NewTransport(base, deadlinehttp.WithHooks(h.obs.ClientHooks()), deadlinehttp.WithPolicy(policy("fetch")))
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	h.requireAllEnded(t)
	r := h.byScope(otelhttpScope)
	require.Len(t, r, 1)
	assert.Contains(t, <-got, r[0].SpanContext().SpanID().String(), "the server's parent is the CLIENT span")
}

func TestNilObserverAndBase(t *testing.T) {
	tr := otelbudgethttp.NewTransport(nil, nil)
	require.NotNil(t, tr)
	require.NotNil(t, otelbudgethttp.NewBase(nil, nil))
	// An invalid option is the transport's error, not a panic.
	req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/", nil)
	require.NoError(t, err)
	_, err = otelbudgethttp.NewTransport(nil, nil, deadlinehttp.WithHeader("bad header")).RoundTrip(req)
	require.ErrorIs(t, err, deadline.ErrInvalidPolicy)
	var pe *deadline.PolicyError
	assert.True(t, errors.As(err, &pe))
}

// countingBase counts CloseIdleConnections calls on its way to the pool.
type countingBase struct {
	*http.Transport
	closed atomic.Int32
}

func (b *countingBase) CloseIdleConnections() {
	b.closed.Add(1)
	b.Transport.CloseIdleConnections()
}

// TestCloseIdleConnectionsReachesBase: http.Client.CloseIdleConnections
// reaches the base transport through deadlinehttp and otelhttp, which does
// not forward it itself.
func TestCloseIdleConnectionsReachesBase(t *testing.T) {
	h := newHarness(t)
	base := &countingBase{Transport: h.base}
	client := &http.Client{Transport: otelbudgethttp.NewTransport(base, h.obs)}
	client.CloseIdleConnections()
	assert.Equal(t, int32(1), base.closed.Load())
	otelbudgethttp.NewTransport(nil, h.obs).CloseIdleConnections() // http.DefaultTransport: no panic
}

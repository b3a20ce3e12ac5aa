package otelbudgethttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgethttp"
)

type attachment struct {
	name  string
	hooks func(*otelbudget.Observer) *deadline.Hooks
}

var attachments = []attachment{
	{"-", func(*otelbudget.Observer) *deadline.Hooks { return nil }},
	{"Hooks", (*otelbudget.Observer).Hooks},
	{"ClientHooks", (*otelbudget.Observer).ClientHooks},
}

// TestHTTPAttachedTwiceIsHarmless: otelbudgethttp.NewTransport attaches
// ClientHooks through the transport; the same observer attached again on
// the policy, on the context, or as a second transport option (Hooks or
// ClientHooks, in every combination) changes nothing: one call span, one
// CLIENT span per request carrying the attempt attributes, no INTERNAL
// attempt span, and the call counted once.
func TestHTTPAttachedTwiceIsHarmless(t *testing.T) {
	for _, onPolicy := range attachments {
		for _, onContext := range attachments {
			for _, onTransport := range attachments {
				t.Run(fmt.Sprintf("policy=%s/context=%s/transport+=%s", onPolicy.name, onContext.name, onTransport.name), func(t *testing.T) {
					h := newHarness(t)
					var seen atomic.Int32
					srv := httptest.NewServer(flaky(1, &seen, nil))
					defer srv.Close()
					p := policy("fetch")
					p.Hooks = onPolicy.hooks(h.obs)
					tr := otelbudgethttp.NewTransport(h.base, h.obs, deadlinehttp.WithPolicy(p), deadlinehttp.WithHooks(onTransport.hooks(h.obs)))
					ctx := deadline.WithHooks(deadline.NewContext(context.Background(), deadline.New(10*time.Second)), onContext.hooks(h.obs))
					req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
					require.NoError(t, err)
					resp, err := (&http.Client{Transport: tr}).Do(req)
					require.NoError(t, err)
					_, _ = io.Copy(io.Discard, resp.Body)
					require.NoError(t, resp.Body.Close())
					h.requireAllEnded(t)

					calls := h.byScope(otelbudget.ScopeName)
					require.Len(t, calls, 1, "one call span and no INTERNAL attempt span")
					assert.Equal(t, "fetch", calls[0].Name())
					reqs := h.byScope(otelhttpScope)
					require.Len(t, reqs, 2, "one CLIENT span per request")
					for i, r := range reqs {
						assert.Equal(t, trace.SpanKindClient, r.SpanKind())
						assert.Equal(t, calls[0].SpanContext().SpanID(), r.Parent().SpanID())
						assert.Equal(t, int64(i+1), attrs(r)[otelbudget.AttrAttemptNumber].AsInt64())
					}
					assert.Equal(t, "error", attrs(reqs[0])[otelbudget.AttrAttemptEndedBy].AsString())
					assert.Len(t, calls[0].Events(), 1, "one backoff event")

					var rm metricdata.ResourceMetrics
					require.NoError(t, h.reader.Collect(context.Background(), &rm))
					for _, sm := range rm.ScopeMetrics {
						for _, m := range sm.Metrics {
							if m.Name == otelbudget.MetricCallDuration {
								dps := m.Data.(metricdata.Histogram[float64]).DataPoints
								require.Len(t, dps, 1)
								assert.Equal(t, uint64(1), dps[0].Count, "the call is counted once")
							}
						}
					}
				})
			}
		}
	}
}

// TestHTTPNestedCall: an HTTP call made inside another call's operation,
// with the same observer on the outer policy and on the context, is a call
// of its own, a child of the outer attempt.
func TestHTTPNestedCall(t *testing.T) {
	h := newHarness(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	client := &http.Client{Transport: otelbudgethttp.NewTransport(h.base, h.obs, deadlinehttp.WithPolicy(policy("fetch")))}
	ctx := deadline.WithHooks(context.Background(), h.obs.Hooks())
	outer := deadline.Policy{Name: "run", MaxAttempts: 1, Hooks: h.obs.Hooks()}
	_, err := deadline.Do(ctx, deadline.New(10*time.Second), outer, func(ctx context.Context, _ deadline.AttemptInfo) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if err != nil {
			return "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	})
	require.NoError(t, err)
	h.requireAllEnded(t)
	byName := map[string][]string{}
	ids := map[string]trace.SpanID{}
	for _, s := range h.rec.Ended() {
		byName[s.Name()] = append(byName[s.Name()], s.Parent().SpanID().String())
		ids[s.Name()] = s.SpanContext().SpanID()
	}
	require.Len(t, byName["run"], 1)
	require.Len(t, byName["run attempt"], 1)
	require.Len(t, byName["fetch"], 1)
	require.Len(t, byName["HTTP GET"], 1)
	assert.Len(t, h.rec.Ended(), 4)
	assert.Equal(t, ids["run attempt"].String(), byName["fetch"][0], "the HTTP call is a child of the outer attempt")
	assert.Equal(t, ids["fetch"].String(), byName["HTTP GET"][0], "its request is a child of its call")
}

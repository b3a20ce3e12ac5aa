package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/otelbudget"
)

// TestScenariosLoopback runs every scenario for real, on loopback HTTP with
// the article's seed, outside any synctest bubble. Timing on a shared
// machine varies, so it asserts only what each scenario is designed to
// produce (verdicts, stop reasons, attempt and request counts) and never a
// duration. Each scenario's budget leaves room for that variation in the
// direction that matters (see scenarios.go).
func TestScenariosLoopback(t *testing.T) {
	for _, tc := range scenarioCases {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := findScenario(tc.name)
			require.NoError(t, err)
			sr := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
			rec, ps, _, err := execute(context.Background(), sc, defaultSeed, sc.budget, tp)
			require.NoError(t, err)
			assert.Equal(t, tc.calls, callLines(rec))
			assert.Equal(t, tc.notRun, notRunLines(rec))
			assert.Equal(t, tc.requests, requestCounts(ps))
			assert.NoError(t, check(sc, rec, ps))

			// One client span per request sent, one server span per request
			// received: the wire and the trace agree.
			spans := sr.Ended()
			total := 0
			for _, n := range tc.requests {
				total += n
			}
			assert.Len(t, spansOfKind(spans, trace.SpanKindClient), total)
			assert.Len(t, spansOfKind(spans, trace.SpanKindServer), total)
		})
	}
}

// spansOfKind returns the spans of kind k.
func spansOfKind(spans []sdktrace.ReadOnlySpan, k trace.SpanKind) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanKind() == k {
			out = append(out, s)
		}
	}
	return out
}

// attr returns the value of key on s, and whether it is set.
func attr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// TestTraceLoopback checks the ok scenario's trace on real loopback HTTP:
// one trace for the whole run, each step's call span the parent of its
// attempts' CLIENT spans, each CLIENT span the parent of the provider's
// SERVER span (W3C trace context crossed the wire), the budget attributes
// on the attempts, and http.request.resend_count on fetch's retry.
func TestTraceLoopback(t *testing.T) {
	sc, err := findScenario("ok")
	require.NoError(t, err)
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	_, _, planErr, err := execute(context.Background(), sc, defaultSeed, sc.budget, tp)
	require.NoError(t, err)
	require.NoError(t, planErr)

	spans := sr.Ended()
	require.NotEmpty(t, spans)
	traceID := spans[0].SpanContext().TraceID()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		assert.Equal(t, traceID, s.SpanContext().TraceID(), "span %s is in the run's trace", s.Name())
		byID[s.SpanContext().SpanID()] = s
	}

	calls := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spansOfKind(spans, trace.SpanKindInternal) {
		if v, ok := attr(s, otelbudget.AttrVerdict); ok {
			assert.Equal(t, "ok", v.AsString(), "call %s", s.Name())
			calls[s.Name()] = s
		}
	}
	require.Len(t, calls, 3, "one call span per step")

	clients := spansOfKind(spans, trace.SpanKindClient)
	require.Len(t, clients, 4, "search 1, fetch 2, extract 1")
	resends := map[string][]int64{}
	for _, c := range clients {
		step, ok := attr(c, otelbudget.AttrStep)
		require.True(t, ok, "client span %s carries deadline.step", c.Name())
		parent := byID[c.Parent().SpanID()]
		require.NotNil(t, parent, "client span %s has its parent in the trace", c.Name())
		assert.Equal(t, calls[step.AsString()].SpanContext().SpanID(), parent.SpanContext().SpanID(), "the call span parents its attempts")
		for _, k := range []attribute.Key{otelbudget.AttrAttemptNumber, otelbudget.AttrAttemptGrantedMs, otelbudget.AttrAttemptRemainingMs, otelbudget.AttrAttemptLimitedBy, otelbudget.AttrAttemptEndedBy} {
			_, ok := attr(c, k)
			assert.True(t, ok, "client span of %s carries %s", step.AsString(), k)
		}
		n := int64(0)
		if v, ok := attr(c, "http.request.resend_count"); ok {
			n = v.AsInt64()
		}
		resends[step.AsString()] = append(resends[step.AsString()], n)
	}
	assert.ElementsMatch(t, []int64{0, 1}, resends["fetch"], "fetch's retry is a resend")
	assert.Equal(t, []int64{0}, resends["search"])
	assert.Equal(t, []int64{0}, resends["extract"])

	servers := spansOfKind(spans, trace.SpanKindServer)
	require.Len(t, servers, 4)
	for _, s := range servers {
		parent, ok := byID[s.Parent().SpanID()]
		require.True(t, ok, "server span %s has its parent in the trace", s.Name())
		assert.Equal(t, trace.SpanKindClient, parent.SpanKind(), "server span %s is a child of the client span that sent it", s.Name())
		assert.True(t, s.Parent().IsRemote(), "the parent came over the wire")
	}
}

package main

import (
	"context"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/otelbudget"
)

// executeAgentInMemory is executeAgent behind memTransport: the real MCP
// server (streamable HTTP handler, otelbudgetmcp's middleware), the real
// fake LLM and fetch handlers, the real MCP and openai-go clients, in
// memory. Call it inside a synctest bubble.
func executeAgentInMemory(ctx context.Context, sc scenario, seed uint64, budget time.Duration, tp trace.TracerProvider, mp metric.MeterProvider) (outcome, error) {
	ps := newProviders(sc)
	mem := memTransport{handlers: map[string]http.Handler{}}
	urls := map[string]string{}
	for _, s := range agentPlan() {
		p := ps.byStep[s.name]
		var h http.Handler
		var err error
		switch s.name {
		case "search":
			h, err = p.mcpHandler(tp)
		case "extract":
			h, err = p.llmHandler(tp)
		default:
			h, err = p.handler(tp)
		}
		if err != nil {
			return outcome{}, err
		}
		host := s.name + ".test"
		mem.handlers[host] = h
		urls[s.name] = "http://" + host
	}
	rec, stepErr := playAgent(ctx, sc, seed, budget, tp, mp, mem, urls)
	return outcome{rec: rec, ps: ps, stepErr: stepErr}, nil
}

// TestScenariosInMemoryAgent plays every scenario through the agent's
// stack in virtual time: each ends exactly as over HTTP (verdicts, stop
// reasons, attempts, requests received), and the design's guarantees
// hold, trace included.
func TestScenariosInMemoryAgent(t *testing.T) {
	for _, tc := range scenarioCases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sc, err := findScenario(tc.name)
				require.NoError(t, err)
				sr := tracetest.NewSpanRecorder()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
				out, err := executeAgentInMemory(context.Background(), sc, defaultSeed, sc.budget, tp, metricnoop.NewMeterProvider())
				require.NoError(t, err)
				assert.Equal(t, tc.calls, callLines(out.rec))
				assert.Equal(t, tc.notRun, notRunLines(out.rec))
				assert.Equal(t, tc.requests, requestCounts(out.ps))
				assert.NoError(t, check(sc, out.rec, out.ps))
				assertGuarantees(t, transportAgent, sc, out.rec, out.ps, sr.Ended())
			})
		})
	}
}

// assertAgentTrace checks that the run's trace shows the agent's stack:
// under the run, search's call span parents an MCP CLIENT span
// ("tools/call search") and extract's call span parents the CLIENT span of
// the openai-go client's request (POST /v1/chat/completions), each with
// the attempt attributes, and each answered by a SERVER span.
func assertAgentTrace(t *testing.T, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	var root sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == "agent run" {
			root = s
		}
	}
	require.NotNil(t, root, "the run's root span")
	calls := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spansOfKind(spans, trace.SpanKindInternal) {
		if _, ok := attr(s, otelbudget.AttrVerdict); ok {
			calls[s.Name()] = s
			assert.Equal(t, root.SpanContext().SpanID(), s.Parent().SpanID(), "call span %s is the run's child", s.Name())
		}
	}
	childOf := func(parent sdktrace.ReadOnlySpan, kind trace.SpanKind) []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range spansOfKind(spans, kind) {
			if s.Parent().SpanID() == parent.SpanContext().SpanID() {
				out = append(out, s)
			}
		}
		return out
	}
	search, ok := calls["search"]
	require.True(t, ok, "search's call span")
	mcpSpans := childOf(search, trace.SpanKindClient)
	require.Len(t, mcpSpans, 1, "one MCP attempt")
	assert.Equal(t, "tools/call search", mcpSpans[0].Name())
	method, _ := attr(mcpSpans[0], "mcp.method.name")
	assert.Equal(t, "tools/call", method.AsString())
	_, ok = attr(mcpSpans[0], otelbudget.AttrAttemptGrantedMs)
	assert.True(t, ok, "the MCP span is the attempt's")
	require.Len(t, childOf(mcpSpans[0], trace.SpanKindServer), 1, "the MCP server's span answers it")

	extract, ok := calls["extract"]
	require.True(t, ok, "extract's call span")
	llmSpans := childOf(extract, trace.SpanKindClient)
	require.NotEmpty(t, llmSpans, "the openai-go client's attempts")
	for _, s := range llmSpans {
		m, _ := attr(s, "http.request.method")
		assert.Equal(t, http.MethodPost, m.AsString())
		u, _ := attr(s, "url.full")
		assert.Contains(t, u.AsString(), "/v1/chat/completions")
		_, ok := attr(s, otelbudget.AttrAttemptNumber)
		assert.True(t, ok, "the openai-go request span is the attempt's")
		require.Len(t, childOf(s, trace.SpanKindServer), 1, "the fake LLM's span answers it")
	}
}

// TestAgentTraceInMemory: the ok scenario's trace shows the agent's stack.
func TestAgentTraceInMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc, err := findScenario("ok")
		require.NoError(t, err)
		sr := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
		_, err = executeAgentInMemory(context.Background(), sc, defaultSeed, sc.budget, tp, metricnoop.NewMeterProvider())
		require.NoError(t, err)
		assertAgentTrace(t, sr.Ended())
	})
}

// TestAgentOnLoopback runs the demo's agent stack as a person does, in
// real time on 127.0.0.1 (the MCP server over streamable HTTP, the fake
// LLM server, the fetch provider): the ok and flaky scenarios behave as
// designed, and the trace shows the MCP call and the openai-go attempt
// under the run.
func TestAgentOnLoopback(t *testing.T) {
	for _, name := range []string{"ok", "flaky"} {
		t.Run(name, func(t *testing.T) {
			sc, err := findScenario(name)
			require.NoError(t, err)
			sr := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
			out, err := executeAgent(context.Background(), sc, defaultSeed, sc.budget, tp, metricnoop.NewMeterProvider())
			require.NoError(t, err)
			require.NoError(t, check(sc, out.rec, out.ps), "steps failed with: %v", out.stepErr)
			assertAgentTrace(t, sr.Ended())
		})
	}
}

// -transport agent is a flag value like the others, and -runs stays HTTP
// only.
func TestParseFlagsAgent(t *testing.T) {
	env := func(string) string { return "" }
	cfg, err := parseFlags([]string{"-transport", "agent", "-scenario", "flaky"}, env, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, transportAgent, cfg.transport)
	_, err = parseFlags([]string{"-runs", "10", "-transport", "agent"}, env, io.Discard)
	require.EqualError(t, err, "-runs plays its plan over HTTP only: -transport agent does not apply")
}

package test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/agenttest"
	"github.com/deadlinebudget/budget/otelbudget/genai"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgeteino"
)

func readRegistry(t *testing.T) agenttest.Registry {
	t.Helper()
	reg, err := agenttest.ReadRegistry("../../genai/testdata/registry-keys.txt")
	require.NoError(t, err)
	return reg
}

// spanName fills a pinned span-name format with a span's attributes.
func spanName(t *testing.T, reg agenttest.Registry, typ string, attrs map[string]string) string {
	t.Helper()
	name, ok := reg.Name(typ, attrs)
	require.True(t, ok, "span type %s in the pinned conventions, every placeholder filled", typ)
	return name
}

// One run on loopback, its spans recorded: one trace, the GenAI names and
// keys of the pinned conventions, and the budget's attributes on every model
// and tool span.
func TestTraceFollowsPinnedConventions(t *testing.T) {
	reg := readRegistry(t)
	p := &provider{Turns: 3, ToolFor: func(int) string { return "lookup" }}
	srv := httptest.NewServer(p)
	defer srv.Close()
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	b := newBudget(t, 0, func(c *otelbudgeteino.Config) { c.Observer = otelbudget.New(otelbudget.WithTracerProvider(tp)) })
	lk := &lookup{name: "lookup", latencyFor: func(int) time.Duration { return time.Millisecond }}
	a := newAgent(t, b, p, lk, srv.URL+"/v1", nil, nil)
	res, _, err := a.run(context.Background(), 10*time.Second)
	require.NoError(t, err)
	require.NotNil(t, res.Answer)

	spans := rec.Ended()
	require.NotEmpty(t, spans)
	trace := spans[0].SpanContext().TraceID()
	byID := map[oteltrace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
	}
	byName := map[string]int{}
	for _, s := range spans {
		assert.Equal(t, trace, s.SpanContext().TraceID(), "span %q in the run's trace", s.Name())
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			k := string(kv.Key)
			attrs[k] = kv.Value.String()
			if strings.HasPrefix(k, "gen_ai.") || k == "error.type" {
				assert.True(t, reg.Keys[k], "span %q: key %s is not in the pinned conventions", s.Name(), k)
			}
		}
		op := attrs[string(genai.OperationNameKey)]
		switch op {
		case "invoke_agent":
			assert.Equal(t, spanName(t, reg, "gen_ai.invoke_agent.internal", attrs), s.Name())
			assert.False(t, s.Parent().IsValid(), "the run is the trace's root")
			assert.Contains(t, attrs, "deadline.budget_ms")
		case "chat":
			assert.Equal(t, spanName(t, reg, "gen_ai.inference.client", attrs), s.Name())
			assert.Equal(t, oteltrace.SpanKindClient, s.SpanKind())
			assert.Equal(t, "openai", attrs["gen_ai.provider.name"])
			assert.Equal(t, "10", attrs["gen_ai.usage.input_tokens"])
			assert.Equal(t, "5", attrs["gen_ai.usage.output_tokens"])
		case "execute_tool":
			assert.Equal(t, spanName(t, reg, "gen_ai.execute_tool.internal", attrs), s.Name())
			assert.NotEmpty(t, attrs["gen_ai.tool.call.id"])
			assert.Equal(t, "function", attrs["gen_ai.tool.type"])
		default:
			continue // the call spans
		}
		byName[op]++
		if op != "invoke_agent" {
			// The attempt's attributes on the GenAI span, the call's on
			// its parent, the call span named by the step.
			assert.Contains(t, attrs, "deadline.attempt.granted_ms", "span %q", s.Name())
			parent, ok := byID[s.Parent().SpanID()]
			require.True(t, ok, "span %q has its call span", s.Name())
			pa := map[string]string{}
			for _, kv := range parent.Attributes() {
				pa[string(kv.Key)] = kv.Value.String()
			}
			for _, k := range []string{"deadline.step", "deadline.remaining_at_start_ms", "deadline.floor_ms", "deadline.remaining_ms", "deadline.attempts", "deadline.verdict"} {
				assert.Contains(t, pa, k, "call span %q carries %s", parent.Name(), k)
			}
			assert.Equal(t, s.Name(), pa["deadline.step"], "the step is the span's name")
			assert.Equal(t, s.Name(), parent.Name())
		}
	}
	assert.Equal(t, map[string]int{"invoke_agent": 1, "chat": 4, "execute_tool": 3}, byName)
}

// The attributes otelbudgeteino adds (docs/attributes.md): the abandoned
// tool on its execute_tool span and counted on the run's span, and the
// final call in the reserve on its chat span, each with its documented type.
func TestAgentAttributes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		b := newBudget(t, 200*time.Millisecond, func(c *otelbudgeteino.Config) { c.Observer = otelbudget.New(otelbudget.WithTracerProvider(tp)) })
		p, lk := tenTurns(3, true)
		a := newAgent(t, b, p, lk, "http://provider.test/v1", memTransport{H: p}, nil)
		res, _, err := a.run(context.Background(), budget)
		require.NoError(t, err)
		require.True(t, res.Final)
		time.Sleep(5 * time.Second) // the abandoned tool finishes
		var abandoned, final, runCount int
		for _, s := range rec.Ended() {
			for _, kv := range s.Attributes() {
				switch kv.Key {
				case otelbudgeteino.AttrAbandoned:
					assert.Equal(t, "execute_tool lookup", s.Name())
					assert.Equal(t, attribute.BOOL, kv.Value.Type())
					abandoned++
				case otelbudgeteino.AttrFinalCall:
					assert.Equal(t, "chat gpt-4o", s.Name())
					assert.Equal(t, attribute.BOOL, kv.Value.Type())
					final++
				case otelbudgeteino.AttrAbandonedTools:
					assert.Equal(t, "invoke_agent planner", s.Name())
					assert.Equal(t, int64(1), kv.Value.AsInt64())
					runCount++
				}
			}
		}
		assert.Equal(t, []int{1, 1, 1}, []int{abandoned, final, runCount})
	})
}

package test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/agenttest"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetgenkit"
)

func readRegistry(t *testing.T) agenttest.Registry {
	t.Helper()
	reg, err := agenttest.ReadRegistry("../../genai/testdata/registry-keys.txt")
	require.NoError(t, err)
	return reg
}

func attrsOf(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// expectedName fills the registry's name format of the span type with the
// span's own attribute values.
func expectedName(format string, a map[attribute.Key]attribute.Value) string {
	parts := strings.Fields(format)
	for i, p := range parts {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") {
			parts[i] = a[attribute.Key(strings.Trim(p, "{}"))].AsString()
		}
	}
	return strings.Join(parts, " ")
}

// One run with a slow tool and a reserve: one trace, the GenAI names and
// keys of the pinned conventions, budget attributes on every model and
// tool span, Genkit's own spans in the same trace.
func TestSpans(t *testing.T) {
	reg := readRegistry(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp) // Genkit's spans go to the global provider
	defer otel.SetTracerProvider(prev)
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp))

	var res *otelbudgetgenkit.Result
	var err error
	var underSpan int32
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		prov := &provider{Turns: 10, Latency: 30 * time.Millisecond}
		tl := &tool{Latency: 20 * time.Millisecond, SlowAt: 3, Slow: 3 * time.Second}
		s := newSetup(t, ctx, memTransport{H: prov}, fakeURL, prov, tl, false)
		a := agent(t, 100*time.Millisecond, func(c *otelbudgetgenkit.Config) { c.Observer = obs })
		res, err = a.Run(deadline.NewContext(ctx, deadline.New(500*time.Millisecond)), s.g, tenTurns()...)
		res.WaitTools()
		underSpan = tl.underSpan.Load()
	})
	require.NoError(t, err)
	require.NotNil(t, res.Stop)
	assert.Equal(t, int32(res.ToolCalls), underSpan, "every tool call finds its execute_tool span in its context")

	spans := rec.Ended()
	require.NotEmpty(t, spans)
	traceID := spans[0].SpanContext().TraceID()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		assert.Equal(t, traceID, s.SpanContext().TraceID(), "span %q in another trace", s.Name())
		byID[s.SpanContext().SpanID()] = s
	}

	var chats, tools, agents, genkitSpans, abandoned int
	for _, s := range spans {
		a := attrsOf(s)
		if s.InstrumentationScope().Name == "genkit-tracer" {
			genkitSpans++
		}
		op, ok := a["gen_ai.operation.name"]
		if !ok {
			continue
		}
		assert.True(t, reg.Operations[op.AsString()], "operation %q is not in the pinned registry", op.AsString())
		for k := range a {
			if strings.HasPrefix(string(k), "gen_ai.") || k == "error.type" {
				assert.True(t, reg.Keys[string(k)], "span %q: key %q is not in the pinned registry", s.Name(), k)
			}
		}
		var spanType string
		switch op.AsString() {
		case "chat":
			chats++
			spanType = "gen_ai.inference.client"
			assert.Equal(t, trace.SpanKindClient, s.SpanKind())
			assert.Equal(t, "openai", a["gen_ai.provider.name"].AsString())
			assert.Equal(t, "fake-1", a["gen_ai.request.model"].AsString())
			assert.Equal(t, "fake-1", a["gen_ai.response.model"].AsString())
			assert.NotEmpty(t, a["gen_ai.response.id"].AsString())
			assert.Equal(t, int64(10), a["gen_ai.usage.input_tokens"].AsInt64())
		case "execute_tool":
			tools++
			spanType = "gen_ai.execute_tool.internal"
			assert.Equal(t, trace.SpanKindInternal, s.SpanKind())
			assert.Equal(t, "function", a["gen_ai.tool.type"].AsString())
			assert.NotEmpty(t, a["gen_ai.tool.call.id"].AsString())
		case "invoke_agent":
			agents++
			spanType = "gen_ai.invoke_agent.internal"
			assert.Equal(t, "researcher", a["gen_ai.agent.name"].AsString())
			assert.Contains(t, a, otelbudget.AttrBudgetMs, "the run's budget")
			assert.Equal(t, int64(1), a[otelbudgetgenkit.AttrAbandonedTools].AsInt64())
			assert.Equal(t, otelbudget.RunOK, a[otelbudget.AttrRunOutcome].AsString(), "the run answered")
			assert.Equal(t, "execute_tool lookup", a[otelbudget.AttrRunExhaustedBy].AsString(), "the step the budget stopped")
		}
		format, ok := reg.Spans[spanType]
		require.True(t, ok, "the registry has no span type %q", spanType)
		assert.Equal(t, expectedName(format, a), s.Name(), "span name by the registry's format")
		if op.AsString() != "invoke_agent" {
			// Budget attributes: the attempt's on the span, the call's
			// (step, floor, stop reason) on its parent.
			assert.Contains(t, a, otelbudget.AttrAttemptGrantedMs, "span %q", s.Name())
			assert.Contains(t, a, otelbudget.AttrAttemptRemainingMs, "span %q", s.Name())
			parent, ok := byID[s.Parent().SpanID()]
			require.True(t, ok, "span %q has its call span", s.Name())
			pa := attrsOf(parent)
			assert.Contains(t, pa, otelbudget.AttrStep)
			assert.Contains(t, pa, otelbudget.AttrFloorMs)
			assert.Contains(t, pa, otelbudget.AttrStopReason)
		}
		if a[otelbudgetgenkit.AttrToolAbandoned].AsBool() {
			abandoned++
			// The observer's attempt end sets error.type from the budget.
			assert.Equal(t, "deadline_exceeded", a["error.type"].AsString())
		}
	}
	assert.Equal(t, 1, agents)
	assert.Equal(t, 1, abandoned)
	assert.Equal(t, res.ModelCalls, chats)
	assert.Equal(t, res.ToolCalls, tools)
	assert.Positive(t, genkitSpans, "Genkit's own spans are in the same trace")
}

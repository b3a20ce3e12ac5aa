package test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetmcp"
)

func TestMain(m *testing.M) {
	// TestToolErrorSpans relies on the default: the global propagator.
	otel.SetTextMapPropagator(propagation.TraceContext{})
	goleak.VerifyTestMain(m)
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value)
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

var impl = &mcp.Implementation{Name: "test", Version: "v1"}

// setup connects a client and a server, both composed with one observer
// recording into rec, over the in-memory transport; search hangs on its
// first `hang` calls.
func setup(t *testing.T, rec *tracetest.SpanRecorder, annotations *mcp.ToolAnnotations, hang int32, sopts ...deadlinemcp.ServerOption) (*mcp.ClientSession, *atomic.Int32) {
	t.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp))

	var calls atomic.Int32
	server := mcp.NewServer(impl, nil)
	prop := otelbudgetmcp.WithPropagators(propagation.TraceContext{})
	smw, err := otelbudgetmcp.ServerMiddleware(obs, sopts, prop)
	require.NoError(t, err)
	server.AddReceivingMiddleware(smw...)
	server.AddTool(&mcp.Tool{Name: "search", Annotations: annotations, InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if calls.Add(1) <= hang {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})

	client := mcp.NewClient(impl, nil)
	cmw, err := otelbudgetmcp.ClientMiddleware(obs, nil, prop)
	require.NoError(t, err)
	client.AddSendingMiddleware(cmw...)

	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(context.Background(), st, nil)
	require.NoError(t, err)
	cs, err := client.Connect(context.Background(), ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
		_ = tp.Shutdown(context.Background())
	})
	for _, err := range cs.Tools(context.Background(), nil) {
		require.NoError(t, err)
	}
	return cs, &calls
}

func callSearch(cs *mcp.ClientSession, budget time.Duration, p deadline.Policy) (*mcp.CallToolResult, error) {
	ctx := deadline.NewContext(context.Background(), deadline.New(budget))
	return cs.CallTool(deadlinemcp.WithRequestPolicy(ctx, p), &mcp.CallToolParams{Name: "search"})
}

// spansOf returns the spans of the tools/call: the call span, the CLIENT
// spans and the SERVER spans, each in the order they ended.
func spansOf(rec *tracetest.SpanRecorder, step string) (call sdktrace.ReadOnlySpan, clients, servers []sdktrace.ReadOnlySpan) {
	for _, s := range rec.Ended() {
		switch {
		case s.SpanKind() == trace.SpanKindInternal && s.Name() == step:
			call = s
		case s.SpanKind() == trace.SpanKindClient && s.Name() == "tools/call search":
			clients = append(clients, s)
		case s.SpanKind() == trace.SpanKindServer && s.Name() == "tools/call search":
			servers = append(servers, s)
		}
	}
	return call, clients, servers
}

// The tool call is the call span; each attempt is one CLIENT span under it
// with the attempt attributes; each SERVER span is the child of its
// attempt's CLIENT span, with the budget it admitted.
func TestToolCallSpans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		cs, calls := setup(t, rec, &mcp.ToolAnnotations{ReadOnlyHint: true}, 1)
		p := deadline.Policy{Name: "search", MaxAttempts: 2, AttemptTimeout: 100 * time.Millisecond, Floor: 20 * time.Millisecond}
		_, err := callSearch(cs, time.Second, p)
		require.NoError(t, err)
		assert.Equal(t, int32(2), calls.Load())
		synctest.Wait()

		call, clients, servers := spansOf(rec, "search")
		require.NotNil(t, call, "one call span")
		ca := attrs(call)
		assert.Equal(t, "ok", ca[otelbudget.AttrVerdict].AsString())
		assert.Equal(t, int64(2), ca[otelbudget.AttrAttempts].AsInt64())
		assert.Equal(t, int64(1000), ca[otelbudget.AttrBudgetMs].AsInt64())

		require.Len(t, clients, 2, "one CLIENT span per attempt")
		for i, s := range clients {
			a := attrs(s)
			assert.Equal(t, call.SpanContext().SpanID(), s.Parent().SpanID(), "a child of the call span")
			assert.Equal(t, int64(i+1), a[otelbudget.AttrAttemptNumber].AsInt64())
			assert.Equal(t, int64(100), a[otelbudget.AttrAttemptGrantedMs].AsInt64())
			assert.Equal(t, "tools/call", a["mcp.method.name"].AsString())
			assert.Equal(t, "search", a["gen_ai.tool.name"].AsString())
			assert.NotContains(t, a, attribute.Key("http.request.resend_count"))
		}
		assert.Equal(t, "attempt_timeout", attrs(clients[0])[otelbudget.AttrAttemptEndedBy].AsString())
		assert.Equal(t, codes.Error, clients[0].Status().Code)
		assert.Equal(t, "completed", attrs(clients[1])[otelbudget.AttrAttemptEndedBy].AsString())

		require.Len(t, servers, 2)
		byParent := map[trace.SpanID]sdktrace.ReadOnlySpan{}
		for _, s := range servers {
			byParent[s.Parent().SpanID()] = s
			assert.Equal(t, call.SpanContext().TraceID(), s.SpanContext().TraceID(), "one trace across the wire")
			a := attrs(s)
			assert.Equal(t, int64(100), a[otelbudget.AttrServerInboundBudgetMs].AsInt64())
			assert.Equal(t, int64(100), a[otelbudget.AttrServerBudgetMs].AsInt64())
			assert.Equal(t, "header", a[otelbudget.AttrServerLimitedBy].AsString())
			assert.Equal(t, int64(30000), a[otelbudget.AttrServerMaxBudgetMs].AsInt64())
		}
		first, second := byParent[clients[0].SpanContext().SpanID()], byParent[clients[1].SpanContext().SpanID()]
		require.NotNil(t, first, "the first SERVER span is the first attempt's child")
		require.NotNil(t, second, "the second SERVER span is the second attempt's child")
		ended := attrs(first)[otelbudget.AttrServerEndedBy].AsString()
		assert.Contains(t, []string{"deadline", "canceled"}, ended, "the hanging handler was cut")
		assert.Equal(t, "completed", attrs(second)[otelbudget.AttrServerEndedBy].AsString())
		assert.Equal(t, codes.Unset, second.Status().Code)
	})
}

// A server's refusal is an Error on its SERVER span, with the reason; the
// client's attempt span says the attempt failed, was not retried, and was
// refused (error.type deadline_refused, as on the SERVER span).
func TestRefusalSpans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		cs, calls := setup(t, rec, &mcp.ToolAnnotations{ReadOnlyHint: true}, 0, deadlinemcp.WithFloor(50*time.Millisecond))
		_, err := callSearch(cs, 40*time.Millisecond, deadline.Policy{Name: "search", MaxAttempts: 3, Floor: time.Millisecond})
		require.Error(t, err)
		assert.Zero(t, calls.Load())
		synctest.Wait()

		call, clients, servers := spansOf(rec, "search")
		require.NotNil(t, call)
		assert.Equal(t, codes.Error, call.Status().Code)
		require.Len(t, clients, 1)
		assert.False(t, attrs(clients[0])[otelbudget.AttrAttemptRetryable].AsBool())
		assert.Equal(t, otelbudget.ErrorTypeServerRefused, attrs(clients[0])["error.type"].AsString())
		assert.Equal(t, codes.Error, clients[0].Status().Code)
		require.Len(t, servers, 1)
		s := servers[0]
		a := attrs(s)
		assert.True(t, a[otelbudget.AttrServerRefused].AsBool())
		assert.Equal(t, "floor", a[otelbudget.AttrServerRefusal].AsString())
		assert.Equal(t, otelbudget.ErrorTypeServerRefused, a["error.type"].AsString())
		assert.Equal(t, codes.Error, s.Status().Code)
		assert.Equal(t, "budget 39ms at or below the 50ms floor", s.Status().Description)
		assert.NotContains(t, a, otelbudget.AttrServerEndedBy)
	})
}

// A tool without annotations gets one attempt, so one CLIENT span.
func TestNotIdempotentOneAttemptSpan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		cs, calls := setup(t, rec, nil, 1)
		_, err := callSearch(cs, time.Second, deadline.Policy{Name: "search", MaxAttempts: 3, AttemptTimeout: 100 * time.Millisecond})
		require.Error(t, err)
		assert.Equal(t, int32(1), calls.Load())
		synctest.Wait()
		call, clients, _ := spansOf(rec, "search")
		require.NotNil(t, call)
		assert.Equal(t, "not_retryable", attrs(call)[otelbudget.AttrStopReason].AsString())
		assert.Len(t, clients, 1)
	})
}

// A tool result with isError is an Error on both spans, error.type
// tool_error, while the call itself succeeded.
func TestToolErrorSpans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		obs := otelbudget.New(otelbudget.WithTracerProvider(tp))
		server := mcp.NewServer(impl, nil)
		smw, err := otelbudgetmcp.ServerMiddleware(obs, nil)
		require.NoError(t, err)
		server.AddReceivingMiddleware(smw...)
		server.AddTool(&mcp.Tool{Name: "search", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no index"}}}, nil
			})
		client := mcp.NewClient(impl, nil)
		cmw, err := otelbudgetmcp.ClientMiddleware(obs, nil)
		require.NoError(t, err)
		client.AddSendingMiddleware(cmw...)
		st, ct := mcp.NewInMemoryTransports()
		ss, err := server.Connect(context.Background(), st, nil)
		require.NoError(t, err)
		cs, err := client.Connect(context.Background(), ct, nil)
		require.NoError(t, err)
		res, err := callSearch(cs, time.Second, deadline.Policy{Name: "search", MaxAttempts: 1})
		require.NoError(t, err)
		assert.True(t, res.IsError)
		_ = cs.Close()
		_ = ss.Wait()
		_ = tp.Shutdown(context.Background())

		call, clients, servers := spansOf(rec, "search")
		require.NotNil(t, call)
		assert.Equal(t, "ok", attrs(call)[otelbudget.AttrVerdict].AsString())
		require.Len(t, clients, 1)
		require.Len(t, servers, 1)
		for _, s := range []sdktrace.ReadOnlySpan{clients[0], servers[0]} {
			assert.Equal(t, codes.Error, s.Status().Code, s.SpanKind().String())
			assert.Equal(t, otelbudgetmcp.ErrorTypeToolError, attrs(s)["error.type"].AsString())
		}
	})
}

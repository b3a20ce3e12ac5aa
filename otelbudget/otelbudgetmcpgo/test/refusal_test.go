package test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	mgtransport "github.com/mark3labs/mcp-go/client/transport"
	mgmcp "github.com/mark3labs/mcp-go/mcp"
	mgserver "github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/deadlinemcpgo"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetmcpgo"
)

// A refusal on an mcp-go server: the SERVER span says so with the
// deadline.server.* attributes and error.type deadline_refused, the CLIENT
// span fails with the server's message and the same error.type, in one
// trace (in process).
func TestRefusalSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp))
	_, opts, err := otelbudgetmcpgo.ServerOptions(obs, []deadlinemcpgo.ServerOption{deadlinemcpgo.WithFloor(time.Second)})
	require.NoError(t, err)
	s := mgserver.NewMCPServer("test", "v1", append(opts, mgserver.WithToolCapabilities(true))...)
	s.AddTools(mcpgoEcho())
	call := mcpgoCaller(t, obs, mgtransport.NewInProcessTransport(s))
	err = call(deadline.NewContext(context.Background(), deadline.New(500*time.Millisecond)))
	require.Error(t, err)

	byKind := map[trace.SpanKind]sdktrace.ReadOnlySpan{}
	for _, sp := range rec.Ended() {
		if sp.Name() == "tools/call echo" || sp.Name() == "MCP tools/call echo" {
			byKind[sp.SpanKind()] = sp
		}
	}
	require.Len(t, byKind, 3)
	srv := attrMap(byKind[trace.SpanKindServer])
	assert.Equal(t, true, srv["deadline.server.refused"])
	assert.Equal(t, "floor", srv["deadline.server.refusal"])
	assert.Equal(t, "deadline_refused", srv["error.type"])
	assert.Equal(t, codes.Error, byKind[trace.SpanKindServer].Status().Code)
	// The CLIENT span is the attempt's: otelbudget's observer sets its
	// error.type from the refusal's own ErrorType, as for the go-sdk's.
	assert.Equal(t, codes.Error, byKind[trace.SpanKindClient].Status().Code)
	assert.Equal(t, otelbudget.ErrorTypeServerRefused, attrMap(byKind[trace.SpanKindClient])["error.type"])
	assert.Contains(t, byKind[trace.SpanKindClient].Status().Description, "deadline budget too small: budget-ms=")
	assert.Equal(t, byKind[trace.SpanKindInternal].SpanContext().TraceID(), byKind[trace.SpanKindServer].SpanContext().TraceID())
}

// The admission queue on an mcp-go server's SERVER spans, as on an HTTP
// server's: a request that waited for a slot carries
// deadline.server.queue_wait_ms; a full queue is overload, not a budget
// too small: error.type queue_full (otelbudget.ServerRefusalErrorType),
// and the CLIENT span of the refused attempt says the same.
func TestQueueSpans(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		obs := otelbudget.New(otelbudget.WithTracerProvider(tp))
		q, err := admission.NewQueue(1, 1) // one slot, one place to wait
		require.NoError(t, err)
		_, opts, err := otelbudgetmcpgo.ServerOptions(obs, []deadlinemcpgo.ServerOption{deadlinemcpgo.WithQueue(q)})
		require.NoError(t, err)
		release := make(chan struct{})
		var calls atomic.Int32
		s := mgserver.NewMCPServer("test", "v1", append(opts, mgserver.WithToolCapabilities(true))...)
		s.AddTools(mgserver.ServerTool{Tool: mgmcp.NewTool("echo"), Handler: func(context.Context, mgmcp.CallToolRequest) (*mgmcp.CallToolResult, error) {
			if calls.Add(1) == 1 {
				<-release
			}
			return mgmcp.NewToolResultText("ok"), nil
		}})
		call := mcpgoCaller(t, obs, mgtransport.NewInProcessTransport(s))
		ctx := func() context.Context { return deadline.NewContext(context.Background(), deadline.New(time.Minute)) }
		done := make(chan error, 2)
		go func() { done <- call(ctx()) }()
		synctest.Wait() // the first call holds the slot
		go func() { done <- call(ctx()) }()
		synctest.Wait() // the second waits for it
		require.Error(t, call(ctx()), "the third finds the queue full")
		close(release)
		require.NoError(t, <-done)
		require.NoError(t, <-done)
		require.NoError(t, tp.Shutdown(context.Background()))

		var full, waited []sdktrace.ReadOnlySpan
		var client sdktrace.ReadOnlySpan
		for _, sp := range rec.Ended() {
			a := attrMap(sp)
			switch {
			case sp.SpanKind() == trace.SpanKindServer && a["deadline.server.refused"] == true:
				full = append(full, sp)
			case sp.SpanKind() == trace.SpanKindServer && a["deadline.server.queue_wait_ms"] != nil:
				waited = append(waited, sp)
			case sp.SpanKind() == trace.SpanKindClient && a["error.type"] != nil:
				client = sp
			}
		}
		require.Len(t, full, 1, "the refused request's SERVER span")
		require.Len(t, waited, 1, "the SERVER span of the request that waited")
		require.NotNil(t, client, "the refused attempt's CLIENT span")
		srv := attrMap(full[0])
		assert.Equal(t, "queue_full", srv["deadline.server.refusal"])
		assert.Equal(t, otelbudget.ErrorTypeServerQueueFull, srv["error.type"])
		assert.Equal(t, codes.Error, full[0].Status().Code)
		assert.Equal(t, "admission queue full", full[0].Status().Description)
		assert.Equal(t, otelbudget.ErrorTypeServerQueueFull, attrMap(client)["error.type"])
		assert.Equal(t, "completed", attrMap(waited[0])["deadline.server.ended_by"])
	})
}

func attrMap(s sdktrace.ReadOnlySpan) map[string]any {
	m := map[string]any{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

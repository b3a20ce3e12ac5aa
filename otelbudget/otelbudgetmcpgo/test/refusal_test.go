package test

import (
	"context"
	"testing"
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

// A full admission queue on an mcp-go server is overload, not a budget too
// small: the SERVER span says error.type queue_full, as an HTTP server's
// span does for the same refusal (otelbudget.ServerRefusalErrorType), and
// the CLIENT span of the refused attempt says the same.
func TestQueueFullSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp))
	q, err := admission.NewQueue(1, 0) // one slot, no room to wait
	require.NoError(t, err)
	_, opts, err := otelbudgetmcpgo.ServerOptions(obs, []deadlinemcpgo.ServerOption{deadlinemcpgo.WithQueue(q)})
	require.NoError(t, err)
	entered, release := make(chan struct{}), make(chan struct{})
	var first bool
	s := mgserver.NewMCPServer("test", "v1", append(opts, mgserver.WithToolCapabilities(true))...)
	s.AddTools(mgserver.ServerTool{Tool: mgmcp.NewTool("echo"), Handler: func(context.Context, mgmcp.CallToolRequest) (*mgmcp.CallToolResult, error) {
		if !first { // only the first call is admitted: no lock needed
			first = true
			close(entered)
			<-release
		}
		return mgmcp.NewToolResultText("ok"), nil
	}})
	call := mcpgoCaller(t, obs, mgtransport.NewInProcessTransport(s))
	ctx := func() context.Context { return deadline.NewContext(context.Background(), deadline.New(time.Minute)) }
	held := make(chan error, 1)
	go func() { held <- call(ctx()) }()
	<-entered // the first call holds the one slot
	require.Error(t, call(ctx()))
	close(release)
	require.NoError(t, <-held)

	var server, client sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		a := attrMap(sp)
		switch {
		case sp.SpanKind() == trace.SpanKindServer && a["deadline.server.refused"] == true:
			server = sp
		case sp.SpanKind() == trace.SpanKindClient && a["error.type"] != nil:
			client = sp
		}
	}
	require.NotNil(t, server, "the refused request's SERVER span")
	require.NotNil(t, client, "the refused attempt's CLIENT span")
	srv := attrMap(server)
	assert.Equal(t, "queue_full", srv["deadline.server.refusal"])
	assert.Equal(t, otelbudget.ErrorTypeServerQueueFull, srv["error.type"])
	assert.Equal(t, codes.Error, server.Status().Code)
	assert.Equal(t, "admission queue full", server.Status().Description)
	assert.Equal(t, otelbudget.ErrorTypeServerQueueFull, attrMap(client)["error.type"])
}

func attrMap(s sdktrace.ReadOnlySpan) map[string]any {
	m := map[string]any{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

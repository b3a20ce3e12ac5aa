package test

import (
	"context"
	"testing"
	"time"

	mgtransport "github.com/mark3labs/mcp-go/client/transport"
	mgserver "github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline"
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

func attrMap(s sdktrace.ReadOnlySpan) map[string]any {
	m := map[string]any{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

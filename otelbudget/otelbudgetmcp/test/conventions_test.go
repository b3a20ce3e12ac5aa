package test

import (
	"bufio"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/genai"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetmcp"
)

// pinnedKeys reads the keys of otelbudget/genai/testdata/registry-keys.txt,
// copied from the pinned conventions' YAML (not from our constants).
func pinnedKeys(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open("../../genai/testdata/registry-keys.txt")
	require.NoError(t, err)
	defer f.Close()
	keys := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "key" {
			keys[fields[1]] = true
		}
	}
	require.NoError(t, sc.Err())
	return keys
}

// A tools/call over stdio-like pipes (mcp.IOTransport), made inside the
// execute_tool span of a GenAI instrumentation: the CLIENT span carries
// gen_ai.operation.name execute_tool, jsonrpc.request.id, network.transport
// pipe and the tool call's id, and sits below the execute_tool span, which
// gets the MCP attributes; every non-deadline key is in the pinned
// conventions.
func TestToolCallFollowsPinnedConventions(t *testing.T) {
	keys := pinnedKeys(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp))
	prop := otelbudgetmcp.WithPropagators(propagation.TraceContext{})

	server := mcp.NewServer(impl, nil)
	smw, err := otelbudgetmcp.ServerMiddleware(obs, nil, prop, otelbudgetmcp.WithNetworkTransport(genai.NetworkTransportPipe))
	require.NoError(t, err)
	server.AddReceivingMiddleware(smw...)
	server.AddTool(&mcp.Tool{Name: "search", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	client := mcp.NewClient(impl, nil)
	cmw, err := otelbudgetmcp.ClientMiddleware(obs, nil, prop)
	require.NoError(t, err)
	client.AddSendingMiddleware(cmw...)

	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	ss, err := server.Connect(context.Background(), &mcp.IOTransport{Reader: sr, Writer: sw}, nil)
	require.NoError(t, err)
	cs, err := client.Connect(context.Background(), otelbudgetmcp.Transport(&mcp.IOTransport{Reader: cr, Writer: cw}), nil)
	require.NoError(t, err)
	defer func() {
		_ = cs.Close()
		_ = ss.Wait()
	}()

	// The GenAI instrumentation's execute_tool span (an agent framework's).
	ctx, tool := tp.Tracer("agent").Start(context.Background(), genai.ExecuteToolSpanName("search"),
		trace.WithAttributes(genai.ExecuteToolAttributes("search", "call_7", genai.ToolTypeFunction)...))
	ctx = genai.ContextWithToolCall(ctx, genai.ToolCall{Span: tool, Name: "search", CallID: "call_7"})
	ctx = deadline.NewContext(ctx, deadline.New(time.Second))
	_, err = cs.CallTool(deadlinemcp.WithRequestPolicy(ctx, deadline.Policy{Name: "search", MaxAttempts: 1, Floor: 20 * time.Millisecond}), &mcp.CallToolParams{Name: "search"})
	require.NoError(t, err)
	tool.End()
	require.NoError(t, cs.Close())
	_ = ss.Wait()

	var client0, server0, toolSpan sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch {
		case s.SpanKind() == trace.SpanKindClient && s.Name() == "tools/call search":
			client0 = s
		case s.SpanKind() == trace.SpanKindServer && s.Name() == "tools/call search":
			server0 = s
		case s.Name() == "execute_tool search":
			toolSpan = s
		}
	}
	require.NotNil(t, client0)
	require.NotNil(t, server0)
	require.NotNil(t, toolSpan)

	ca := attrs(client0)
	assert.Equal(t, "execute_tool", ca["gen_ai.operation.name"].AsString())
	assert.Equal(t, "tools/call", ca["mcp.method.name"].AsString())
	assert.Equal(t, "search", ca["gen_ai.tool.name"].AsString())
	assert.NotEmpty(t, ca["jsonrpc.request.id"].AsString(), "the id the connection gave the request")
	assert.Equal(t, "pipe", ca["network.transport"].AsString(), "found from mcp.IOTransport")
	assert.Equal(t, "call_7", ca["gen_ai.tool.call.id"].AsString())
	sa := attrs(server0)
	assert.Equal(t, "execute_tool", sa["gen_ai.operation.name"].AsString())
	assert.Equal(t, "pipe", sa["network.transport"].AsString())

	// Below the execute_tool span: its descendant, in its trace.
	parents := map[trace.SpanID]trace.SpanID{}
	for _, s := range rec.Ended() {
		parents[s.SpanContext().SpanID()] = s.Parent().SpanID()
	}
	below := false
	for id := client0.Parent().SpanID(); id.IsValid(); id = parents[id] {
		if id == toolSpan.SpanContext().SpanID() {
			below = true
			break
		}
	}
	assert.True(t, below, "the MCP CLIENT span is below the active execute_tool span")
	ta := attrs(toolSpan)
	assert.Equal(t, "tools/call", ta["mcp.method.name"].AsString(), "the execute_tool span gets the MCP attributes")

	for _, s := range []sdktrace.ReadOnlySpan{client0, server0, toolSpan} {
		for _, kv := range s.Attributes() {
			if k := string(kv.Key); !strings.HasPrefix(k, "deadline.") {
				assert.True(t, keys[k], "span %q: %s is not in the pinned conventions", s.Name(), k)
			}
		}
	}
}

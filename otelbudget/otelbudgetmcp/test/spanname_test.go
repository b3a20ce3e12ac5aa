package test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetmcp"
)

// With an unnamed policy the call span (INTERNAL) is named "MCP tools/call
// search", as deadlinehttp names an unnamed call "HTTP GET": it is told
// apart by name from the attempts' CLIENT spans, "tools/call search" by
// MCP's semantic conventions.
func TestUnnamedCallSpanName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		obs := otelbudget.New(otelbudget.WithTracerProvider(tp))
		server := mcp.NewServer(impl, nil)
		server.AddTool(&mcp.Tool{Name: "search", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
			})
		client := mcp.NewClient(impl, nil)
		mws, err := otelbudgetmcp.ClientMiddleware(obs, []deadlinemcp.ClientOption{
			deadlinemcp.WithPolicy(deadline.Policy{MaxAttempts: 1}),
		})
		require.NoError(t, err)
		client.AddSendingMiddleware(mws...)
		st, ct := mcp.NewInMemoryTransports()
		ss, err := server.Connect(context.Background(), st, nil)
		require.NoError(t, err)
		cs, err := client.Connect(context.Background(), ct, nil)
		require.NoError(t, err)
		defer func() {
			_ = cs.Close()
			_ = ss.Wait()
			_ = tp.Shutdown(context.Background())
		}()

		ctx := deadline.NewContext(context.Background(), deadline.New(time.Second))
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "search"})
		require.NoError(t, err)

		names := map[trace.SpanKind][]string{}
		for _, s := range rec.Ended() {
			if s.Name() == "tools/call search" || s.Name() == "MCP tools/call search" {
				names[s.SpanKind()] = append(names[s.SpanKind()], s.Name())
			}
		}
		assert.Equal(t, []string{"MCP tools/call search"}, names[trace.SpanKindInternal], "the call span")
		assert.Equal(t, []string{"tools/call search"}, names[trace.SpanKindClient], "the attempt's CLIENT span")
	})
}

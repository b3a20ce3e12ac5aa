package test

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetmcp"
)

// A tool call made under a budget, traced on both sides: the call span,
// its attempt's CLIENT span, and the server's SERVER span in the same
// trace, with the budget the server admitted.
func Example() {
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp))
	prop := otelbudgetmcp.WithPropagators(propagation.TraceContext{})

	server := mcp.NewServer(&mcp.Implementation{Name: "search", Version: "v1"}, nil)
	smw, err := otelbudgetmcp.ServerMiddleware(obs, []deadlinemcp.ServerOption{deadlinemcp.WithMaxBudget(time.Second)}, prop)
	if err != nil {
		panic(err)
	}
	server.AddReceivingMiddleware(smw...)
	server.AddTool(&mcp.Tool{Name: "search", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "3 results"}}}, nil
		})

	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
	cmw, err := otelbudgetmcp.ClientMiddleware(obs, nil, prop)
	if err != nil {
		panic(err)
	}
	client.AddSendingMiddleware(cmw...)

	st, ct := mcp.NewInMemoryTransports()
	ss, _ := server.Connect(ctx, st, nil)
	cs, _ := client.Connect(ctx, ct, nil)
	rec.Reset() // only the tool call, not the session's setup

	run := deadline.NewContext(ctx, deadline.New(5*time.Second))
	run = deadlinemcp.WithRequestPolicy(run, deadline.Policy{Name: "search", MaxAttempts: 2})
	if _, err := cs.CallTool(run, &mcp.CallToolParams{Name: "search"}); err != nil {
		panic(err)
	}
	cs.Close()
	ss.Wait()
	tp.Shutdown(ctx)

	for _, s := range rec.Ended() {
		line := s.SpanKind().String() + " " + s.Name()
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case otelbudget.AttrVerdict, otelbudget.AttrAttemptNumber, otelbudget.AttrServerLimitedBy, otelbudget.AttrServerBudgetMs:
				line += " " + string(kv.Key) + "=" + kv.Value.String()
			}
		}
		fmt.Println(line)
	}
	// Output:
	// server tools/call search deadline.server.budget_ms=1000 deadline.server.limited_by=max
	// client tools/call search deadline.attempt.number=1
	// internal search deadline.verdict=ok
}

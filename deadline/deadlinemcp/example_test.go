package deadlinemcp_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
)

// A read-only tool whose first call hangs: the client cuts it at its 50ms
// ceiling, the server learns it was cancelled, and the second attempt
// answers, all inside the run's one second.
func ExampleClient() {
	ctx := context.Background()
	var calls atomic.Int32
	server := mcp.NewServer(&mcp.Implementation{Name: "search", Version: "v1"}, nil)
	srv, _ := deadlinemcp.NewServer()
	server.AddReceivingMiddleware(srv.Middleware())
	server.AddTool(&mcp.Tool{
		Name:        "search",
		InputSchema: map[string]any{"type": "object"},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if calls.Add(1) == 1 {
			<-ctx.Done() // ends with the lease
			return nil, ctx.Err()
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "3 results"}}}, nil
	})

	c, err := deadlinemcp.NewClient(deadlinemcp.WithPolicy(deadline.Policy{
		MaxAttempts: 3, AttemptTimeout: 50 * time.Millisecond, Floor: 20 * time.Millisecond,
	}))
	if err != nil {
		panic(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
	client.AddSendingMiddleware(c.Middleware())

	st, ct := mcp.NewInMemoryTransports()
	ss, _ := server.Connect(ctx, st, nil)
	cs, _ := client.Connect(ctx, ct, nil)
	defer func() { cs.Close(); ss.Wait() }()

	for _, err := range cs.Tools(ctx, nil) { // learns that search is read-only
		if err != nil {
			panic(err)
		}
	}
	run := deadline.NewContext(ctx, deadline.New(time.Second))
	res, err := cs.CallTool(run, &mcp.CallToolParams{Name: "search"})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text, "after", calls.Load(), "calls")
	// Output: 3 results after 2 calls
}

// A request whose budget is at or below the server's floor is refused
// before the tool runs, with a JSON-RPC error that says both.
func ExampleServer() {
	ctx := context.Background()
	server := mcp.NewServer(&mcp.Implementation{Name: "search", Version: "v1"}, nil)
	srv, err := deadlinemcp.NewServer(deadlinemcp.WithFloor(20 * time.Millisecond))
	if err != nil {
		panic(err)
	}
	server.AddReceivingMiddleware(srv.Middleware())
	server.AddTool(&mcp.Tool{Name: "search", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			panic("not called")
		})

	st, ct := mcp.NewInMemoryTransports()
	ss, _ := server.Connect(ctx, st, nil)
	cs, _ := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(ctx, ct, nil)
	defer func() { cs.Close(); ss.Wait() }()

	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "search", Meta: mcp.Meta{deadlinemcp.MetaKey: 5}})
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		fmt.Println(we.Code, we.Message)
	}
	// Output: -32001 deadline budget too small: budget-ms=5, floor-ms=20
}

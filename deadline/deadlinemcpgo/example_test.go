package deadlinemcpgo_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcpgo"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
)

// A read-only tool on an mcp-go server whose first call hangs: the client
// cuts it at its 50ms ceiling, and the second attempt answers, all inside
// the run's one second; a budget below the server's floor is refused, and
// the caller finds the refusal's type.
func ExampleClient_Transport() {
	ctx := context.Background()
	var calls atomic.Int32
	srv, _ := deadlinemcpgo.NewServer(deadlinemcpgo.WithFloor(30 * time.Millisecond))
	s := server.NewMCPServer("search", "v1", srv.Options()...)
	tool := mcp.NewTool("search", mcp.WithReadOnlyHintAnnotation(true))
	s.AddTool(tool, func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if calls.Add(1) == 1 {
			<-ctx.Done() // ends with the lease
			return nil, ctx.Err()
		}
		return mcp.NewToolResultText("3 results"), nil
	})

	c, err := deadlinemcpgo.NewClient(mcpbudget.WithPolicy(deadline.Policy{
		MaxAttempts: 3, AttemptTimeout: 50 * time.Millisecond, Floor: 5 * time.Millisecond,
	}))
	if err != nil {
		panic(err)
	}
	mc := client.NewClient(c.Transport(transport.NewInProcessTransport(s)))
	_ = mc.Start(ctx)
	defer mc.Close()
	_, _ = mc.Initialize(ctx, mcp.InitializeRequest{})
	_, _ = mc.ListTools(ctx, mcp.ListToolsRequest{}) // learns that search is read-only

	run := deadline.NewContext(ctx, deadline.New(time.Second))
	res, err := mc.CallTool(run, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "search"}})
	fmt.Println(res.Content[0].(mcp.TextContent).Text, err, calls.Load())

	short := deadline.NewContext(ctx, deadline.New(25*time.Millisecond))
	_, err = mc.CallTool(short, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "search"}})
	var refused *mcpbudget.RefusedError
	fmt.Println(errors.As(err, &refused), refused.Floor)
	// Output:
	// 3 results <nil> 2
	// true 30ms
}

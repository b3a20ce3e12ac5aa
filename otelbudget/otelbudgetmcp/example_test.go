package otelbudgetmcp_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetmcp"
)

// The examples use observers with the global providers, no-op until the
// application installs an SDK (the test module beside this package records
// the spans): they show what the calls did through hooks on the caller's
// context and the server's admission.

// A tool call made under the run's budget, observed on both sides: the
// client runs it as one call under the step's policy, and the server
// admits it with at most its own maximum.
func ExampleClientMiddleware() {
	ctx := context.Background()
	obs := otelbudget.New()

	server := mcp.NewServer(&mcp.Implementation{Name: "search", Version: "v1"}, nil)
	smw, err := otelbudgetmcp.ServerMiddleware(obs, []deadlinemcp.ServerOption{
		deadlinemcp.WithMaxBudget(time.Second),
		deadlinemcp.WithAdmission(func(_ context.Context, method string, _ mcp.Request, a deadlinemcp.Admission) {
			if method == "tools/call" {
				fmt.Println("server: budget", a.Budget, "limited by", a.Limit)
			}
		}),
	})
	if err != nil {
		panic(err)
	}
	server.AddReceivingMiddleware(smw...)
	server.AddTool(&mcp.Tool{Name: "search", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "3 results"}}}, nil
		})

	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
	cmw, err := otelbudgetmcp.ClientMiddleware(obs, nil)
	if err != nil {
		panic(err)
	}
	client.AddSendingMiddleware(cmw...)

	st, ct := mcp.NewInMemoryTransports()
	ss, _ := server.Connect(ctx, st, nil)
	cs, _ := client.Connect(ctx, ct, nil)

	run := deadline.WithHooks(ctx, &deadline.Hooks{
		AttemptEnd: func(_ context.Context, a deadline.AttemptInfo, r deadline.AttemptResult) {
			fmt.Println("client: attempt", a.Number, r.EndedBy)
		},
		CallEnd: func(_ context.Context, r deadline.CallResult) {
			fmt.Println("client:", r.Name, r.Reason, "after", r.Attempts, "attempt, verdict", deadline.VerdictOf(r))
		},
	})
	run = deadline.NewContext(run, deadline.New(5*time.Second))
	run = deadlinemcp.WithRequestPolicy(run, deadline.Policy{Name: "search", MaxAttempts: 2})
	res, err := cs.CallTool(run, &mcp.CallToolParams{Name: "search"})
	cs.Close()
	ss.Wait()
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// server: budget 1s limited by max
	// client: attempt 1 completed
	// client: search success after 1 attempt, verdict ok
	// 3 results
}

// A request whose budget is at or below the server's floor is refused
// before the tool runs: the server's admission says why, and the client
// gets a JSON-RPC error that says the budget and the floor.
func ExampleServerMiddleware() {
	ctx := context.Background()
	server := mcp.NewServer(&mcp.Implementation{Name: "search", Version: "v1"}, nil)
	smw, err := otelbudgetmcp.ServerMiddleware(otelbudget.New(), []deadlinemcp.ServerOption{
		deadlinemcp.WithFloor(20 * time.Millisecond),
		deadlinemcp.WithAdmission(func(_ context.Context, method string, _ mcp.Request, a deadlinemcp.Admission) {
			if method == "tools/call" {
				fmt.Println("server: limited by", a.Limit, "refused:", a.Refusal)
			}
		}),
	})
	if err != nil {
		panic(err)
	}
	server.AddReceivingMiddleware(smw...)
	server.AddTool(&mcp.Tool{Name: "search", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			panic("not called")
		})

	st, ct := mcp.NewInMemoryTransports()
	ss, _ := server.Connect(ctx, st, nil)
	cs, _ := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(ctx, ct, nil)

	// A caller without deadlinemcp's client sends the budget itself: 5ms.
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "search", Meta: mcp.Meta{deadlinemcp.MetaKey: 5}})
	cs.Close()
	ss.Wait()
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		fmt.Println("client:", we.Code, we.Message)
	}
	// Output:
	// server: limited by header refused: floor
	// client: -32001 deadline budget too small: budget-ms=5, floor-ms=20
}

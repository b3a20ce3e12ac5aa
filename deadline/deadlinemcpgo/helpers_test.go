package deadlinemcpgo_test

import (
	"context"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcpgo"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
	"github.com/deadlinebudget/budget/deadline/mcpbudget/mcpbudgettest"
)

// tool is a test tool on a real mcp-go server: its handler records what
// each call carried and does what behave says for call n (1-based).
type tool struct {
	name        string
	annotations *mcp.ToolAnnotation
	behave      func(ctx context.Context, n int) (*mcp.CallToolResult, error)

	mcpbudgettest.Arrivals
}

// arrival is what one call of a tool saw when its handler started, and how
// its context ended.
type arrival = mcpbudgettest.Arrival

func (tl *tool) serverTool() server.ServerTool {
	t := mcp.NewTool(tl.name)
	if tl.annotations != nil {
		t.Annotations = *tl.annotations
	}
	return server.ServerTool{Tool: t, Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var meta any
		if req.Params.Meta != nil {
			meta = req.Params.Meta.AdditionalFields[mcpbudget.MetaKey]
		}
		n := tl.Arrive(ctx, meta)
		if tl.behave == nil {
			return mcp.NewToolResultText("ok"), nil
		}
		return tl.behave(ctx, n)
	}}
}

func (tl *tool) arrivals() []arrival { return tl.List() }

// hangFirst hangs the first n calls until their context ends, then
// answers.
func hangFirst(n int) func(ctx context.Context, call int) (*mcp.CallToolResult, error) {
	return func(ctx context.Context, call int) (*mcp.CallToolResult, error) {
		if call <= n {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return mcp.NewToolResultText("ok"), nil
	}
}

func readOnly() *mcp.ToolAnnotation {
	return &mcp.ToolAnnotation{ReadOnlyHint: mcp.ToBoolPtr(true)}
}

// newServer returns an mcp-go server with srv's middleware (none for a
// nil srv) and the tools.
func newServer(t *testing.T, srv *deadlinemcpgo.Server, tools ...*tool) *server.MCPServer {
	t.Helper()
	var opts []server.ServerOption
	if srv != nil {
		opts = srv.Options()
	}
	s := server.NewMCPServer("test", "v1", append(opts, server.WithToolCapabilities(true))...)
	for _, tl := range tools {
		s.AddTools(tl.serverTool())
	}
	return s
}

func newBudgetClient(t *testing.T, opts ...deadlinemcpgo.ClientOption) *deadlinemcpgo.Client {
	t.Helper()
	c, err := deadlinemcpgo.NewClient(opts...)
	require.NoError(t, err)
	return c
}

// connect starts and initializes an mcp-go client over tr, wrapped by c
// (bare for a nil c).
func connect(t *testing.T, c *deadlinemcpgo.Client, tr transport.Interface, opts ...client.ClientOption) *client.Client {
	t.Helper()
	if c != nil {
		tr = c.Transport(tr)
	}
	mc := client.NewClient(tr, opts...)
	ctx := context.Background()
	require.NoError(t, mc.Start(ctx))
	t.Cleanup(func() { mc.Close() })
	_, err := mc.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ClientInfo: mcp.Implementation{Name: "agent", Version: "v1"},
	}})
	require.NoError(t, err)
	return mc
}

// connectInProcess connects c's client to s in process.
func connectInProcess(t *testing.T, c *deadlinemcpgo.Client, s *server.MCPServer) *client.Client {
	t.Helper()
	return connect(t, c, transport.NewInProcessTransport(s))
}

// call calls tool name with a run of the given budget and policy.
func call(mc *client.Client, budget time.Duration, p deadline.Policy, name string) (*mcp.CallToolResult, error) {
	ctx := deadline.NewContext(context.Background(), deadline.New(budget))
	ctx = mcpbudget.WithRequestPolicy(ctx, p)
	return mc.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name}})
}

func listTools(t *testing.T, mc *client.Client) {
	t.Helper()
	_, err := mc.ListTools(context.Background(), mcp.ListToolsRequest{})
	require.NoError(t, err)
}

package deadlinemcp_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
	"github.com/deadlinebudget/budget/deadline/mcpbudget/mcpbudgettest"
)

// tool is a test tool on a real mcp.Server: its handler records what each
// call carried and does what behave says for call n (1-based).
type tool struct {
	name        string
	annotations *mcp.ToolAnnotations
	behave      func(ctx context.Context, n int) (*mcp.CallToolResult, error)

	mcpbudgettest.Arrivals
}

// arrival is what one call of a tool saw when its handler started, and how
// its context ended.
type arrival = mcpbudgettest.Arrival

func (tl *tool) add(s *mcp.Server) {
	s.AddTool(&mcp.Tool{Name: tl.name, Annotations: tl.annotations, InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := tl.Arrive(ctx, req.Params.GetMeta()[deadlinemcp.MetaKey])
			if tl.behave == nil {
				return text("ok"), nil
			}
			return tl.behave(ctx, n)
		})
}

func (tl *tool) arrivals() []arrival { return tl.List() }

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// hangFirst hangs the first n calls until their context ends, then
// answers.
func hangFirst(n int) func(ctx context.Context, call int) (*mcp.CallToolResult, error) {
	return func(ctx context.Context, call int) (*mcp.CallToolResult, error) {
		if call <= n {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return text("ok"), nil
	}
}

func readOnly() *mcp.ToolAnnotations   { return &mcp.ToolAnnotations{ReadOnlyHint: true} }
func idempotent() *mcp.ToolAnnotations { return &mcp.ToolAnnotations{IdempotentHint: true} }

var impl = &mcp.Implementation{Name: "test", Version: "v0.0.1"}

// newServer returns a real MCP server with tools, behind srv's middleware
// when srv is not nil.
func newServer(t *testing.T, srv *deadlinemcp.Server, tools ...*tool) *mcp.Server {
	t.Helper()
	s := mcp.NewServer(impl, nil)
	if srv != nil {
		s.AddReceivingMiddleware(srv.Middleware())
	}
	for _, tl := range tools {
		tl.add(s)
	}
	return s
}

// newClient returns a real MCP client with c's middleware, and the hooks'
// record of the attempts' grants.
func newClient(t *testing.T, opts ...deadlinemcp.ClientOption) (*mcp.Client, *deadlinemcp.Client, *grants) {
	t.Helper()
	g := &grants{}
	c, err := deadlinemcp.NewClient(append([]deadlinemcp.ClientOption{deadlinemcp.WithHooks(g.hooks())}, opts...)...)
	require.NoError(t, err)
	mc := mcp.NewClient(impl, nil)
	mc.AddSendingMiddleware(c.Middleware())
	return mc, c, g
}

// grants records the lease of every attempt of the tool search.
type grants struct {
	mu  sync.Mutex
	all []time.Duration
}

func (g *grants) hooks() *deadline.Hooks {
	return &deadline.Hooks{AttemptStart: func(ctx context.Context, a deadline.AttemptInfo) context.Context {
		if strings.Contains(a.Name, "search") {
			g.mu.Lock()
			g.all = append(g.all, a.Granted)
			g.mu.Unlock()
		}
		return ctx
	}}
}

func (g *grants) list() []time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]time.Duration(nil), g.all...)
}

// connectInMemory connects client and server over the SDK's in-memory
// transport; the sessions close at cleanup.
func connectInMemory(t *testing.T, s *mcp.Server, c *mcp.Client) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	require.NoError(t, err)
	cs, err := c.Connect(ctx, ct, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs
}

// listTools lists every tool of the session, as an agent does before it
// calls them; the client learns their annotations from it.
func listTools(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	for _, err := range cs.Tools(context.Background(), nil) {
		require.NoError(t, err)
	}
}

// call calls the tool name with a budget from now.
func call(cs *mcp.ClientSession, budget time.Duration, p deadline.Policy, name string) (*mcp.CallToolResult, error) {
	ctx := deadline.NewContext(context.Background(), deadline.New(budget))
	ctx = deadlinemcp.WithRequestPolicy(ctx, p)
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: name})
}

func ms(d time.Duration) float64 { return float64((d + time.Millisecond - 1) / time.Millisecond) }

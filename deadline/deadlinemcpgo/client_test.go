package deadlinemcpgo_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcpgo"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
)

// A read-only tool whose first attempt hangs is cut at its ceiling, its
// handler's context ends, and the second attempt answers; each attempt
// carries what was left when it was sent.
func TestHangingReadOnlyToolRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		search := &tool{name: "search", annotations: readOnly(), behave: hangFirst(1)}
		mc := connectInProcess(t, newBudgetClient(t), newServer(t, nil, search))
		listTools(t, mc)
		res, err := call(mc, time.Second, deadline.Policy{MaxAttempts: 3, AttemptTimeout: 100 * time.Millisecond}, "search")
		require.NoError(t, err)
		assert.False(t, res.IsError)
		got := search.arrivals()
		require.Len(t, got, 2)
		assert.Equal(t, float64(100), got[0].Meta)
		assert.Equal(t, float64(100), got[1].Meta)
		assert.Error(t, <-got[0].Ended, "the first handler's context ended with its lease")
	})
}

// Only tools whose annotations (or WithIdempotentTools) say so are tried
// again; an unlisted or unannotated tool is called once.
func TestOnlyAnnotatedToolsRetried(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ann      *mcp.ToolAnnotation
		opts     []deadlinemcpgo.ClientOption
		list     bool
		attempts int
	}{
		{"read-only", readOnly(), nil, true, 2},
		{"idempotent", &mcp.ToolAnnotation{IdempotentHint: mcp.ToBoolPtr(true)}, nil, true, 2},
		{"no hints", &mcp.ToolAnnotation{ReadOnlyHint: mcp.ToBoolPtr(false)}, nil, true, 1},
		{"not listed", readOnly(), nil, false, 1},
		{"named idempotent", nil, []deadlinemcpgo.ClientOption{mcpbudget.WithIdempotentTools("search")}, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				search := &tool{name: "search", annotations: tc.ann, behave: hangFirst(1)}
				mc := connectInProcess(t, newBudgetClient(t, tc.opts...), newServer(t, nil, search))
				if tc.list {
					listTools(t, mc)
				}
				_, err := call(mc, time.Second, deadline.Policy{MaxAttempts: 3, AttemptTimeout: 100 * time.Millisecond}, "search")
				assert.Len(t, search.arrivals(), tc.attempts)
				if tc.attempts == 1 {
					assert.ErrorIs(t, err, context.DeadlineExceeded)
				} else {
					assert.NoError(t, err)
				}
			})
		})
	}
}

// A tool result with isError and a handler's JSON-RPC error are answers:
// not retried, and the error keeps its code.
func TestAnswersNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		failing := &tool{name: "search", annotations: readOnly(), behave: func(context.Context, int) (*mcp.CallToolResult, error) {
			n++
			return mcp.NewToolResultError("no results"), nil
		}}
		mc := connectInProcess(t, newBudgetClient(t), newServer(t, nil, failing))
		listTools(t, mc)
		res, err := call(mc, time.Second, deadline.Policy{MaxAttempts: 3}, "search")
		require.NoError(t, err)
		assert.True(t, res.IsError)
		assert.Equal(t, 1, n)

		_, err = call(mc, time.Second, deadline.Policy{MaxAttempts: 3}, "missing")
		re, ok := errors.AsType[*deadlinemcpgo.ResponseError](err)
		require.True(t, ok, "%v", err)
		assert.Equal(t, mcp.INVALID_PARAMS, re.Code)
		assert.ErrorIs(t, err, mcp.ErrInvalidParams, "mcp-go's mapping is reached too")
	})
}

// Below the client's floor nothing is sent.
func TestClientRefusesBelowFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		search := &tool{name: "search"}
		mc := connectInProcess(t, newBudgetClient(t), newServer(t, nil, search))
		_, err := call(mc, 10*time.Millisecond, deadline.Policy{MaxAttempts: 1, Floor: 20 * time.Millisecond}, "search")
		assert.ErrorIs(t, err, deadline.ErrRefused)
		assert.Empty(t, search.arrivals())
	})
}

// Every request carries its budget, whatever its method, and those sent
// without params too; notifications carry none.
func TestBudgetOnEveryMethod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		seen := map[string]any{}
		hooks := &server.Hooks{}
		hooks.AddOnRequestInitialization(func(_ context.Context, _ any, message any) error {
			raw, _ := message.(json.RawMessage)
			var m struct {
				Method string `json:"method"`
				Params struct {
					Meta map[string]any `json:"_meta"`
				} `json:"params"`
			}
			if json.Unmarshal(raw, &m) == nil {
				mu.Lock()
				seen[m.Method] = m.Params.Meta[mcpbudget.MetaKey]
				mu.Unlock()
			}
			return nil
		})
		s := server.NewMCPServer("test", "v1", server.WithHooks(hooks), server.WithToolCapabilities(true),
			server.WithPromptCapabilities(true), server.WithResourceCapabilities(false, true))
		s.AddTools((&tool{name: "search"}).serverTool())
		s.AddPrompt(mcp.NewPrompt("greet"), func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return mcp.NewGetPromptResult("hi", nil), nil
		})
		s.AddResource(mcp.NewResource("file:///a", "a"), func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: "file:///a", Text: "a"}}, nil
		})
		mc := connectInProcess(t, newBudgetClient(t), s)
		ctx := deadline.NewContext(context.Background(), deadline.New(time.Second))
		_, err := mc.ListTools(ctx, mcp.ListToolsRequest{})
		require.NoError(t, err)
		_, err = mc.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "search"}})
		require.NoError(t, err)
		_, err = mc.ListPrompts(ctx, mcp.ListPromptsRequest{})
		require.NoError(t, err)
		_, err = mc.GetPrompt(ctx, mcp.GetPromptRequest{Params: mcp.GetPromptParams{Name: "greet"}})
		require.NoError(t, err)
		_, err = mc.ListResources(ctx, mcp.ListResourcesRequest{})
		require.NoError(t, err)
		_, err = mc.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "file:///a"}})
		require.NoError(t, err)

		mu.Lock()
		defer mu.Unlock()
		for _, m := range []string{"tools/list", "tools/call", "prompts/list", "prompts/get", "resources/list", "resources/read"} {
			assert.Equal(t, float64(980), seen[m], m) // the default policy's 20ms floor kept
		}
		for m, v := range seen {
			assert.NotNil(t, v, "%s carries a budget", m)
		}
	})
}

// The handshake gets no ceiling, a tool its own policy, and the context's
// policy wins over both.
func TestPolicyFunc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var asked []string
		c := newBudgetClient(t,
			mcpbudget.WithPolicy(deadline.Policy{MaxAttempts: 1, AttemptTimeout: 150 * time.Millisecond}),
			mcpbudget.WithPolicyFunc(func(method, tool string) (deadline.Policy, bool) {
				mu.Lock()
				asked = append(asked, method+" "+tool)
				mu.Unlock()
				return deadline.Policy{MaxAttempts: 1, AttemptTimeout: 70 * time.Millisecond}, tool == "fetch"
			}))
		search, fetch := &tool{name: "search"}, &tool{name: "fetch"}
		mc := connectInProcess(t, c, newServer(t, nil, search, fetch))
		ctx := deadline.NewContext(context.Background(), deadline.New(time.Second))
		_, err := mc.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "search"}})
		require.NoError(t, err)
		_, err = mc.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fetch"}})
		require.NoError(t, err)
		_, err = mc.CallTool(mcpbudget.WithRequestPolicy(ctx, deadline.Policy{MaxAttempts: 1, AttemptTimeout: 30 * time.Millisecond}), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "fetch"}})
		require.NoError(t, err)
		assert.Equal(t, float64(150), search.arrivals()[0].Meta)
		assert.Equal(t, float64(70), fetch.arrivals()[0].Meta)
		assert.Equal(t, float64(30), fetch.arrivals()[1].Meta)
		mu.Lock()
		defer mu.Unlock()
		assert.Contains(t, asked, "tools/call fetch")
	})
}

func TestNewServerOptions(t *testing.T) {
	for name, opts := range map[string][]deadlinemcpgo.ServerOption{
		"max 0":          {deadlinemcpgo.WithMaxBudget(0)},
		"negative floor": {deadlinemcpgo.WithFloor(-1)},
		"floor at max":   {deadlinemcpgo.WithMaxBudget(time.Second), deadlinemcpgo.WithFloor(time.Second)},
		"reserved key":   {deadlinemcpgo.WithInboundMetaKey("io.modelcontextprotocol/budget-ms")},
	} {
		s, err := deadlinemcpgo.NewServer(opts...)
		assert.Nil(t, s, name)
		assert.ErrorIs(t, err, deadline.ErrInvalidPolicy, name)
	}
	_, err := deadlinemcpgo.NewClient(mcpbudget.WithDefaultBudget(0))
	assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
}

package deadlinemcp_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
)

// byMethod records the first admission of every method a Server decided.
type byMethod struct {
	mu  sync.Mutex
	all map[string]deadlinemcp.Admission
}

func (r *byMethod) option() deadlinemcp.ServerOption {
	return deadlinemcp.WithAdmission(func(_ context.Context, method string, _ mcp.Request, a deadlinemcp.Admission) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.all == nil {
			r.all = make(map[string]deadlinemcp.Admission)
		}
		if _, ok := r.all[method]; !ok {
			r.all[method] = a
		}
	})
}

func (r *byMethod) get(method string) (deadlinemcp.Admission, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.all[method]
	return a, ok
}

// Requests the caller sends without params (ListTools(ctx, nil),
// Ping(ctx, nil), …) carry the attempt's lease in _meta all the same, over
// streamable HTTP: the server admits them with the caller's budget, not
// with its own 30 s maximum.
func TestNilParamsCarryBudget(t *testing.T) {
	rec := &byMethod{}
	srv, err := deadlinemcp.NewServer(rec.option())
	require.NoError(t, err)
	s := newServer(t, srv, &tool{name: "search"})
	s.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	read := func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "x"}}}, nil
	}
	s.AddResource(&mcp.Resource{URI: "test://r", Name: "r"}, read)
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://t/{x}", Name: "t"}, read)
	mc, _, _ := newClient(t)
	cs, _ := connectHTTP(t, s, mc, 0)

	const budget = 10 * time.Second // the server's maximum is 30 s
	ctx := deadline.NewContext(context.Background(), deadline.New(budget))
	require.NoError(t, cs.Ping(ctx, nil))
	_, err = cs.ListTools(ctx, nil)
	require.NoError(t, err)
	_, err = cs.ListPrompts(ctx, nil)
	require.NoError(t, err)
	_, err = cs.ListResources(ctx, nil)
	require.NoError(t, err)
	_, err = cs.ListResourceTemplates(ctx, nil)
	require.NoError(t, err)

	for _, m := range []string{"ping", "tools/list", "prompts/list", "resources/list", "resources/templates/list"} {
		a, ok := rec.get(m)
		require.True(t, ok, "%s reached the server", m)
		assert.True(t, a.Inbound.Present, "%s carries a budget in _meta", m)
		assert.Equal(t, admission.ByInbound, a.Limit, "%s: the caller's budget, not the server's maximum", m)
		assert.LessOrEqual(t, a.Budget, budget, m)
	}
}

type echoParams struct {
	mcp.ParamsBase
	Query string `json:"query,omitempty"`
}

type echoResult struct {
	mcp.ResultBase
}

// A custom method (mcp.CallCustomMethod) sent with nil params gets empty
// params of its own type, and carries its lease too.
func TestNilParamsCustomMethod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &byMethod{}
		srv, err := deadlinemcp.NewServer(rec.option())
		require.NoError(t, err)
		s := newServer(t, srv)
		require.NoError(t, mcp.AddReceivingCustomMethod(s, "com.example/echo",
			func(context.Context, *mcp.ServerSession, *echoParams) (*echoResult, error) { return &echoResult{}, nil }))
		mc, _, _ := newClient(t)
		require.NoError(t, mcp.AddSendingCustomMethod[*echoParams, *echoResult](mc, "com.example/echo"))
		// Protocol 2025-11-25: the SDK gives params of its own only to
		// requests of 2026-07-28.
		st, ct := mcp.NewInMemoryTransports()
		ss, err := s.Connect(context.Background(), st, nil)
		require.NoError(t, err)
		cs, err := mc.Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		require.NoError(t, err)
		defer func() {
			_ = cs.Close()
			_ = ss.Wait()
		}()

		ctx := deadline.NewContext(context.Background(), deadline.New(time.Second))
		_, err = mcp.CallCustomMethod[*echoParams, *echoResult](ctx, cs, "com.example/echo", nil)
		require.NoError(t, err)
		a, ok := rec.get("com.example/echo")
		require.True(t, ok)
		assert.True(t, a.Inbound.Present, "the custom request carries a budget")
		assert.Equal(t, admission.ByInbound, a.Limit)
	})
}

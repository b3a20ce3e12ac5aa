package deadlinemcp_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
)

// A client policy whose ceiling (150ms) is below the server's floor
// (300ms) is meant for tool calls: it does not cap the handshake, so
// Connect succeeds; the handshake is sent with what is left of the
// deadline, and the tool call under that policy is refused by the server.
func TestHandshakeNotCappedByClientPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &byMethod{}
		srv, err := deadlinemcp.NewServer(deadlinemcp.WithFloor(300*time.Millisecond), rec.option())
		require.NoError(t, err)
		search := &tool{name: "search"}
		s := newServer(t, srv, search)
		c, err := deadlinemcp.NewClient(deadlinemcp.WithPolicy(deadline.Policy{MaxAttempts: 1, AttemptTimeout: 150 * time.Millisecond}))
		require.NoError(t, err)
		mc := mcp.NewClient(impl, nil)
		mc.AddSendingMiddleware(c.Middleware())

		ctx := deadline.NewContext(context.Background(), deadline.New(2*time.Second))
		st, ct := mcp.NewInMemoryTransports()
		ss, err := s.Connect(context.Background(), st, nil)
		require.NoError(t, err)
		cs, err := mc.Connect(ctx, ct, nil)
		require.NoError(t, err, "the handshake is not capped by the tool policy's ceiling")
		t.Cleanup(func() {
			_ = cs.Close()
			_ = ss.Wait()
		})
		for _, m := range []string{"server/discover", "initialize"} {
			if a, ok := rec.get(m); ok {
				assert.Equal(t, 2*time.Second-deadline.DefaultPolicy().Floor, a.Budget, "%s: what is left of the deadline, less the default floor", m)
			}
		}

		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "search"})
		require.Error(t, err, "the tool call runs under the policy: 150ms, below the server's floor")
		assert.Empty(t, search.arrivals())
	})
}

// WithPolicyFunc chooses a policy by method and tool: the search tool gets
// a ceiling above the server's floor, every other request the client's
// policy; a policy in the context wins over both.
func TestPolicyFunc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &admissions{}
		search, fetch := &tool{name: "search"}, &tool{name: "fetch"}
		srv := newBudgetServer(t, rec, deadlinemcp.WithFloor(300*time.Millisecond))
		var asked []string
		mc, _, _ := newClient(t,
			deadlinemcp.WithPolicy(deadline.Policy{MaxAttempts: 1, AttemptTimeout: 150 * time.Millisecond}),
			deadlinemcp.WithPolicyFunc(func(method, tool string) (deadline.Policy, bool) {
				asked = append(asked, method+"|"+tool)
				if method == "tools/call" && tool == "search" {
					return deadline.Policy{Name: "search", MaxAttempts: 1, AttemptTimeout: 500 * time.Millisecond}, true
				}
				return deadline.Policy{}, false
			}))
		cs := connectInMemory(t, newServer(t, srv, search, fetch), mc)
		ctx := deadline.NewContext(context.Background(), deadline.New(2*time.Second))

		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search"})
		require.NoError(t, err)
		require.Len(t, search.arrivals(), 1)
		assert.Equal(t, float64(500), search.arrivals()[0].Meta, "search's own ceiling")

		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "fetch"})
		require.Error(t, err, "fetch falls back to WithPolicy: 150ms, below the server's floor")
		assert.Empty(t, fetch.arrivals())

		_, err = cs.CallTool(deadlinemcp.WithRequestPolicy(ctx, deadline.Policy{MaxAttempts: 1, AttemptTimeout: 400 * time.Millisecond}),
			&mcp.CallToolParams{Name: "fetch"})
		require.NoError(t, err, "the context's policy wins")
		assert.Equal(t, float64(400), fetch.arrivals()[0].Meta)

		assert.Contains(t, asked, "tools/call|search")
		assert.Contains(t, asked, "server/discover|", "the handshake is asked too")
		for _, a := range asked {
			assert.NotContains(t, a, "notifications/", "notifications are never passed to it")
		}
	})
}

// An invalid policy from WithPolicyFunc fails that request, nothing sent.
func TestPolicyFuncInvalidPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		search := &tool{name: "search"}
		mc, _, _ := newClient(t, deadlinemcp.WithPolicyFunc(func(method, _ string) (deadline.Policy, bool) {
			return deadline.Policy{MaxAttempts: -1}, method == "tools/call"
		}))
		cs := connectInMemory(t, newServer(t, nil, search), mc)
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search"})
		var pe *deadline.PolicyError
		require.ErrorAs(t, err, &pe)
		assert.Empty(t, search.arrivals())
	})
}

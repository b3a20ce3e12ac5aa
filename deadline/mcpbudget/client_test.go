package mcpbudget_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// The policy of a request: the context's, the function's, the
// handshake's, the client's; named, and retried only when safe and never
// on a refusal.
func TestClientPolicy(t *testing.T) {
	step := deadline.Policy{Name: "step", MaxAttempts: 2}
	byTool := deadline.Policy{MaxAttempts: 4, AttemptTimeout: 150 * time.Millisecond}
	c, err := mcpbudget.NewClient(
		mcpbudget.WithPolicy(deadline.Policy{MaxAttempts: 3, AttemptTimeout: 100 * time.Millisecond}),
		mcpbudget.WithPolicyFunc(func(method, tool string) (deadline.Policy, bool) { return byTool, tool == "fetch" }),
		mcpbudget.WithIdempotentTools("fetch"),
	)
	require.NoError(t, err)
	ctx := context.Background()

	assert.Equal(t, "step", c.Policy(mcpbudget.WithRequestPolicy(ctx, step), "tools/call", "fetch", true).Name)
	p := c.Policy(ctx, "tools/call", "fetch", true)
	assert.Equal(t, "MCP tools/call fetch", p.Name)
	assert.Equal(t, 4, p.MaxAttempts)
	p = c.Policy(ctx, "initialize", "", false)
	assert.Zero(t, p.AttemptTimeout, "the handshake gets no ceiling")
	p = c.Policy(ctx, "tools/call", "search", false)
	assert.Equal(t, 3, p.MaxAttempts)
	assert.False(t, p.Retryable(deadline.Retryable(errors.New("x"))), "not safe: never retried")
	p = c.Policy(ctx, "tools/list", "", true)
	assert.True(t, p.Retryable(deadline.Retryable(errors.New("x"))))
	custom := c.Policy(mcpbudget.WithRequestPolicy(ctx, deadline.Policy{MaxAttempts: 2, Retryable: func(error) bool { return true }}), "ping", "", true)
	assert.False(t, custom.Retryable(&mcpbudget.RefusedError{}), "a refusal, whatever the classifier")
	assert.True(t, c.IdempotentTool("fetch"))
	assert.Equal(t, mcpbudget.MetaKey, c.Key())
}

// WithLimiter and WithThrottle fill a policy that has none; a policy's own
// stay.
func TestClientOverloadParts(t *testing.T) {
	l, err := overload.NewLimiter()
	require.NoError(t, err)
	th, err := overload.NewThrottle()
	require.NoError(t, err)
	c, err := mcpbudget.NewClient(mcpbudget.WithLimiter(l), mcpbudget.WithThrottle(th))
	require.NoError(t, err)
	p := c.Policy(context.Background(), "tools/call", "search", true)
	assert.Same(t, l, p.Limiter)
	assert.Same(t, th, p.Throttle)
	own, err := overload.NewThrottle(overload.WithThrottleK(3))
	require.NoError(t, err)
	p = c.Policy(mcpbudget.WithRequestPolicy(context.Background(), deadline.Policy{MaxAttempts: 1, Throttle: own}), "ping", "", true)
	assert.Same(t, own, p.Throttle)
}

func TestNewClientOptions(t *testing.T) {
	for name, o := range map[string]mcpbudget.ClientOption{
		"default budget 0": mcpbudget.WithDefaultBudget(0),
		"invalid policy":   mcpbudget.WithPolicy(deadline.Policy{}),
		"reserved key":     mcpbudget.WithMetaKey("dev.mcp/budget"),
		"empty tool":       mcpbudget.WithIdempotentTools(""),
	} {
		c, err := mcpbudget.NewClient(o)
		assert.Nil(t, c, name)
		assert.ErrorIs(t, err, deadline.ErrInvalidPolicy, name)
	}
}

func TestMeta(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	m := mcpbudget.WithBudget(map[string]any{"traceparent": "x"}, mcpbudget.MetaKey, ctx)
	assert.Equal(t, "x", m["traceparent"])
	assert.InDelta(t, 3600000, m[mcpbudget.MetaKey], 1000)
	assert.Equal(t, int64(1), mcpbudget.Meta(context.Background()), "no deadline: 1")
}

// A request's default name is the same whether or not the client built it
// before, for more tools than it keeps names of.
func TestClientPolicyNames(t *testing.T) {
	c, err := mcpbudget.NewClient()
	require.NoError(t, err)
	ctx := context.Background()
	for range 2 {
		for i := range 1100 {
			tool := "t" + strconv.Itoa(i)
			assert.Equal(t, "MCP tools/call "+tool, c.Policy(ctx, "tools/call", tool, true).Name)
		}
		assert.Equal(t, "MCP tools/list", c.Policy(ctx, "tools/list", "", true).Name)
	}
}

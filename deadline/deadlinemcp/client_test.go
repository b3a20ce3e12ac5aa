package deadlinemcp_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
)

// retryPolicy: 3 attempts of at most 100ms each, a 20ms floor, no backoff.
func retryPolicy() deadline.Policy {
	return deadline.Policy{Name: "search", MaxAttempts: 3, AttemptTimeout: 100 * time.Millisecond, Floor: 20 * time.Millisecond}
}

// The budget on the wire is each attempt's lease, and shrinks with what is
// left: 250ms, ceiling 100ms, floor 20ms gives leases 100, 100 and 30ms.
func TestBudgetOnWireShrinksPerAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		search := &tool{name: "search", annotations: readOnly(), behave: hangFirst(2)}
		mc, _, g := newClient(t)
		cs := connectInMemory(t, newServer(t, nil, search), mc)
		listTools(t, cs)

		res, err := call(cs, 250*time.Millisecond, retryPolicy(), "search")
		require.NoError(t, err)
		require.NotEmpty(t, res.Content)
		assert.Equal(t, "ok", res.Content[0].(*mcp.TextContent).Text)

		got := search.arrivals()
		require.Len(t, got, 3)
		assert.Equal(t, []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 30 * time.Millisecond}, g.list())
		for i, a := range got {
			assert.Equal(t, ms(g.list()[i]), a.Meta, "attempt %d: the _meta budget is its lease", i+1)
		}
	})
}

// A hanging tool is cut at its lease: the call returns when the lease ends,
// and the SDK's notifications/cancelled ends the handler's context on a
// server that has no budget middleware of its own.
func TestHangingToolCutAtLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		search := &tool{name: "search", behave: hangFirst(1)}
		mc, _, _ := newClient(t)
		cs := connectInMemory(t, newServer(t, nil, search), mc)

		start := time.Now()
		_, err := call(cs, time.Second, deadline.Policy{MaxAttempts: 1, AttemptTimeout: 100 * time.Millisecond}, "search")
		require.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 100*time.Millisecond, time.Since(start), "the call ends at its lease (virtual time)")

		got := search.arrivals()
		require.Len(t, got, 1)
		assert.False(t, got[0].HasLimit, "the server has no middleware: only the cancellation ends its context")
		synctest.Wait()
		select {
		case cause := <-got[0].Ended:
			assert.ErrorIs(t, cause, context.Canceled)
		default:
			t.Fatal("the handler's context is not done after the lease ended")
		}
	})
}

// Only tools the session listed as read-only or idempotent are retried.
func TestOnlyAnnotatedToolsRetried(t *testing.T) {
	cases := []struct {
		name        string
		annotations *mcp.ToolAnnotations
		list        bool
		calls       int
	}{
		{"readOnlyHint", readOnly(), true, 2},
		{"idempotentHint", idempotent(), true, 2},
		{"no annotations", nil, true, 1},
		{"destructive, not idempotent", &mcp.ToolAnnotations{DestructiveHint: new(true)}, true, 1},
		{"read-only but never listed", readOnly(), false, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				search := &tool{name: "search", annotations: tc.annotations, behave: hangFirst(1)}
				mc, _, _ := newClient(t)
				cs := connectInMemory(t, newServer(t, nil, search), mc)
				if tc.list {
					listTools(t, cs)
				}
				_, err := call(cs, time.Second, retryPolicy(), "search")
				assert.Len(t, search.arrivals(), tc.calls)
				if tc.calls == 1 {
					var stop *deadline.StopError
					require.ErrorAs(t, err, &stop)
					assert.Equal(t, deadline.ReasonNotRetryable, stop.Reason)
				} else {
					require.NoError(t, err)
				}
			})
		})
	}
}

// A tool that answers isError is not retried: it ran and said what went
// wrong.
func TestToolErrorNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		search := &tool{name: "search", annotations: readOnly(), behave: func(context.Context, int) (*mcp.CallToolResult, error) {
			r := text("index unavailable")
			r.IsError = true
			return r, nil
		}}
		mc, _, _ := newClient(t)
		cs := connectInMemory(t, newServer(t, nil, search), mc)
		listTools(t, cs)
		res, err := call(cs, time.Second, retryPolicy(), "search")
		require.NoError(t, err)
		assert.True(t, res.IsError)
		assert.Len(t, search.arrivals(), 1)
	})
}

// Below the floor nothing is sent: no tools/call reaches the server.
func TestClientRefusesBelowFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		search := &tool{name: "search", annotations: readOnly()}
		mc, _, g := newClient(t)
		cs := connectInMemory(t, newServer(t, nil, search), mc)
		_, err := call(cs, 20*time.Millisecond, retryPolicy(), "search")
		require.ErrorIs(t, err, deadline.ErrRefused)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Empty(t, search.arrivals())
		assert.Empty(t, g.list())
	})
}

// The caller's params keep their own _meta (the SDK adds its protocol keys
// to it): the budget goes in a copy.
func TestCallerParamsUnchanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		search := &tool{name: "search", annotations: readOnly()}
		mc, _, _ := newClient(t)
		cs := connectInMemory(t, newServer(t, nil, search), mc)
		params := &mcp.CallToolParams{Name: "search", Meta: mcp.Meta{"com.example/trace": "x"}}
		ctx := deadline.NewContext(context.Background(), deadline.New(time.Second))
		_, err := cs.CallTool(ctx, params)
		require.NoError(t, err)
		assert.Equal(t, "x", params.Meta["com.example/trace"])
		assert.NotContains(t, params.Meta, deadlinemcp.MetaKey, "the budget went in a copy")
		assert.Equal(t, float64(980), search.arrivals()[0].Meta, "1s less the default 20ms floor")
	})
}

// The _meta map the Client reuses carries nothing of another attempt or
// call: a member a middleware inside the Client's adds for attempt 1 (as
// a trace context is) is gone from attempt 2, a caller's member from the
// next call, and the caller's params get their own _meta back (with the
// members the SDK itself adds to it).
func TestMetaReusedCleanly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var seen [][]string // the _meta keys of each arrival
		s := mcp.NewServer(impl, nil)
		s.AddTool(&mcp.Tool{Name: "search", Annotations: readOnly(), InputSchema: map[string]any{"type": "object"}},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				mu.Lock()
				var keys []string // the SDK's own protocol members left out
				for k := range req.Params.GetMeta() {
					if !strings.HasPrefix(k, "io.modelcontextprotocol/") {
						keys = append(keys, k)
					}
				}
				slices.Sort(keys)
				seen = append(seen, keys)
				n := len(seen)
				mu.Unlock()
				if n == 1 {
					<-ctx.Done() // the first attempt's lease ends: the call retries
					return nil, ctx.Err()
				}
				return text("ok"), nil
			})
		c, err := deadlinemcp.NewClient()
		require.NoError(t, err)
		mc := mcp.NewClient(impl, nil)
		attempts := 0
		mc.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler { // inside the Client's: per attempt
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "tools/call" {
					if attempts++; attempts == 1 {
						req.GetParams().(mcp.RequestParams).GetMeta()["com.example/first-attempt"] = true
					}
				}
				return next(ctx, method, req)
			}
		})
		mc.AddSendingMiddleware(c.Middleware())
		cs := connectInMemory(t, s, mc)
		listTools(t, cs)

		first := &mcp.CallToolParams{Name: "search", Meta: mcp.Meta{"com.example/caller": "x"}}
		ctx := deadlinemcp.WithRequestPolicy(deadline.NewContext(context.Background(), deadline.New(time.Second)), retryPolicy())
		_, err = cs.CallTool(ctx, first)
		require.NoError(t, err)
		_, err = cs.CallTool(deadline.NewContext(context.Background(), deadline.New(time.Second)), &mcp.CallToolParams{Name: "search"})
		require.NoError(t, err)

		assert.Equal(t, [][]string{
			{"com.example/caller", "com.example/first-attempt", deadlinemcp.MetaKey},
			{"com.example/caller", deadlinemcp.MetaKey},
			{deadlinemcp.MetaKey},
		}, seen)
		assert.Equal(t, "x", first.Meta["com.example/caller"])
		assert.NotContains(t, first.Meta, deadlinemcp.MetaKey)
		assert.NotContains(t, first.Meta, "com.example/first-attempt")
	})
}

// A policy that is invalid when the call runs sends nothing.
func TestInvalidRequestPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		search := &tool{name: "search"}
		mc, _, _ := newClient(t)
		cs := connectInMemory(t, newServer(t, nil, search), mc)
		_, err := call(cs, time.Second, deadline.Policy{}, "search")
		require.ErrorIs(t, err, deadline.ErrInvalidPolicy)
		var pe *deadline.PolicyError
		assert.True(t, errors.As(err, &pe))
		assert.Empty(t, search.arrivals())
	})
}

// A tool the server lists without annotations is retried when the client
// declares it idempotent itself.
func TestIdempotentToolsOption(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		search := &tool{name: "search", behave: hangFirst(1)}
		mc, c, _ := newClient(t, deadlinemcp.WithIdempotentTools("search"))
		cs := connectInMemory(t, newServer(t, nil, search), mc)
		assert.True(t, c.ToolSafe(cs, "search"))
		assert.False(t, c.ToolSafe(cs, "other"))
		_, err := call(cs, time.Second, retryPolicy(), "search")
		require.NoError(t, err)
		assert.Len(t, search.arrivals(), 2)
	})
}

// A tool listed again replaces what the client knew: annotations that
// are gone make it unsafe again.
func TestRelistedToolLosesAnnotations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		search := &tool{name: "search", annotations: readOnly(), behave: hangFirst(1)}
		mc, c, _ := newClient(t)
		s := newServer(t, nil, search)
		cs := connectInMemory(t, s, mc)
		listTools(t, cs)
		require.True(t, c.ToolSafe(cs, "search"))

		search.annotations = nil
		search.add(s) // replaces the tool
		listTools(t, cs)
		assert.False(t, c.ToolSafe(cs, "search"))
		_, err := call(cs, time.Second, retryPolicy(), "search")
		require.Error(t, err)
		assert.Len(t, search.arrivals(), 1)
	})
}

// An error the tool's handler returns reached the server and was handled:
// not retried, even for a read-only tool.
func TestHandlerErrorNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		search := &tool{name: "search", annotations: readOnly(), behave: func(context.Context, int) (*mcp.CallToolResult, error) {
			return nil, errors.New("index corrupt")
		}}
		mc, _, _ := newClient(t)
		cs := connectInMemory(t, newServer(t, nil, search), mc)
		listTools(t, cs)
		_, err := call(cs, time.Second, retryPolicy(), "search")
		var stop *deadline.StopError
		require.ErrorAs(t, err, &stop)
		assert.Equal(t, deadline.ReasonNotRetryable, stop.Reason)
		assert.Contains(t, err.Error(), "index corrupt")
		var we *jsonrpc.Error
		assert.ErrorAs(t, err, &we, "the server's JSON-RPC error")
		assert.Len(t, search.arrivals(), 1)
	})
}

// Sessions keep apart: what one session listed does not make a tool safe
// on another.
func TestAnnotationsPerSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		search := &tool{name: "search", annotations: readOnly()}
		mc, c, _ := newClient(t)
		s := newServer(t, nil, search)
		a := connectInMemory(t, s, mc)
		b := connectInMemory(t, s, mc)
		listTools(t, a)
		assert.True(t, c.ToolSafe(a, "search"))
		assert.False(t, c.ToolSafe(b, "search"))
	})
}

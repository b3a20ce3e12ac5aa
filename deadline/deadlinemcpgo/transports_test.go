package deadlinemcpgo_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcpgo"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
)

// mcpgoTransport connects a client wrapped by c (bare for a nil c) to s
// over one of mcp-go's transports; budget is the server's Server, whose
// HTTPHandler fronts the HTTP transports (none for nil).
type mcpgoTransport func(t *testing.T, s *server.MCPServer, budget *deadlinemcpgo.Server, c *deadlinemcpgo.Client, opts ...client.ClientOption) *client.Client

func front(budget *deadlinemcpgo.Server, h http.Handler) http.Handler {
	if budget == nil {
		return h
	}
	return budget.HTTPHandler(h)
}

var mcpgoTransports = map[string]mcpgoTransport{
	"in-process": func(t *testing.T, s *server.MCPServer, _ *deadlinemcpgo.Server, c *deadlinemcpgo.Client, opts ...client.ClientOption) *client.Client {
		return connect(t, c, transport.NewInProcessTransport(s), opts...)
	},
	"stdio": func(t *testing.T, s *server.MCPServer, _ *deadlinemcpgo.Server, c *deadlinemcpgo.Client, opts ...client.ClientOption) *client.Client {
		sr, cw := io.Pipe() // client → server
		cr, sw := io.Pipe() // server → client
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = server.NewStdioServer(s).Listen(ctx, sr, sw)
		}()
		t.Cleanup(func() { cancel(); sr.Close(); cw.Close(); sw.Close(); <-done })
		return connect(t, c, transport.NewIO(cr, cw, nil), opts...)
	},
	"streamable HTTP": func(t *testing.T, s *server.MCPServer, budget *deadlinemcpgo.Server, c *deadlinemcpgo.Client, opts ...client.ClientOption) *client.Client {
		ts := httptest.NewServer(front(budget, server.NewStreamableHTTPServer(s)))
		t.Cleanup(ts.Close)
		tr, err := transport.NewStreamableHTTP(ts.URL)
		require.NoError(t, err)
		return connect(t, c, tr, opts...)
	},
	"stateless streamable HTTP": func(t *testing.T, s *server.MCPServer, budget *deadlinemcpgo.Server, c *deadlinemcpgo.Client, opts ...client.ClientOption) *client.Client {
		ts := httptest.NewServer(front(budget, server.NewStreamableHTTPServer(s, server.WithStateLess(true))))
		t.Cleanup(ts.Close)
		tr, err := transport.NewStreamableHTTP(ts.URL)
		require.NoError(t, err)
		return connect(t, c, tr, opts...)
	},
	"SSE": func(t *testing.T, s *server.MCPServer, budget *deadlinemcpgo.Server, c *deadlinemcpgo.Client, opts ...client.ClientOption) *client.Client {
		var h http.Handler
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
		sse := server.NewSSEServer(s, server.WithBaseURL(ts.URL))
		h = front(budget, sse)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = sse.Shutdown(ctx)
			ts.Close()
		})
		tr, err := transport.NewSSE(ts.URL + "/sse")
		require.NoError(t, err)
		return connect(t, c, tr, opts...)
	},
}

// The scenarios over every mcp-go transport, client and server wrapped:
// the budget arrives, the clamp holds, a refusal is typed, a hanging
// read-only tool is cut at its lease and tried again.
func TestTransports(t *testing.T) {
	for name, connectOver := range mcpgoTransports {
		t.Run(name, func(t *testing.T) {
			t.Run("budget arrives and is clamped", func(t *testing.T) {
				rec := &admissions{}
				search := &tool{name: "search"}
				srv := newBudgetServer(t, rec, deadlinemcpgo.WithMaxBudget(time.Hour))
				mc := connectOver(t, newServer(t, srv, search), srv, newBudgetClient(t))
				_, err := call(mc, 2*time.Hour, deadline.Policy{MaxAttempts: 1}, "search")
				require.NoError(t, err)
				got := search.arrivals()
				require.Len(t, got, 1)
				assert.InDelta(t, float64(2*time.Hour/time.Millisecond), got[0].Meta, 60000)
				assert.True(t, rec.list()[0].Clamped())
				assert.LessOrEqual(t, got[0].Left, time.Hour)
			})
			t.Run("refusal typed", func(t *testing.T) {
				rec := &admissions{}
				srv := newBudgetServer(t, rec, deadlinemcpgo.WithMaxBudget(2*time.Hour), deadlinemcpgo.WithFloor(time.Hour))
				search := &tool{name: "search", annotations: readOnly()}
				mc := connectOver(t, newServer(t, srv, search), srv, newBudgetClient(t))
				listTools(t, mc)
				_, err := call(mc, time.Minute, deadline.Policy{MaxAttempts: 3}, "search")
				refused, ok := errors.AsType[*mcpbudget.RefusedError](err)
				require.True(t, ok, "%v", err)
				assert.Equal(t, time.Hour, refused.Floor)
				assert.Empty(t, search.arrivals())
				assert.Len(t, rec.list(), 1, "not retried")
			})
			t.Run("hanging read-only tool cut and retried", func(t *testing.T) {
				srv := newBudgetServer(t, &admissions{})
				search := &tool{name: "search", annotations: readOnly(), behave: hangFirst(1)}
				mc := connectOver(t, newServer(t, srv, search), srv, newBudgetClient(t))
				listTools(t, mc)
				_, err := call(mc, time.Minute, deadline.Policy{MaxAttempts: 3, AttemptTimeout: 200 * time.Millisecond}, "search")
				require.NoError(t, err)
				got := search.arrivals()
				require.Len(t, got, 2)
				assert.Error(t, got[0].WaitEnded(t))
			})
			t.Run("cancellation reaches a bare server's handler", func(t *testing.T) {
				// No budget middleware on the server: only the client's
				// notifications/cancelled (or the POST's end) ends the handler.
				search := &tool{name: "search", behave: hangFirst(1)}
				mc := connectOver(t, newServer(t, nil, search), nil, newBudgetClient(t))
				_, err := call(mc, time.Minute, deadline.Policy{MaxAttempts: 1, AttemptTimeout: 200 * time.Millisecond}, "search")
				require.ErrorIs(t, err, context.DeadlineExceeded)
				got := search.arrivals()
				require.Len(t, got, 1)
				cause := got[0].WaitEnded(t)
				if name == "in-process" {
					// The handler runs under the attempt's own context.
					assert.ErrorIs(t, cause, context.DeadlineExceeded)
					return
				}
				assert.Equal(t, -time.Duration(1), got[0].Left, "a bare server sets no deadline")
				assert.ErrorIs(t, cause, context.Canceled, "notifications/cancelled, or the POST's end")
			})
			t.Run("ping without params carries a budget", func(t *testing.T) {
				ping := make(chan any, 1)
				hooks := &server.Hooks{}
				hooks.AddBeforePing(func(_ context.Context, _ any, req *mcp.PingRequest) {
					if req.Params.Meta != nil {
						ping <- req.Params.Meta.AdditionalFields[mcpbudget.MetaKey]
					} else {
						ping <- nil
					}
				})
				s := server.NewMCPServer("test", "v1", server.WithHooks(hooks))
				//lint:ignore SA1019 on a legacy connection Ping still sends ping with nil params, whose budget the test checks
				mc := connectOver(t, s, nil, newBudgetClient(t), client.WithLegacyProtocolOnly())
				//lint:ignore SA1019 on a legacy connection Ping still sends ping with nil params, whose budget the test checks
				require.NoError(t, mc.Ping(deadline.NewContext(context.Background(), deadline.New(time.Minute))))
				select {
				case v := <-ping:
					assert.InDelta(t, 59980, v, 1000)
				case <-time.After(10 * time.Second):
					t.Fatal("no ping arrived")
				}
			})
		})
	}
}

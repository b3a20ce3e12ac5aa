package interoptest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	mgclient "github.com/mark3labs/mcp-go/client"
	mgtransport "github.com/mark3labs/mcp-go/client/transport"
	mgmcp "github.com/mark3labs/mcp-go/mcp"
	mgserver "github.com/mark3labs/mcp-go/server"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
	"github.com/deadlinebudget/budget/deadline/deadlinemcpgo"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
)

var impl = &sdk.Implementation{Name: "interop", Version: "v1"}

// session is one client connection, whichever SDK: list lists the tools,
// call calls one.
type session struct {
	list func(ctx context.Context) error
	call func(ctx context.Context, name string) error
}

// limits are the server's maximum and floor for one scenario.
type limits struct{ max, floor time.Duration }

// serve starts a server of one SDK with the tools and the budget limits,
// and connects a client of the other SDK to it over one transport.
type serve func(t *testing.T, l limits, tools ...*tool) session

// stdioPipes returns the two ends of a stdio connection.
func stdioPipes(t *testing.T) (sr, cr *io.PipeReader, cw, sw *io.PipeWriter) {
	sr, cw = io.Pipe() // client → server
	cr, sw = io.Pipe() // server → client
	t.Cleanup(func() { sr.Close(); cw.Close(); cr.Close(); sw.Close() })
	return sr, cr, cw, sw
}

// goSDKClient connects a go-sdk client with deadlinemcp's middleware.
func goSDKClient(t *testing.T, tr sdk.Transport) session {
	t.Helper()
	c, err := deadlinemcp.NewClient()
	require.NoError(t, err)
	mc := sdk.NewClient(impl, nil)
	mc.AddSendingMiddleware(c.Middleware())
	cs, err := mc.Connect(deadline.NewContext(context.Background(), deadline.New(time.Hour)), tr, nil)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	return session{
		list: func(ctx context.Context) error { _, err := cs.ListTools(ctx, nil); return err },
		call: func(ctx context.Context, name string) error {
			_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name})
			return err
		},
	}
}

// mcpgoServer is an mcp-go server with deadlinemcpgo's middleware.
func mcpgoServer(t *testing.T, l limits, tools []*tool) (*mgserver.MCPServer, *deadlinemcpgo.Server) {
	t.Helper()
	b, err := deadlinemcpgo.NewServer(deadlinemcpgo.WithMaxBudget(l.max), deadlinemcpgo.WithFloor(l.floor))
	require.NoError(t, err)
	s := mgserver.NewMCPServer("interop", "v1", append(b.Options(), mgserver.WithToolCapabilities(true))...)
	for _, tl := range tools {
		s.AddTools(tl.mcpgoTool())
	}
	return s, b
}

// mcpgoClient connects an mcp-go client through deadlinemcpgo's transport.
//
// A stateful go-sdk server over streamable HTTP or SSE answers mcp-go's
// server/discover with no version mcp-go takes for the modern protocol,
// and mcp-go gives up instead of falling back to initialize: those cases
// pass opts client.WithLegacyProtocolOnly() (the SDKs' mismatch, not the
// budget's; docs/mcp.md).
func mcpgoClient(t *testing.T, tr mgtransport.Interface, opts ...mgclient.ClientOption) session {
	t.Helper()
	c, err := deadlinemcpgo.NewClient()
	require.NoError(t, err)
	mc := mgclient.NewClient(c.Transport(tr), opts...)
	ctx := deadline.NewContext(context.Background(), deadline.New(time.Hour))
	require.NoError(t, mc.Start(ctx))
	t.Cleanup(func() { mc.Close() })
	_, err = mc.Initialize(ctx, mgmcp.InitializeRequest{Params: mgmcp.InitializeParams{ClientInfo: mgmcp.Implementation{Name: "interop", Version: "v1"}}})
	require.NoError(t, err)
	return session{
		list: func(ctx context.Context) error { _, err := mc.ListTools(ctx, mgmcp.ListToolsRequest{}); return err },
		call: func(ctx context.Context, name string) error {
			_, err := mc.CallTool(ctx, mgmcp.CallToolRequest{Params: mgmcp.CallToolParams{Name: name}})
			return err
		},
	}
}

// goSDKServer is a go-sdk server with deadlinemcp's middleware.
func goSDKServer(t *testing.T, l limits, tools []*tool) (*sdk.Server, *deadlinemcp.Server) {
	t.Helper()
	b, err := deadlinemcp.NewServer(deadlinemcp.WithMaxBudget(l.max), deadlinemcp.WithFloor(l.floor))
	require.NoError(t, err)
	s := sdk.NewServer(impl, nil)
	s.AddReceivingMiddleware(b.Middleware())
	for _, tl := range tools {
		tl.addSDK(s)
	}
	return s, b
}

// goSDKToMCPGo: a go-sdk client with our middleware, an mcp-go server
// with ours.
var goSDKToMCPGo = map[string]serve{
	"streamable HTTP": func(t *testing.T, l limits, tools ...*tool) session {
		s, b := mcpgoServer(t, l, tools)
		ts := httptest.NewServer(b.HTTPHandler(mgserver.NewStreamableHTTPServer(s)))
		t.Cleanup(ts.Close)
		return goSDKClient(t, &sdk.StreamableClientTransport{Endpoint: ts.URL, DisableStandaloneSSE: true, MaxRetries: -1})
	},
	"stateless streamable HTTP": func(t *testing.T, l limits, tools ...*tool) session {
		s, b := mcpgoServer(t, l, tools)
		ts := httptest.NewServer(b.HTTPHandler(mgserver.NewStreamableHTTPServer(s, mgserver.WithStateLess(true))))
		t.Cleanup(ts.Close)
		return goSDKClient(t, &sdk.StreamableClientTransport{Endpoint: ts.URL, DisableStandaloneSSE: true, MaxRetries: -1})
	},
	"SSE": func(t *testing.T, l limits, tools ...*tool) session {
		s, b := mcpgoServer(t, l, tools)
		var h http.Handler
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
		sse := mgserver.NewSSEServer(s, mgserver.WithBaseURL(ts.URL))
		h = b.HTTPHandler(sse)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = sse.Shutdown(ctx)
			ts.Close()
		})
		return goSDKClient(t, &sdk.SSEClientTransport{Endpoint: ts.URL + "/sse"})
	},
	"stdio": func(t *testing.T, l limits, tools ...*tool) session {
		s, _ := mcpgoServer(t, l, tools)
		sr, cr, cw, sw := stdioPipes(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = mgserver.NewStdioServer(s).Listen(ctx, sr, sw)
		}()
		t.Cleanup(func() { cancel(); sr.Close(); <-done })
		return goSDKClient(t, &sdk.IOTransport{Reader: cr, Writer: cw})
	},
}

// mcpgoToGoSDK: an mcp-go client with our transport, a go-sdk server
// with our middleware.
var mcpgoToGoSDK = map[string]serve{
	"streamable HTTP": func(t *testing.T, l limits, tools ...*tool) session {
		s, b := goSDKServer(t, l, tools)
		ts := httptest.NewServer(b.HTTPHandler(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)))
		t.Cleanup(ts.Close)
		tr, err := mgtransport.NewStreamableHTTP(ts.URL)
		require.NoError(t, err)
		//lint:ignore SA1019 mcp-go v1.6.0 does not fall back from server/discover to initialize with a stateful go-sdk server (docs/mcp.md)
		return mcpgoClient(t, tr, mgclient.WithLegacyProtocolOnly())
	},
	"stateless streamable HTTP": func(t *testing.T, l limits, tools ...*tool) session {
		s, b := goSDKServer(t, l, tools)
		ts := httptest.NewServer(b.HTTPHandler(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{Stateless: true})))
		t.Cleanup(ts.Close)
		tr, err := mgtransport.NewStreamableHTTP(ts.URL)
		require.NoError(t, err)
		return mcpgoClient(t, tr)
	},
	"SSE": func(t *testing.T, l limits, tools ...*tool) session {
		s, _ := goSDKServer(t, l, tools)
		ts := httptest.NewServer(sdk.NewSSEHandler(func(*http.Request) *sdk.Server { return s }, nil))
		t.Cleanup(ts.Close)
		tr, err := mgtransport.NewSSE(ts.URL)
		require.NoError(t, err)
		//lint:ignore SA1019 mcp-go v1.6.0 does not fall back from server/discover to initialize with a stateful go-sdk server (docs/mcp.md)
		return mcpgoClient(t, tr, mgclient.WithLegacyProtocolOnly())
	},
	"stdio": func(t *testing.T, l limits, tools ...*tool) session {
		s, _ := goSDKServer(t, l, tools)
		sr, cr, cw, sw := stdioPipes(t)
		ss, err := s.Connect(context.Background(), &sdk.IOTransport{Reader: sr, Writer: sw}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { ss.Close() })
		return mcpgoClient(t, mgtransport.NewIO(cr, cw, nil))
	},
}

func run(budget time.Duration, p deadline.Policy) context.Context {
	ctx := deadline.NewContext(context.Background(), deadline.New(budget))
	return mcpbudget.WithRequestPolicy(ctx, p)
}

// The scenarios, each way, over each transport: the same budget arrives,
// a refusal is typed on the caller's side, a hanging read-only tool is cut
// at its lease and tried again.
func TestInterop(t *testing.T) {
	for way, transports := range map[string]map[string]serve{"go-sdk client to mcp-go server": goSDKToMCPGo, "mcp-go client to go-sdk server": mcpgoToGoSDK} {
		for name, connect := range transports {
			t.Run(way+"/"+name, func(t *testing.T) {
				t.Run("budget arrives", func(t *testing.T) {
					echo := &tool{name: "echo"}
					s := connect(t, limits{max: time.Hour}, echo)
					require.NoError(t, s.call(run(2*time.Second, deadline.Policy{MaxAttempts: 1, Floor: 20 * time.Millisecond}), "echo"))
					got := echo.arrivals()
					require.Len(t, got, 1)
					ms, ok := got[0].meta.(float64)
					require.True(t, ok, "%T %v", got[0].meta, got[0].meta)
					assert.LessOrEqual(t, ms, float64(1980))
					assert.Greater(t, ms, float64(1000))
					assert.LessOrEqual(t, got[0].left, time.Duration(ms)*time.Millisecond, "the handler's deadline is the lease")
					assert.Greater(t, got[0].left, time.Duration(0))
				})
				t.Run("clamped to the server's maximum", func(t *testing.T) {
					echo := &tool{name: "echo"}
					s := connect(t, limits{max: time.Minute}, echo)
					require.NoError(t, s.call(run(time.Hour, deadline.Policy{MaxAttempts: 1}), "echo"))
					assert.LessOrEqual(t, echo.arrivals()[0].left, time.Minute)
				})
				t.Run("refusal typed", func(t *testing.T) {
					search := &tool{name: "search", readOnly: true}
					s := connect(t, limits{max: time.Hour, floor: 10 * time.Minute}, search)
					require.NoError(t, s.list(run(time.Hour, deadline.DefaultPolicy())))
					err := s.call(run(time.Minute, deadline.Policy{MaxAttempts: 3}), "search")
					refused, ok := errors.AsType[*mcpbudget.RefusedError](err)
					require.True(t, ok, "%v", err)
					assert.Equal(t, 10*time.Minute, refused.Floor)
					assert.InDelta(t, float64(time.Minute), float64(refused.Budget), float64(time.Second))
					if _, isGoSDK := errors.AsType[*jsonrpc.Error](err); way == "go-sdk client to mcp-go server" {
						assert.True(t, isGoSDK, "the go-sdk's own error is reached too")
					}
					assert.Empty(t, search.arrivals())
				})
				t.Run("hanging read-only tool cut and retried", func(t *testing.T) {
					search := &tool{name: "search", readOnly: true, hang: 1}
					s := connect(t, limits{max: time.Hour}, search)
					require.NoError(t, s.list(run(time.Minute, deadline.DefaultPolicy())))
					require.NoError(t, s.call(run(time.Minute, deadline.Policy{MaxAttempts: 3, AttemptTimeout: 300 * time.Millisecond}), "search"))
					got := search.arrivals()
					require.Len(t, got, 2)
					select {
					case err := <-got[0].ended:
						assert.Error(t, err)
					case <-time.After(10 * time.Second):
						t.Fatal("the first attempt's handler did not end")
					}
				})
			})
		}
	}
}

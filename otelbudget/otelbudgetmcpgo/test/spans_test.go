package test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	mgclient "github.com/mark3labs/mcp-go/client"
	mgtransport "github.com/mark3labs/mcp-go/client/transport"
	mgmcp "github.com/mark3labs/mcp-go/mcp"
	mgserver "github.com/mark3labs/mcp-go/server"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
	"github.com/deadlinebudget/budget/deadline/deadlinemcpgo"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetmcp"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetmcpgo"
)

func TestMain(m *testing.M) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	goleak.VerifyTestMain(m)
}

var impl = &sdk.Implementation{Name: "test", Version: "v1"}

// echo answers "ok" on either SDK's server.
func sdkEcho(s *sdk.Server) {
	s.AddTool(&sdk.Tool{Name: "echo", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil
		})
}

func mcpgoEcho() mgserver.ServerTool {
	return mgserver.ServerTool{Tool: mgmcp.NewTool("echo"), Handler: func(context.Context, mgmcp.CallToolRequest) (*mgmcp.CallToolResult, error) {
		return mgmcp.NewToolResultText("ok"), nil
	}}
}

// caller calls echo once through a client of one SDK.
type caller func(ctx context.Context) error

// goSDKCaller is a go-sdk client with otelbudgetmcp's middleware over tr.
func goSDKCaller(t *testing.T, obs *otelbudget.Observer, tr sdk.Transport) caller {
	mws, err := otelbudgetmcp.ClientMiddleware(obs, nil)
	require.NoError(t, err)
	c := sdk.NewClient(impl, nil)
	c.AddSendingMiddleware(mws...)
	cs, err := c.Connect(context.Background(), otelbudgetmcp.Transport(tr), nil)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	return func(ctx context.Context) error {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo"})
		return err
	}
}

// mcpgoCaller is an mcp-go client with otelbudgetmcpgo's transport.
func mcpgoCaller(t *testing.T, obs *otelbudget.Observer, inner mgtransport.Interface, opts ...mgclient.ClientOption) caller {
	tr, err := otelbudgetmcpgo.ClientTransport(obs, inner, nil)
	require.NoError(t, err)
	mc := mgclient.NewClient(tr, opts...)
	require.NoError(t, mc.Start(context.Background()))
	t.Cleanup(func() { mc.Close() })
	_, err = mc.Initialize(context.Background(), mgmcp.InitializeRequest{Params: mgmcp.InitializeParams{ClientInfo: mgmcp.Implementation{Name: "test", Version: "v1"}}})
	require.NoError(t, err)
	return func(ctx context.Context) error {
		_, err := mc.CallTool(ctx, mgmcp.CallToolRequest{Params: mgmcp.CallToolParams{Name: "echo"}})
		return err
	}
}

func goSDKServer(t *testing.T, obs *otelbudget.Observer) (*sdk.Server, *deadlinemcp.Server) {
	mws, err := otelbudgetmcp.ServerMiddleware(obs, nil)
	require.NoError(t, err)
	s := sdk.NewServer(impl, nil)
	s.AddReceivingMiddleware(mws...)
	sdkEcho(s)
	f, err := deadlinemcp.NewServer()
	require.NoError(t, err)
	return s, f
}

func mcpgoServer(t *testing.T, obs *otelbudget.Observer) (*mgserver.MCPServer, *deadlinemcpgo.Server) {
	b, opts, err := otelbudgetmcpgo.ServerOptions(obs, nil)
	require.NoError(t, err)
	s := mgserver.NewMCPServer("test", "v1", append(opts, mgserver.WithToolCapabilities(true))...)
	s.AddTools(mcpgoEcho())
	return s, b
}

func pipes(t *testing.T) (sr, cr *io.PipeReader, cw, sw *io.PipeWriter) {
	sr, cw = io.Pipe()
	cr, sw = io.Pipe()
	t.Cleanup(func() { sr.Close(); cw.Close(); cr.Close(); sw.Close() })
	return sr, cr, cw, sw
}

// setups connect a client of one SDK to a server of the other (or the
// same), both observed by obs.
var setups = map[string]func(t *testing.T, obs *otelbudget.Observer) caller{
	"go-sdk to mcp-go, streamable HTTP": func(t *testing.T, obs *otelbudget.Observer) caller {
		s, b := mcpgoServer(t, obs)
		ts := httptest.NewServer(b.HTTPHandler(mgserver.NewStreamableHTTPServer(s)))
		t.Cleanup(ts.Close)
		return goSDKCaller(t, obs, &sdk.StreamableClientTransport{Endpoint: ts.URL, DisableStandaloneSSE: true, MaxRetries: -1})
	},
	"go-sdk to mcp-go, stdio": func(t *testing.T, obs *otelbudget.Observer) caller {
		s, _ := mcpgoServer(t, obs)
		sr, cr, cw, sw := pipes(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = mgserver.NewStdioServer(s).Listen(ctx, sr, sw) }()
		t.Cleanup(func() { cancel(); sr.Close(); <-done })
		return goSDKCaller(t, obs, &sdk.IOTransport{Reader: cr, Writer: cw})
	},
	"mcp-go to go-sdk, streamable HTTP": func(t *testing.T, obs *otelbudget.Observer) caller {
		s, f := goSDKServer(t, obs)
		ts := httptest.NewServer(f.HTTPHandler(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)))
		t.Cleanup(ts.Close)
		tr, err := mgtransport.NewStreamableHTTP(ts.URL)
		require.NoError(t, err)
		//lint:ignore SA1019 mcp-go v1.6.0 does not fall back from server/discover to initialize with a stateful go-sdk server (docs/mcp.md)
		return mcpgoCaller(t, obs, tr, mgclient.WithLegacyProtocolOnly())
	},
	"mcp-go to go-sdk, stdio": func(t *testing.T, obs *otelbudget.Observer) caller {
		s, _ := goSDKServer(t, obs)
		sr, cr, cw, sw := pipes(t)
		ss, err := s.Connect(context.Background(), &sdk.IOTransport{Reader: sr, Writer: sw}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { ss.Close() })
		return mcpgoCaller(t, obs, mgtransport.NewIO(cr, cw, nil))
	},
	"go-sdk to go-sdk, stdio": func(t *testing.T, obs *otelbudget.Observer) caller {
		s, _ := goSDKServer(t, obs)
		sr, cr, cw, sw := pipes(t)
		ss, err := s.Connect(context.Background(), &sdk.IOTransport{Reader: sr, Writer: sw}, nil)
		require.NoError(t, err)
		t.Cleanup(func() { ss.Close() })
		return goSDKCaller(t, obs, &sdk.IOTransport{Reader: cr, Writer: cw})
	},
	"mcp-go to mcp-go, stdio": func(t *testing.T, obs *otelbudget.Observer) caller {
		s, _ := mcpgoServer(t, obs)
		sr, cr, cw, sw := pipes(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = mgserver.NewStdioServer(s).Listen(ctx, sr, sw) }()
		t.Cleanup(func() { cancel(); sr.Close(); <-done })
		return mcpgoCaller(t, obs, mgtransport.NewIO(cr, cw, nil))
	},
}

// shape is what a trace of one call looks like, without its values that
// differ by run: each span's name, kind and attribute keys.
type shape struct {
	Name string
	Kind trace.SpanKind
	Keys []string
}

// One call gives one trace: the call span, one CLIENT span, one SERVER
// span, with the same names and attribute keys whichever SDK is on
// either side of the same transport.
func TestSpansInterop(t *testing.T) {
	shapes := map[string][]shape{}
	for name, setup := range setups {
		t.Run(name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			call := setup(t, otelbudget.New(otelbudget.WithTracerProvider(tp)))
			ctx := deadline.NewContext(context.Background(), deadline.New(time.Minute))
			require.NoError(t, call(ctx))

			var spans []sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				if s.Name() == "MCP tools/call echo" || s.Name() == "tools/call echo" {
					spans = append(spans, s)
				}
			}
			require.Len(t, spans, 3, "the call span, its CLIENT span, the SERVER span")
			var got []shape
			for _, s := range spans {
				assert.Equal(t, spans[0].SpanContext().TraceID(), s.SpanContext().TraceID(), "one trace")
				keys := []string{}
				for _, kv := range s.Attributes() {
					if kv.Key != "mcp.session.id" { // only where the transport has sessions
						keys = append(keys, string(kv.Key))
					}
				}
				sort.Strings(keys)
				got = append(got, shape{s.Name(), s.SpanKind(), keys})
			}
			sort.Slice(got, func(i, j int) bool { return got[i].Kind < got[j].Kind })
			shapes[name] = got
			kinds := map[trace.SpanKind]shape{}
			for _, g := range got {
				kinds[g.Kind] = g
			}
			require.Len(t, kinds, 3, "INTERNAL, SERVER, CLIENT")
			assert.Equal(t, "MCP tools/call echo", kinds[trace.SpanKindInternal].Name)
			assert.Contains(t, kinds[trace.SpanKindServer].Keys, "deadline.server.budget_ms")
			client := kinds[trace.SpanKindClient]
			for _, k := range []string{"mcp.method.name", "gen_ai.tool.name", "gen_ai.operation.name", "jsonrpc.request.id", "network.transport", "deadline.attempt.granted_ms"} {
				assert.Contains(t, client.Keys, k)
			}
		})
	}
	// The same shapes whichever SDK is on either side.
	assert.Equal(t, shapes["go-sdk to go-sdk, stdio"], shapes["mcp-go to go-sdk, stdio"])
	assert.Equal(t, shapes["go-sdk to go-sdk, stdio"], shapes["go-sdk to mcp-go, stdio"])
	assert.Equal(t, shapes["go-sdk to go-sdk, stdio"], shapes["mcp-go to mcp-go, stdio"])
	assert.Equal(t, shapes["go-sdk to mcp-go, streamable HTTP"], shapes["mcp-go to go-sdk, streamable HTTP"])
}

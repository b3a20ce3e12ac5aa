package test

import (
	"context"
	"testing"
	"time"

	mgclient "github.com/mark3labs/mcp-go/client"
	mgtransport "github.com/mark3labs/mcp-go/client/transport"
	mgmcp "github.com/mark3labs/mcp-go/mcp"
	mgserver "github.com/mark3labs/mcp-go/server"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
	"github.com/deadlinebudget/budget/deadline/deadlinemcpgo"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetmcp"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetmcpgo"
)

// An agent's tool call through each SDK on its in-process transport
// (mcp-go's in-process client, the go-sdk's in-memory transports): bare;
// with the budget on the client only ("client": what the agent's call
// adds); on both sides ("budget"), no observer; and with the spans (a real
// tracer provider that records and exports nothing). docs/mcp.md quotes
// the figures.
func BenchmarkToolCall(b *testing.B) {
	tp := sdktrace.NewTracerProvider()
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp))

	for _, mode := range []string{"bare", "client", "budget", "spans"} {
		b.Run("mcp-go/"+mode, func(b *testing.B) {
			var sopts []mgserver.ServerOption
			var tr mgtransport.Interface
			switch mode {
			case "budget":
				s, err := deadlinemcpgo.NewServer()
				require.NoError(b, err)
				sopts = s.Options()
			case "spans":
				_, opts, err := otelbudgetmcpgo.ServerOptions(obs, nil)
				require.NoError(b, err)
				sopts = opts
			}
			s := mgserver.NewMCPServer("bench", "v1", append(sopts, mgserver.WithToolCapabilities(true))...)
			s.AddTools(mcpgoEcho())
			tr = mgtransport.NewInProcessTransport(s)
			switch mode {
			case "client", "budget":
				c, err := deadlinemcpgo.NewClient()
				require.NoError(b, err)
				tr = c.Transport(tr)
			case "spans":
				var err error
				tr, err = otelbudgetmcpgo.ClientTransport(obs, tr, nil)
				require.NoError(b, err)
			}
			mc := mgclient.NewClient(tr)
			ctx := context.Background()
			require.NoError(b, mc.Start(ctx))
			defer mc.Close()
			_, err := mc.Initialize(ctx, mgmcp.InitializeRequest{Params: mgmcp.InitializeParams{ClientInfo: mgmcp.Implementation{Name: "bench", Version: "v1"}}})
			require.NoError(b, err)
			req := mgmcp.CallToolRequest{Params: mgmcp.CallToolParams{Name: "echo"}}
			b.ReportAllocs()
			for b.Loop() {
				ctx := deadline.NewContext(ctx, deadline.New(time.Minute))
				if _, err := mc.CallTool(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("go-sdk/"+mode, func(b *testing.B) {
			s := sdk.NewServer(impl, nil)
			c := sdk.NewClient(impl, nil)
			switch mode {
			case "budget":
				srv, err := deadlinemcp.NewServer()
				require.NoError(b, err)
				s.AddReceivingMiddleware(srv.Middleware())
				fallthrough
			case "client":
				cl, err := deadlinemcp.NewClient()
				require.NoError(b, err)
				c.AddSendingMiddleware(cl.Middleware())
			case "spans":
				smw, err := otelbudgetmcp.ServerMiddleware(obs, nil)
				require.NoError(b, err)
				s.AddReceivingMiddleware(smw...)
				cmw, err := otelbudgetmcp.ClientMiddleware(obs, nil)
				require.NoError(b, err)
				c.AddSendingMiddleware(cmw...)
			}
			sdkEcho(s)
			st, ct := sdk.NewInMemoryTransports()
			ctx := context.Background()
			ss, err := s.Connect(ctx, st, nil)
			require.NoError(b, err)
			cs, err := c.Connect(ctx, ct, nil)
			require.NoError(b, err)
			defer func() { cs.Close(); ss.Wait() }()
			b.ReportAllocs()
			for b.Loop() {
				ctx := deadline.NewContext(ctx, deadline.New(time.Minute))
				if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

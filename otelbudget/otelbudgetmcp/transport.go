package otelbudgetmcp

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/otelbudget/genai"
)

// clientSpanKey carries, in the context a request is sent with, the CLIENT
// span [ClientMiddleware] started for it.
type clientSpanKey struct{}

type clientSpan struct {
	span    trace.Span
	network bool // network.transport set by WithNetworkTransport
}

// Transport wraps an MCP client's transport so that each CLIENT span of
// [ClientMiddleware] gets the two attributes the go-sdk's middleware cannot
// see: jsonrpc.request.id, the id the connection gives the request when it
// writes it, and network.transport, from the transport's type: "pipe" for
// the command and stdio transports (mcp.CommandTransport,
// mcp.StdioTransport, mcp.IOTransport), "tcp" for the HTTP ones
// (mcp.StreamableClientTransport, mcp.SSEClientTransport), none for others
// (mcp.InMemoryTransport); [WithNetworkTransport], when given, wins. Messages
// pass unchanged. Connect it instead of t: client.Connect(ctx,
// otelbudgetmcp.Transport(t), nil). A nil t is returned as is.
func Transport(t mcp.Transport) mcp.Transport {
	if t == nil {
		return nil
	}
	return &spanTransport{Transport: t, network: networkOf(t)}
}

func networkOf(t mcp.Transport) string {
	switch t.(type) {
	case *mcp.CommandTransport, *mcp.StdioTransport, *mcp.IOTransport:
		return genai.NetworkTransportPipe
	case *mcp.StreamableClientTransport, *mcp.SSEClientTransport:
		return genai.NetworkTransportTCP
	}
	return ""
}

type spanTransport struct {
	mcp.Transport
	network string
}

func (t *spanTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &spanConn{Connection: c, network: t.network}, nil
}

type spanConn struct {
	mcp.Connection
	network string
}

// Write sets the request's id (and the transport) on the CLIENT span of the
// request being written, then writes it.
func (c *spanConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.ID.IsValid() {
		if cs, ok := ctx.Value(clientSpanKey{}).(clientSpan); ok {
			cs.span.SetAttributes(genai.JSONRPCRequestIDKey.String(fmt.Sprint(req.ID.Raw())))
			if c.network != "" && !cs.network {
				cs.span.SetAttributes(genai.NetworkTransportKey.String(c.network))
			}
		}
	}
	return c.Connection.Write(ctx, msg)
}

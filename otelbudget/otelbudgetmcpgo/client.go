package otelbudgetmcpgo

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/mark3labs/mcp-go/client/transport"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline/deadlinemcpgo"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/genai"
	"github.com/deadlinebudget/budget/otelbudget/mcpspan"
)

// Option configures the spans of [ClientTransport] and [ServerOptions]:
// [mcpspan.Option] ([mcpspan.WithNetworkTransport],
// [mcpspan.WithPropagators]), which otelbudgetmcp takes too.
type Option = mcpspan.Option

// ClientTransport returns inner, an mcp-go client transport, under a
// [deadlinemcpgo.Client] built from opts and observed by
// obs.ClientHooks() (its hooks before those of opts), and with a CLIENT
// span per attempt, as otelbudgetmcp.ClientMiddleware gives the go-sdk:
//
//   - started by a tracer of obs.RPCClientTracerProvider() in the
//     attempt's context, so that it is the attempt's span, the call span's
//     child, carrying the deadline.attempt.* attributes;
//   - named "{mcp.method.name} {tool}" ("tools/call search") or the method
//     alone, with mcp.method.name, gen_ai.tool.name and
//     gen_ai.operation.name "execute_tool" for a tool call, mcp.session.id
//     when the transport has one, network.transport (from inner's type:
//     "pipe" for stdio, "tcp" for streamable HTTP and SSE, none in process;
//     or [mcpspan.WithNetworkTransport]'s) and jsonrpc.request.id;
//   - below an agent framework's execute_tool span when one is active
//     (genai.ToolCallFromContext), as otelbudgetmcp's;
//   - status Error with error.type when the attempt failed or the tool
//     answered isError;
//   - the trace context injected into the attempt's _meta with the
//     propagator of [mcpspan.WithPropagators] (default: the global one).
//
// Give the result to client.NewClient. A nil obs means otelbudget.New().
// It returns the [*deadline.PolicyError] of an invalid option.
func ClientTransport(obs *otelbudget.Observer, inner transport.Interface, opts []deadlinemcpgo.ClientOption, otelOpts ...Option) (transport.Interface, error) {
	if obs == nil {
		obs = otelbudget.New()
	}
	all := make([]deadlinemcpgo.ClientOption, 0, len(opts)+1)
	all = append(all, mcpbudget.WithHooks(obs.ClientHooks()))
	all = append(all, opts...)
	c, err := deadlinemcpgo.NewClient(all...)
	if err != nil {
		return nil, err
	}
	cfg := mcpspan.NewConfig(otelOpts)
	if cfg.Network == "" {
		cfg.Network = networkOf(inner)
	}
	tracer := obs.RPCClientTracerProvider().Tracer(ScopeName, trace.WithInstrumentationVersion(otelbudget.Version()))
	spans := func(next deadlinemcpgo.SendFunc) deadlinemcpgo.SendFunc {
		return func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
			r := mcpspan.Request{Method: req.Method, SessionID: inner.GetSessionId(), Network: cfg.Network}
			if req.Method == "tools/call" {
				r.Tool = deadlinemcpgo.ToolName(req.Params)
			}
			ctx, span := mcpspan.StartClient(ctx, tracer, r)
			defer span.End()
			mcpspan.SetRequestID(span, req.ID.Value())
			if m, ok := req.Params.(deadlinemcpgo.MetaSetter); ok {
				cfg.Propagator.Inject(ctx, setter{m})
			}
			resp, err := next(ctx, req)
			switch {
			case err != nil:
				mcpspan.RecordResult(span, err, false, rpcCode)
			case resp.Error != nil:
				mcpspan.RecordResult(span, deadlinemcpgo.AnswerError(resp.Error), false, rpcCode)
			case req.Method == "tools/call":
				mcpspan.RecordResult(span, nil, isError(resp.Result), rpcCode)
			}
			return resp, err
		}
	}
	return c.Transport(inner, deadlinemcpgo.WithAttemptMiddleware(spans)), nil
}

// networkOf is network.transport for an mcp-go client transport.
func networkOf(t transport.Interface) string {
	switch t.(type) {
	case *transport.Stdio:
		return genai.NetworkTransportPipe
	case *transport.StreamableHTTP, *transport.SSE:
		return genai.NetworkTransportTCP
	}
	return ""
}

// setter writes a propagator's keys into an attempt's _meta.
type setter struct{ m deadlinemcpgo.MetaSetter }

func (s setter) Get(string) string     { return "" }
func (s setter) Set(key, value string) { s.m.SetMeta(key, value) }
func (s setter) Keys() []string        { return nil }

// isError reports whether a tools/call result says isError.
func isError(result json.RawMessage) bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(result, &r) == nil && r.IsError
}

// rpcCode is the JSON-RPC code of an error a server answered.
func rpcCode(err error) (int64, bool) {
	re, ok := errors.AsType[*deadlinemcpgo.ResponseError](err)
	if !ok {
		return 0, false
	}
	return int64(re.Code), true
}

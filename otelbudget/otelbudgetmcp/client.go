package otelbudgetmcp

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/mcpspan"
)

// ErrorTypeToolError is error.type on a CLIENT span whose tool call
// answered a result with isError true, as MCP's semantic conventions say
// ([mcpspan.ErrorTypeToolError]).
const ErrorTypeToolError = mcpspan.ErrorTypeToolError

// ClientMiddleware returns the sending middleware to install, in this
// order, on an mcp.Client (client.AddSendingMiddleware(mws...)): a
// [deadlinemcp.Client] built from opts and observed by obs.ClientHooks(),
// then a middleware that records each attempt as one CLIENT span:
//
//   - started by a tracer of obs.RPCClientTracerProvider() in the attempt's
//     context, so that it is the attempt's span, the call span's child,
//     carrying the deadline.attempt.* attributes (no INTERNAL attempt span
//     beside it);
//   - named "{mcp.method.name} {tool}" ("tools/call search") or the
//     method alone, with mcp.method.name, gen_ai.tool.name and
//     gen_ai.operation.name "execute_tool" for a tool call, mcp.session.id
//     when the transport has one, network.transport ([WithNetworkTransport],
//     or found by [Transport]) and jsonrpc.request.id (set by [Transport]),
//     in the GenAI conventions package otelbudget/genai pins;
//   - below the execute_tool span of a GenAI instrumentation (an agent
//     framework's tool call: genai.ToolCallFromContext) when one is active:
//     the span is a descendant of it, carries its gen_ai.tool.call.id, and
//     the execute_tool span gets the MCP attributes (mcp.method.name,
//     mcp.session.id, network.transport), as the MCP conventions ask;
//   - status Error with error.type when the request failed, or when a tool
//     answered isError ([ErrorTypeToolError]); a caller's cancellation is
//     not an error;
//   - the trace context injected into the request's _meta (traceparent,
//     tracestate) with the propagator of [WithPropagators] (default: the
//     global one), so that [ServerMiddleware]'s SERVER span is its child.
//
// Notifications get no span. obs's hooks are placed before those of opts
// ([deadlinemcp.WithHooks]). A nil obs means otelbudget.New() (the global
// providers). It returns the [*deadline.PolicyError] of an invalid option,
// as [deadlinemcp.NewClient] does.
func ClientMiddleware(obs *otelbudget.Observer, opts []deadlinemcp.ClientOption, otelOpts ...Option) ([]mcp.Middleware, error) {
	if obs == nil {
		obs = otelbudget.New()
	}
	all := make([]deadlinemcp.ClientOption, 0, len(opts)+1)
	all = append(all, deadlinemcp.WithHooks(obs.ClientHooks()))
	all = append(all, opts...)
	c, err := deadlinemcp.NewClient(all...)
	if err != nil {
		return nil, err
	}
	tracer := obs.RPCClientTracerProvider().Tracer(ScopeName, trace.WithInstrumentationVersion(otelbudget.Version()))
	return []mcp.Middleware{c.Middleware(), attemptSpans(tracer, mcpspan.NewConfig(otelOpts))}, nil
}

// attemptSpans records each request it sends as a CLIENT span.
func attemptSpans(tracer trace.Tracer, cfg mcpspan.Config) mcp.Middleware {
	prop := cfg.Propagator
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if strings.HasPrefix(method, "notifications/") {
				return next(ctx, method, req)
			}
			p := params(req)
			ctx, span := mcpspan.StartClient(ctx, tracer, request(method, p, req.GetSession(), cfg.Network))
			defer span.End()
			ctx = context.WithValue(ctx, clientSpanKey{}, clientSpan{span, cfg.Network != ""})
			if p != nil {
				if m := p.GetMeta(); m != nil {
					prop.Inject(ctx, mcpspan.MetaCarrier(m))
				}
			}
			res, err := next(ctx, method, req)
			recordResult(span, res, err)
			return res, err
		}
	}
}

// request is what the span of a request needs to know of it.
func request(method string, p mcp.Params, session mcp.Session, network string) mcpspan.Request {
	r := mcpspan.Request{Method: method, Tool: target(p), Network: network}
	if session != nil {
		r.SessionID = session.ID()
	}
	return r
}

// recordResult marks span as failed when the request failed or a tool
// call answered isError ([mcpspan.RecordResult]).
func recordResult(span trace.Span, res mcp.Result, err error) {
	mcpspan.RecordResult(span, err, isToolError(res), rpcCode)
}

func isToolError(res mcp.Result) bool {
	r, ok := res.(*mcp.CallToolResult)
	return ok && r != nil && r.IsError
}

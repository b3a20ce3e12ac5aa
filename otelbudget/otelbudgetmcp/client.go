package otelbudgetmcp

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/genai"
)

// methodToolsCall is the MCP method of a tool call.
const methodToolsCall = "tools/call"

// mcpAttributes keeps the MCP-specific attributes of attrs (not the GenAI
// ones an execute_tool span already has).
func mcpAttributes(attrs []attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(attrs))
	for _, kv := range attrs {
		switch kv.Key {
		case mcpMethodNameKey, mcpSessionIDKey, genai.NetworkTransportKey:
			out = append(out, kv)
		}
	}
	return out
}

// ErrorTypeToolError is error.type on a CLIENT span whose tool call
// answered a result with isError true, as MCP's semantic conventions say.
const ErrorTypeToolError = "tool_error"

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
	return []mcp.Middleware{c.Middleware(), attemptSpans(tracer, newConfig(otelOpts))}, nil
}

// attemptSpans records each request it sends as a CLIENT span.
func attemptSpans(tracer trace.Tracer, cfg config) mcp.Middleware {
	prop := cfg.prop
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if strings.HasPrefix(method, "notifications/") {
				return next(ctx, method, req)
			}
			p := params(req)
			name, attrs := spanName(method, p, req.GetSession())
			if cfg.transport != "" {
				attrs = append(attrs, genai.NetworkTransportKey.String(cfg.transport))
			}
			if tc, ok := genai.ToolCallFromContext(ctx); ok && method == methodToolsCall {
				// A GenAI instrumentation traces this tool's execution:
				// its execute_tool span gets the MCP attributes, as the
				// conventions ask, and this span, below it, its call id.
				if tc.CallID != "" {
					attrs = append(attrs, genai.ToolCallIDKey.String(tc.CallID))
				}
				tc.Span.SetAttributes(mcpAttributes(attrs)...)
			}
			ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
			defer span.End()
			ctx = context.WithValue(ctx, clientSpanKey{}, clientSpan{span, cfg.transport != ""})
			if p != nil {
				if m := p.GetMeta(); m != nil {
					prop.Inject(ctx, metaCarrier(m))
				}
			}
			res, err := next(ctx, method, req)
			recordResult(span, res, err)
			return res, err
		}
	}
}

// spanName is a request span's name and attributes.
func spanName(method string, p mcp.Params, session mcp.Session) (string, []attribute.KeyValue) {
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, mcpMethodNameKey.String(method))
	tool := target(p)
	name := genai.SpanName(method, tool)
	if tool != "" {
		attrs = append(attrs, genAIToolNameKey.String(tool))
	}
	if method == methodToolsCall {
		attrs = append(attrs, genai.OperationNameKey.String(genai.OperationExecuteTool))
	}
	if session != nil {
		if id := session.ID(); id != "" {
			attrs = append(attrs, mcpSessionIDKey.String(id))
		}
	}
	return name, attrs
}

// recordResult marks span as failed when the request failed (error.type
// from errorType, the error as the status description) or when a tool
// call answered isError (error.type [ErrorTypeToolError]); a success
// leaves it unset. The client's and the server's spans both use it.
func recordResult(span trace.Span, res mcp.Result, err error) {
	switch {
	case err != nil:
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
		span.SetStatus(codes.Error, err.Error())
	case isToolError(res):
		span.SetAttributes(semconv.ErrorTypeKey.String(ErrorTypeToolError))
		span.SetStatus(codes.Error, "the tool answered isError")
	}
}

func isToolError(res mcp.Result) bool {
	r, ok := res.(*mcp.CallToolResult)
	return ok && r != nil && r.IsError
}

// errorType is error.type for a failed request: the error's own
// ErrorType when it has one, the JSON-RPC code of a JSON-RPC error, else
// semconv's "_OTHER".
func errorType(err error) string {
	var typed interface{ ErrorType() string }
	if ok := asType(err, &typed); ok {
		return typed.ErrorType()
	}
	if code, ok := rpcCode(err); ok {
		return code
	}
	return semconv.ErrorTypeOther.Value.AsString()
}

package mcpspan

import (
	"context"
	"errors"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/otelbudget/genai"
)

// methodToolsCall is the MCP method of a tool call.
const methodToolsCall = "tools/call"

// ErrorTypeToolError is error.type on a span whose tool call answered a
// result with isError true, as MCP's semantic conventions say.
const ErrorTypeToolError = "tool_error"

// Request is what an SDK adapter knows of one request when its span
// starts.
type Request struct {
	Method    string // the MCP method, "tools/call"
	Tool      string // the tool a tools/call names, else ""
	SessionID string // the MCP session's ID, "" for none
	Network   string // network.transport ("tcp", "pipe"), "" when unknown
}

// Attributes returns a request span's name ("{mcp.method.name} {tool}",
// genai.SpanName) and attributes: mcp.method.name, gen_ai.tool.name and
// gen_ai.operation.name "execute_tool" for a tool call, mcp.session.id and
// network.transport when known; the keys of the conventions package
// otelbudget/genai pins.
func Attributes(r Request) (string, []attribute.KeyValue) {
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs, genai.MCPMethodNameKey.String(r.Method))
	if r.Tool != "" {
		attrs = append(attrs, genai.ToolNameKey.String(r.Tool))
	}
	if r.Method == methodToolsCall {
		attrs = append(attrs, genai.OperationNameKey.String(genai.OperationExecuteTool))
	}
	if r.SessionID != "" {
		attrs = append(attrs, genai.MCPSessionIDKey.String(r.SessionID))
	}
	if r.Network != "" {
		attrs = append(attrs, genai.NetworkTransportKey.String(r.Network))
	}
	return genai.SpanName(r.Method, r.Tool), attrs
}

// StartClient starts the CLIENT span of one attempt of r with tracer (the
// observer's RPCClientTracerProvider's, so that it is the attempt's span)
// in ctx, the attempt's context. Inside an agent framework's tool call (an
// execute_tool span in ctx: genai.ToolCallFromContext) a tools/call's span
// carries the call's gen_ai.tool.call.id, and the execute_tool span gets
// the MCP attributes (mcp.method.name, mcp.session.id,
// network.transport), as the MCP conventions ask of an instrumentation
// that finds the tool execution already traced.
func StartClient(ctx context.Context, tracer trace.Tracer, r Request) (context.Context, trace.Span) {
	name, attrs := Attributes(r)
	if tc, ok := genai.ToolCallFromContext(ctx); ok && r.Method == methodToolsCall {
		if tc.CallID != "" {
			attrs = append(attrs, genai.ToolCallIDKey.String(tc.CallID))
		}
		tc.Span.SetAttributes(mcpAttributes(attrs)...)
	}
	return tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// StartServer starts the SERVER span of r with tracer in ctx (the context
// the trace context of the request's _meta gives: [MetaCarrier]).
func StartServer(ctx context.Context, tracer trace.Tracer, r Request) (context.Context, trace.Span) {
	name, attrs := Attributes(r)
	return tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// mcpAttributes keeps the MCP-specific attributes of attrs (not the GenAI
// ones an execute_tool span already has).
func mcpAttributes(attrs []attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(attrs))
	for _, kv := range attrs {
		switch kv.Key {
		case genai.MCPMethodNameKey, genai.MCPSessionIDKey, genai.NetworkTransportKey:
			out = append(out, kv)
		}
	}
	return out
}

// SetRequestID sets jsonrpc.request.id on span: the id the connection gave
// the request when it wrote it.
func SetRequestID(span trace.Span, id any) {
	var s string
	switch v := id.(type) {
	case string:
		s = v
	case int64:
		s = strconv.FormatInt(v, 10)
	case float64:
		s = strconv.FormatFloat(v, 'f', -1, 64)
	default:
		s = fmtAny(v)
	}
	span.SetAttributes(genai.JSONRPCRequestIDKey.String(s))
}

// RecordResult marks span as failed when the request failed (error.type
// from [ErrorType], the error as the status description) or when a tool
// call answered isError (error.type [ErrorTypeToolError]); a success
// leaves it unset. code finds the JSON-RPC code in err's chain, the SDK's
// error type being the adapter's to know. Client and server spans both
// use it.
func RecordResult(span trace.Span, err error, toolError bool, code func(error) (int64, bool)) {
	switch {
	case err != nil:
		span.SetAttributes(semconv.ErrorTypeKey.String(ErrorType(err, code)))
		span.SetStatus(codes.Error, err.Error())
	case toolError:
		span.SetAttributes(semconv.ErrorTypeKey.String(ErrorTypeToolError))
		span.SetStatus(codes.Error, "the tool answered isError")
	}
}

// ErrorType is error.type for a failed request: the error's own
// ErrorType when it has one (a refusal is "deadline_refused", or
// "queue_full" when the server's admission queue was full), the
// JSON-RPC code code finds (as a string, "-32603"), else semconv's
// "_OTHER".
func ErrorType(err error, code func(error) (int64, bool)) string {
	var typed interface{ ErrorType() string }
	if errors.As(err, &typed) {
		return typed.ErrorType()
	}
	if code != nil {
		if c, ok := code(err); ok {
			return strconv.FormatInt(c, 10)
		}
	}
	return semconv.ErrorTypeOther.Value.AsString()
}

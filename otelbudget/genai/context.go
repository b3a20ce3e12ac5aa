package genai

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// ToolCall is the execute_tool span an integration has started for one tool
// call, carried by the context of the call so that instrumentation below it
// (an MCP client, say) can tell that a GenAI instrumentation already traces
// the tool's execution, as the MCP conventions ask it to find out.
type ToolCall struct {
	Span   trace.Span // the execute_tool span
	Name   string     // gen_ai.tool.name
	CallID string     // gen_ai.tool.call.id; may be empty
}

type toolCallKey struct{}

// ContextWithToolCall returns a copy of ctx that carries tc. A tc whose Span
// is nil is not stored: ctx is returned unchanged.
func ContextWithToolCall(ctx context.Context, tc ToolCall) context.Context {
	if tc.Span == nil {
		return ctx
	}
	return context.WithValue(ctx, toolCallKey{}, tc)
}

// ToolCallFromContext returns the tool call ctx carries, if any, and only
// while its span is recording (a span that has ended, or a no-op one, is
// nothing to add attributes to).
func ToolCallFromContext(ctx context.Context) (ToolCall, bool) {
	tc, ok := ctx.Value(toolCallKey{}).(ToolCall)
	if !ok || !tc.Span.IsRecording() {
		return ToolCall{}, false
	}
	return tc, true
}

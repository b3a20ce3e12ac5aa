package genai

import "go.opentelemetry.io/otel/attribute"

// SpanName returns the span name the conventions give a GenAI or MCP
// operation: "{operation} {target}", or the operation alone when target is
// empty. The target is the model for chat ("chat gpt-4o"), the agent's name
// for invoke_agent ("invoke_agent planner"), the tool's name for
// execute_tool ("execute_tool search"), and for MCP the tool or prompt name
// after the method ("tools/call search"). It does not check that operation
// is a known value: frameworks may document names of their own.
func SpanName(operation, target string) string {
	if target == "" {
		return operation
	}
	return operation + " " + target
}

// ChatSpanName is SpanName(OperationChat, model): "chat gpt-4o".
func ChatSpanName(model string) string { return SpanName(OperationChat, model) }

// InvokeAgentSpanName is SpanName(OperationInvokeAgent, agent):
// "invoke_agent planner", or "invoke_agent" when the agent has no name.
func InvokeAgentSpanName(agent string) string { return SpanName(OperationInvokeAgent, agent) }

// ExecuteToolSpanName is SpanName(OperationExecuteTool, tool):
// "execute_tool search".
func ExecuteToolSpanName(tool string) string { return SpanName(OperationExecuteTool, tool) }

// ChatAttributes returns the attributes a chat span carries from its start:
// the operation, the provider and the requested model. An empty provider or
// model is left out (the conventions require the provider; an integration
// that does not know it should say so in its docs).
func ChatAttributes(provider, model string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{OperationNameKey.String(OperationChat)}
	if provider != "" {
		attrs = append(attrs, ProviderNameKey.String(provider))
	}
	if model != "" {
		attrs = append(attrs, RequestModelKey.String(model))
	}
	return attrs
}

// InvokeAgentAttributes returns the attributes an invoke_agent span carries
// from its start: the operation, and the provider and agent name when not
// empty.
func InvokeAgentAttributes(provider, agent string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{OperationNameKey.String(OperationInvokeAgent)}
	if provider != "" {
		attrs = append(attrs, ProviderNameKey.String(provider))
	}
	if agent != "" {
		attrs = append(attrs, AgentNameKey.String(agent))
	}
	return attrs
}

// ExecuteToolAttributes returns the attributes an execute_tool span carries
// from its start: the operation, the tool's name, and the call id and tool
// type when not empty.
func ExecuteToolAttributes(tool, callID, toolType string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		OperationNameKey.String(OperationExecuteTool),
		ToolNameKey.String(tool),
	}
	if callID != "" {
		attrs = append(attrs, ToolCallIDKey.String(callID))
	}
	if toolType != "" {
		attrs = append(attrs, ToolTypeKey.String(toolType))
	}
	return attrs
}

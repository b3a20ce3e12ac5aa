package genai

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// ConventionsVersion is the commit of
// github.com/open-telemetry/semantic-conventions-genai whose
// model/gen-ai/registry.yaml and model/gen-ai/spans.yaml this package follows
// (the MCP model files are those of the same tree; testdata/registry-keys.txt
// names the commit each was last changed in). The repository has no release
// tags, so the pin is a commit.
const ConventionsVersion = "002c8a6ea1c8a42b14a4527db83b3cabcded610a"

// GenAI attribute keys (model/gen-ai/registry.yaml). Each names the same
// attribute the conventions define, with the meaning they give it.
const (
	// OperationNameKey is the operation a span describes: one of the
	// Operation* values. Required on every GenAI span.
	OperationNameKey = attribute.Key("gen_ai.operation.name")
	// ProviderNameKey is the GenAI provider as the client identifies it
	// (e.g. [ProviderOpenAI]); required on inference and agent spans.
	ProviderNameKey = attribute.Key("gen_ai.provider.name")
	// RequestModelKey is the model a request asks for ("gpt-4o").
	RequestModelKey = attribute.Key("gen_ai.request.model")
	// ResponseModelKey is the model that produced the response, when the
	// provider says.
	ResponseModelKey = attribute.Key("gen_ai.response.model")
	// ResponseIDKey is the provider's identifier of the completion.
	ResponseIDKey = attribute.Key("gen_ai.response.id")
	// ResponseFinishReasonsKey is the finish reason of each choice
	// (string slice).
	ResponseFinishReasonsKey = attribute.Key("gen_ai.response.finish_reasons")
	// UsageInputTokensKey counts the input (prompt) tokens, cached ones
	// included.
	UsageInputTokensKey = attribute.Key("gen_ai.usage.input_tokens")
	// UsageOutputTokensKey counts the output (completion) tokens.
	UsageOutputTokensKey = attribute.Key("gen_ai.usage.output_tokens")
	// AgentNameKey is the agent's human-readable name, given by the
	// application.
	AgentNameKey = attribute.Key("gen_ai.agent.name")
	// AgentIDKey is the agent's unique identifier.
	AgentIDKey = attribute.Key("gen_ai.agent.id")
	// AgentDescriptionKey is the agent's free-form description.
	AgentDescriptionKey = attribute.Key("gen_ai.agent.description")
	// ToolNameKey is the name of the tool an execute_tool span runs (and of
	// the tool an MCP tools/call names).
	ToolNameKey = attribute.Key("gen_ai.tool.name")
	// ToolCallIDKey is the tool call's identifier, as the model gave it.
	ToolCallIDKey = attribute.Key("gen_ai.tool.call.id")
	// ToolTypeKey is the tool's type: [ToolTypeFunction],
	// [ToolTypeExtension] or [ToolTypeDatastore].
	ToolTypeKey = attribute.Key("gen_ai.tool.type")
	// ToolDescriptionKey is the tool's description.
	ToolDescriptionKey = attribute.Key("gen_ai.tool.description")
	// ConversationIDKey identifies the conversation (session, thread) a
	// call belongs to.
	ConversationIDKey = attribute.Key("gen_ai.conversation.id")
)

// General-convention keys the GenAI and MCP spans reference, from
// go.opentelemetry.io/otel/semconv/v1.43.0, re-exported so that an
// integration takes every key of its spans from one place.
const (
	// ErrorTypeKey is the low-cardinality class of error that ended the
	// operation; set if and only if it failed.
	ErrorTypeKey = semconv.ErrorTypeKey
	// ServerAddressKey is the GenAI or MCP server's host name or address.
	ServerAddressKey = semconv.ServerAddressKey
	// ServerPortKey is the GenAI or MCP server's port; set with
	// ServerAddressKey.
	ServerPortKey = semconv.ServerPortKey
	// JSONRPCRequestIDKey is the JSON-RPC request's id (MCP requests; not
	// set on notifications).
	JSONRPCRequestIDKey = semconv.JSONRPCRequestIDKey
	// NetworkTransportKey is the transport under MCP: "tcp" (or "quic")
	// for HTTP, "pipe" for stdio.
	NetworkTransportKey = semconv.NetworkTransportKey
	// RPCResponseStatusCodeKey is the JSON-RPC error code of an MCP error
	// response, as a string.
	RPCResponseStatusCodeKey = semconv.RPCResponseStatusCodeKey
)

// MCP attribute keys (model/mcp/registry.yaml).
const (
	// MCPMethodNameKey is the JSON-RPC method of an MCP request or
	// notification ("tools/call"). Required on MCP spans.
	MCPMethodNameKey = attribute.Key("mcp.method.name")
	// MCPSessionIDKey is the MCP session's id, when the transport assigns
	// one (pre-2026-07-28 protocol revisions only).
	MCPSessionIDKey = attribute.Key("mcp.session.id")
	// MCPProtocolVersionKey is the MCP protocol revision in use.
	MCPProtocolVersionKey = attribute.Key("mcp.protocol.version")
)

// Values of [OperationNameKey] (members of gen_ai.operation.name).
const (
	// OperationChat is a chat completion: one model call.
	OperationChat = "chat"
	// OperationGenerateContent is a multimodal generation (Gemini's
	// generateContent), one model call.
	OperationGenerateContent = "generate_content"
	// OperationInvokeAgent is one run of an agent.
	OperationInvokeAgent = "invoke_agent"
	// OperationExecuteTool is one tool call.
	OperationExecuteTool = "execute_tool"
)

// Values of [ToolTypeKey] the conventions give as examples.
const (
	// ToolTypeFunction is a tool run by the client on the model's
	// arguments: what a framework's function tools are.
	ToolTypeFunction = "function"
	// ToolTypeExtension is a tool executed on the agent side that calls an
	// external API.
	ToolTypeExtension = "extension"
	// ToolTypeDatastore is a tool that queries a data store.
	ToolTypeDatastore = "datastore"
)

// Values of [ProviderNameKey] (members of gen_ai.provider.name) this project
// sets.
const (
	// ProviderOpenAI is OpenAI, and what an OpenAI-compatible client sets
	// when it knows no better.
	ProviderOpenAI = "openai"
	// ProviderGCPGenAI is any Google generative AI endpoint.
	ProviderGCPGenAI = "gcp.gen_ai"
	// ProviderAnthropic is Anthropic.
	ProviderAnthropic = "anthropic"
)

// Values of [NetworkTransportKey] an MCP span sets.
const (
	// NetworkTransportTCP is MCP over HTTP (streamable HTTP or SSE).
	NetworkTransportTCP = "tcp"
	// NetworkTransportPipe is MCP over stdio.
	NetworkTransportPipe = "pipe"
)

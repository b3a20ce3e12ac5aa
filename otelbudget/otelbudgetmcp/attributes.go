package otelbudgetmcp

import "github.com/deadlinebudget/budget/otelbudget/genai"

// The keys of MCP's semantic conventions this package sets, from package
// otelbudget/genai: the GenAI and MCP conventions at the commit of
// open-telemetry/semantic-conventions-genai that package pins
// (genai.ConventionsVersion), and the general keys (error.type,
// jsonrpc.request.id, network.transport) of semconv v1.43.0, the root's.
const (
	// mcpMethodNameKey is the request's JSON-RPC method ("tools/call").
	mcpMethodNameKey = genai.MCPMethodNameKey
	// genAIToolNameKey is the tool a tools/call request names.
	genAIToolNameKey = genai.ToolNameKey
	// mcpSessionIDKey is the MCP session's ID, when the transport has one.
	mcpSessionIDKey = genai.MCPSessionIDKey
)

package otelbudgetmcp

import "go.opentelemetry.io/otel/attribute"

// The keys of MCP's semantic conventions this package sets. They are
// declared here, not imported, because the Go semconv packages from v1.42.0
// on no longer generate the MCP and GenAI attributes (v1.41.0 was the last
// that did), and this module uses one semconv version, the root's (v1.43.0),
// for the attributes those packages still have (error.type). The names and
// meanings are those of semantic conventions v1.41.0, unchanged.
const (
	// mcpMethodNameKey is the request's JSON-RPC method ("tools/call").
	mcpMethodNameKey = attribute.Key("mcp.method.name")
	// genAIToolNameKey is the tool a tools/call request names.
	genAIToolNameKey = attribute.Key("gen_ai.tool.name")
	// mcpSessionIDKey is the MCP session's ID, when the transport has one.
	mcpSessionIDKey = attribute.Key("mcp.session.id")
)

// Package mcpspan builds the spans of MCP requests the same way whichever
// Go SDK sends or serves them: the span's name and the GenAI and MCP
// conventions' attributes ([Start]), its status and error.type
// ([RecordResult]), a server's admission as the deadline.server.*
// attributes ([Admission], [EndedBy]), an agent framework's execute_tool
// span joined ([Start]), and the trace context in a request's _meta
// ([MetaCarrier]). It imports the OpenTelemetry API only; the SDK adapters
// (otelbudgetmcp for the official go-sdk, otelbudgetmcpgo for mcp-go) find
// what their SDK knows of a request and hand it here, so that both SDKs'
// spans have the same names and attributes. docs/mcp.md shows the span
// tree.
package mcpspan

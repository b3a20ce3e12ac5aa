// Package otelbudgetmcpgo composes package deadline/deadlinemcpgo (the
// budget for mcp-go clients and servers) with otelbudget's spans, the same
// spans package otelbudgetmcp gives the official go-sdk, built by package
// otelbudget/mcpspan for both: on the client, otelbudget's call span per
// request and one CLIENT span per attempt, "tools/call search", with the
// GenAI and MCP conventions' attributes and the deadline.attempt.* ones;
// on the server, one SERVER span per tools/call, prompts/get and
// resources/read with the deadline.server.* attributes; the trace context
// in _meta between them, so that an agent on one SDK and a tool server on
// the other give one trace.
//
//	t, err := otelbudgetmcpgo.ClientTransport(obs, inner, []deadlinemcpgo.ClientOption{mcpbudget.WithPolicy(p)})
//	mc := client.NewClient(t)
//
//	s, opts, err := otelbudgetmcpgo.ServerOptions(obs, []deadlinemcpgo.ServerOption{deadlinemcpgo.WithFloor(20 * time.Millisecond)})
//	srv := server.NewMCPServer("search", "v1", opts...)
//	http.Handle("/mcp", s.HTTPHandler(server.NewStreamableHTTPServer(srv)))
//
// It imports the OpenTelemetry API only. The package is its own module, so
// that programs that do not use mcp-go never download it. docs/mcp.md says
// what differs from the go-sdk's spans.
package otelbudgetmcpgo

// ScopeName is the instrumentation scope of the CLIENT and SERVER spans
// this package starts (the call spans are otelbudget's).
const ScopeName = "github.com/deadlinebudget/budget/otelbudget/otelbudgetmcpgo"

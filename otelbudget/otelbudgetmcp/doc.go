// Package otelbudgetmcp composes the deadline budget's MCP middleware
// (package deadlinemcp) with the otelbudget observer, so that a trace of a
// tool call made under a budget has, as HTTP and gRPC calls do:
//
//   - one call span per logical call, kind INTERNAL, named by the step
//     (an unnamed step is "MCP tools/call search": "MCP ", the method and
//     the tool, see [deadlinemcp.WithPolicy]), with the budget, the stop
//     reason and the verdict;
//   - one CLIENT span per attempt (one JSON-RPC request), a child of the
//     call span, named "tools/call search" by MCP's semantic conventions
//     (mcp.method.name, gen_ai.tool.name, mcp.session.id), carrying the
//     deadline.attempt.* attributes;
//   - on the server, one SERVER span per request, the child of the
//     client's attempt span through the W3C trace context carried in the
//     request's _meta (traceparent, tracestate), with the deadline.server.*
//     attributes of the HTTP and gRPC server spans: inbound, maximum and
//     effective budget, which limit set it, the floor, a refusal, and how
//     the handler ended.
//
// The go-sdk has no OpenTelemetry instrumentation of its own; this package
// starts those spans itself. The composition is one line on each side:
//
//	mws, err := otelbudgetmcp.ClientMiddleware(obs, []deadlinemcp.ClientOption{deadlinemcp.WithPolicy(p)})
//	client.AddSendingMiddleware(mws...)
//
//	mws, err := otelbudgetmcp.ServerMiddleware(obs, []deadlinemcp.ServerOption{deadlinemcp.WithFloor(20 * time.Millisecond)})
//	server.AddReceivingMiddleware(mws...)
//
// docs/mcp.md and docs/attributes.md list every attribute.
//
// The package is its own module, so that programs that do not speak MCP
// never download the SDK.
package otelbudgetmcp

// ScopeName is the instrumentation scope of the CLIENT and SERVER spans
// this package starts (the call spans are otelbudget's).
const ScopeName = "github.com/deadlinebudget/budget/otelbudget/otelbudgetmcp"

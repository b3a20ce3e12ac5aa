// Package deadlinemcp keeps every MCP request of an agent run inside one
// shared deadline: the same budget, leases, refusals and retries as
// packages deadlinehttp and deadlinegrpc, over the Model Context Protocol,
// as middleware of the official Go SDK (github.com/modelcontextprotocol/go-sdk).
//
// A [Client] is sending middleware: each request runs under [deadline.Do];
// each attempt's lease travels to the server in the request's _meta under
// [MetaKey]; nothing is sent when what is left is at or below the floor; a
// tool call is retried only when the tool's annotations (readOnlyHint,
// idempotentHint) say it is safe to repeat, and only on transient failures;
// a lease that ends cancels the request on the server (MCP's
// notifications/cancelled, which the SDK sends; not on a stateless
// streamable HTTP server, see [Client]). The policy is the request's
// context's ([WithRequestPolicy]), else one chosen by method and tool
// ([WithPolicyFunc]), else the client's ([WithPolicy]), which does not
// apply to the handshake.
//
// A [Server] is receiving middleware: the budget from _meta, clamped to the
// server's maximum and to any deadline the request already has
// ([admission.Admit]), becomes the handler's context deadline; at or below
// the floor the request is refused at once with the JSON-RPC error
// [CodeBudgetRefused]. Over streamable HTTP, [Server.HTTPHandler] makes a
// budget key repeated in one request's _meta give its smallest value.
//
// Package otelbudget/otelbudgetmcp composes both with otelbudget's spans.
// The package is its own module, so that programs that do not speak MCP
// never download the SDK. docs/mcp.md describes the wire, the retry rules
// and the telemetry.
package deadlinemcp

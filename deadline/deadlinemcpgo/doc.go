// Package deadlinemcpgo keeps every MCP request of an agent run inside one
// shared deadline over github.com/mark3labs/mcp-go, with the rules the
// official go-sdk's adapter (deadline/deadlinemcp) follows, both written
// once in package deadline/mcpbudget: the same _meta key and value, the
// same policy per method and tool, retries only for read-only methods and
// tools hinted readOnlyHint or idempotentHint, the same clamp and refusal
// (JSON-RPC -32001 with its data), so that a client on one SDK and a
// server on the other agree.
//
// mcp-go's extension points are narrow, and these are the seams used:
//
//   - a [Client] wraps the client's transport ([Client.Transport]): mcp-go
//     has no client middleware, and every request passes its transport;
//   - a [Server] wraps the handlers of tools, prompts and resources
//     ([Server.Options]): the only requests mcp-go lets a server wrap, and
//     the ones that run user code; a refusal goes out through
//     server.NewHandlerError with its own code;
//   - [Server.HTTPHandler] reads the POST bodies of the streamable HTTP and
//     SSE servers before mcp-go does, for the smallest value of a repeated
//     budget key.
//
// Package otelbudget/otelbudgetmcpgo adds the spans. The package is its
// own module, so that programs that do not use mcp-go never download it.
// docs/mcp.md says what differs by SDK and transport.
package deadlinemcpgo

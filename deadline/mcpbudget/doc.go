// Package mcpbudget holds the Model Context Protocol's budget rules that do
// not depend on an SDK, written once for every SDK's adapter: the _meta key
// and the value it carries ([MetaKey], [BudgetMs], [Parse]), a key repeated
// in one request read by its smallest valid value ([Smallest]), the
// policy of each method ([Client]: the context's, by method and tool, the
// handshake's, the default), which requests are safe to repeat
// ([SafeMethod], a tool's readOnlyHint and idempotentHint, [ToolHints]),
// the server's admission of an inbound budget ([Admit]) and the shape of
// its refusal ([CodeBudgetRefused], [RefusalError], [RefusedError]).
//
// It imports the standard library and package deadline only. The SDK
// adapters are their own modules: deadline/deadlinemcp for the official
// Go SDK (github.com/modelcontextprotocol/go-sdk) and
// deadline/deadlinemcpgo for github.com/mark3labs/mcp-go. A client on one
// SDK and a server on the other agree on the budget, the refusal and its
// type on the caller's side, because both read and write them here.
// docs/mcp.md describes the wire and what differs by SDK and transport.
package mcpbudget

// Package interoptest runs the MCP budget's scenarios across the two Go
// SDKs, with the real SDKs on both sides: a go-sdk client with
// deadlinemcp's middleware calling an mcp-go server with deadlinemcpgo's,
// and an mcp-go client with deadlinemcpgo's transport calling a go-sdk
// server with deadlinemcp's, over streamable HTTP, SSE and stdio. It is a
// test-only module (versions.yaml excludes it): it needs both SDKs, which
// no adapter module does.
package interoptest

// Package test holds the tests of otelbudgetmcpgo's spans that record
// them (the OpenTelemetry SDK's span recorder), the span interop between
// the two MCP SDKs (an mcp-go client with otelbudgetmcpgo calling a go-sdk
// server with otelbudgetmcp, and the reverse: one trace, the same span
// names and attributes), and the benchmark of both SDKs' integrations side
// by side. It is a test-only module (versions.yaml excludes it).
package test

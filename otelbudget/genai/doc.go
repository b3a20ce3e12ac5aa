// Package genai holds the attribute keys, operation names and span names of
// the OpenTelemetry GenAI and MCP semantic conventions, at one pinned version,
// for the framework integrations of this project (otelbudgeteino,
// otelbudgetgenkit) and its MCP spans (otelbudgetmcp) to share.
//
// The conventions live in their own repository,
// github.com/open-telemetry/semantic-conventions-genai, which has no release
// tags and whose every attribute is at stability "development": names can
// change between commits. This package follows the commit in
// [ConventionsVersion] and nothing newer; moving to another commit is a
// deliberate change of this package and of docs/attributes.md. The Go semconv
// packages stopped generating GenAI and MCP attributes after v1.41.0, which is
// why the keys are declared here; the general keys the GenAI spans reference
// (error.type, server.address, network.transport, jsonrpc.request.id, ...) are
// those of go.opentelemetry.io/otel/semconv/v1.43.0, the version the rest of
// the project uses.
//
// The package imports the OpenTelemetry API only and has no state: constants
// and pure functions, safe for concurrent use.
package genai

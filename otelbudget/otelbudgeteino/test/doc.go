// Package test holds otelbudgeteino's tests that need the OpenTelemetry SDK
// and a real model client: Eino's ADK ChatModelAgent driving eino-ext's
// OpenAI model against a fake OpenAI-compatible provider (served on loopback
// by httptest, or in memory inside a testing/synctest bubble) and real tools.
package test

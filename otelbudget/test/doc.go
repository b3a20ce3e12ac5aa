// Package test holds the tests of packages otelbudget and otelbudgethttp
// that need the OpenTelemetry SDK (span recorders, manual metric readers).
//
// It is a module of its own, as opentelemetry-go-contrib keeps its
// instrumentation tests, so that the SDK never enters the root module's
// go.mod: a program that imports the libraries does not find the SDK, its
// exporters or their dependencies in its module graph.
package test

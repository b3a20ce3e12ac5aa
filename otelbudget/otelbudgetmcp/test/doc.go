// Package test holds the tests of package otelbudgetmcp that record spans
// with the OpenTelemetry SDK (a span recorder), and an example of those
// spans. The package's own runnable examples, which need no SDK, are
// beside it.
//
// It is a module of its own, as otelbudget/test is for otelbudget, so that
// the SDK never enters otelbudgetmcp's go.mod: a program that imports
// otelbudgetmcp does not find the SDK in its module graph or its go.sum.
package test

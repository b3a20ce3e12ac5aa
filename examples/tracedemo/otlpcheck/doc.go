// Package otlpcheck holds the OTLP round-trip tests of examples/tracedemo:
// they start real OTLP receivers on loopback (OTLP/HTTP and OTLP/gRPC, for
// traces and metrics, decoding with the OpenTelemetry Collector's pdata),
// build the demo and run it as a subprocess with the OTLP exporters pointed
// at them through the standard environment variables, and check what
// arrives; and that with a collector nobody answers for, the demo still
// ends within its budget plus the export's grace. TestFleetMerge builds and
// runs a real Collector (./collector, a module of its own) and checks that
// budgetadvise reads two processes' merged export from its file exporter.
//
// It is a module of its own so that the collector's dependencies stay out of
// the demo's go.mod; `make test` runs it with every other nested module.
package otlpcheck

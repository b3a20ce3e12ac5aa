// Package otlpcheck holds the OTLP round-trip test of examples/tracedemo:
// it starts real OTLP receivers on loopback (OTLP/HTTP and OTLP/gRPC, both
// decoding with the OpenTelemetry Collector's pdata), runs the demo's ok
// scenario as a subprocess with the OTLP exporter pointed at them through
// the standard environment variables, and checks what arrives.
//
// It is a module of its own so that the collector's dependencies stay out of
// the main go.mod; `make test` runs it with every other nested module.
package otlpcheck

package main

import (
	"context"
	"fmt"
	"io"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// The values of -exporter. Each chooses where both signals, spans and
// metrics, go.
const (
	exporterAuto   = ""       // stdout, unless OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER say otherwise
	exporterStdout = "stdout" // the stdout exporters, pretty-printed JSON
	exporterOTLP   = "otlp"   // OTLP, configured by the OTEL_EXPORTER_OTLP_* variables
	exporterNone   = "none"   // spans and metrics are made but not exported
)

// consoleExporter is autoexport's name for its stdout exporters: they write
// to the process's standard output.
const consoleExporter = "console"

// serviceName is the service.name of the demo's telemetry unless
// OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) says otherwise.
const serviceName = "tracedemo"

// The signals, as the OTLP variables name them (OTEL_EXPORTER_OTLP_<signal>_PROTOCOL).
const (
	signalTraces  = "TRACES"
	signalMetrics = "METRICS"
)

// newSpanExporter returns the span exporter kind asks for, and a short name
// of where the spans go for messages ("stdout", "otlp grpc", …). A nil
// exporter means none. getenv reads the environment.
//
// OTLP goes through contrib autoexport, which reads OTEL_TRACES_EXPORTER,
// OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf or grpc),
// OTEL_EXPORTER_OTLP_ENDPOINT and the rest of the standard variables.
func newSpanExporter(ctx context.Context, kind string, stdout io.Writer, getenv func(string) string) (sdktrace.SpanExporter, string, error) {
	env := getenv("OTEL_TRACES_EXPORTER")
	switch kind {
	case exporterAuto:
		if env == "" {
			return newSpanExporter(ctx, exporterStdout, stdout, getenv)
		}
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return nil, "", fmt.Errorf("OTEL_TRACES_EXPORTER=%s: %w", env, err)
		}
		if autoexport.IsNoneSpanExporter(exp) {
			return nil, exporterNone, nil
		}
		return exp, destination(env, signalTraces, getenv), nil
	case exporterStdout:
		exp, err := stdouttrace.New(stdouttrace.WithWriter(stdout), stdouttrace.WithPrettyPrint())
		return exp, exporterStdout, err
	case exporterOTLP:
		if env != "" && env != exporterOTLP {
			return nil, "", fmt.Errorf("-exporter otlp contradicts OTEL_TRACES_EXPORTER=%s: unset one of them", env)
		}
		exp, err := autoexport.NewSpanExporter(ctx) // its default is OTLP
		if err != nil {
			return nil, "", fmt.Errorf("OTLP span exporter: %w", err)
		}
		return exp, destination(exporterOTLP, signalTraces, getenv), nil
	case exporterNone:
		return nil, exporterNone, nil
	}
	return nil, "", fmt.Errorf("unknown exporter %q: want stdout, otlp or none", kind)
}

// newMetricReader returns the metric reader kind asks for, and a short name
// of where the metrics go for messages. A nil reader means none.
//
// It follows the rules of newSpanExporter: contrib autoexport builds the
// reader from OTEL_METRICS_EXPORTER and the OTLP variables (among them
// OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE and
// OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION, which the OTLP
// metric exporters honour), except that with the variable unset the demo
// writes to stdout, as it does spans, where autoexport would default to
// OTLP. The OTLP and stdout readers export when they are shut down (their
// interval, 60s unless OTEL_METRIC_EXPORT_INTERVAL says otherwise, is longer
// than any scenario); autoexport's prometheus reader only serves what it
// holds until the process ends.
func newMetricReader(ctx context.Context, kind string, stdout io.Writer, getenv func(string) string) (sdkmetric.Reader, string, error) {
	env := getenv("OTEL_METRICS_EXPORTER")
	stdoutReader := func(context.Context) (sdkmetric.Reader, error) {
		exp, err := stdoutmetric.New(stdoutmetric.WithWriter(stdout), stdoutmetric.WithPrettyPrint())
		if err != nil {
			return nil, err
		}
		return sdkmetric.NewPeriodicReader(exp), nil
	}
	switch kind {
	case exporterAuto:
		r, err := autoexport.NewMetricReader(ctx, autoexport.WithFallbackMetricReader(stdoutReader))
		if err != nil {
			return nil, "", fmt.Errorf("OTEL_METRICS_EXPORTER=%s: %w", env, err)
		}
		if autoexport.IsNoneMetricReader(r) {
			return nil, exporterNone, r.Shutdown(ctx)
		}
		if env == "" {
			return r, exporterStdout, nil
		}
		return r, destination(env, signalMetrics, getenv), nil
	case exporterStdout:
		r, err := stdoutReader(ctx)
		return r, exporterStdout, err
	case exporterOTLP:
		if env != "" && env != exporterOTLP {
			return nil, "", fmt.Errorf("-exporter otlp contradicts OTEL_METRICS_EXPORTER=%s: unset one of them", env)
		}
		r, err := autoexport.NewMetricReader(ctx) // its default is OTLP
		if err != nil {
			return nil, "", fmt.Errorf("OTLP metric reader: %w", err)
		}
		return r, destination(exporterOTLP, signalMetrics, getenv), nil
	case exporterNone:
		return nil, exporterNone, nil
	}
	return nil, "", fmt.Errorf("unknown exporter %q: want stdout, otlp or none", kind)
}

// destination names where a signal goes: the exporter's name, with the
// protocol for OTLP ("otlp grpc").
func destination(exporter, signal string, getenv func(string) string) string {
	if exporter != exporterOTLP {
		return exporter
	}
	return exporterOTLP + " " + otlpProtocol(signal, getenv)
}

// otlpProtocol returns the OTLP protocol autoexport uses for signal:
// OTEL_EXPORTER_OTLP_<signal>_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
// else http/protobuf.
func otlpProtocol(signal string, getenv func(string) string) string {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := getenv(k); v != "" {
			return v
		}
	}
	return "http/protobuf"
}

// writesStdout reports whether an exporter sending to where writes to the
// process's standard output: the demo's stdout exporters and autoexport's
// console ones.
func writesStdout(where string) bool {
	return where == exporterStdout || where == consoleExporter
}

// newResource describes the demo's process: service.name "tracedemo",
// overridden by OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, and the SDK.
func newResource(ctx context.Context) (*resource.Resource, error) {
	return resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(serviceName)),
		resource.WithFromEnv(), // later options win: the environment overrides the default name
		resource.WithTelemetrySDK(),
	)
}

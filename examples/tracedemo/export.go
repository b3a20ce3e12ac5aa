package main

import (
	"context"
	"fmt"
	"io"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
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

// consoleExporter is the specification's name, in OTEL_TRACES_EXPORTER and
// OTEL_METRICS_EXPORTER, for exporters writing to the standard output: the
// demo's stdout exporters.
const consoleExporter = "console"

// The OTLP protocols OTEL_EXPORTER_OTLP_PROTOCOL may name.
const (
	protocolHTTP = "http/protobuf" // the specification's default
	protocolGRPC = "grpc"
)

// serviceName is the service.name of the demo's telemetry unless
// OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) says otherwise.
const serviceName = "tracedemo"

// The signals, as the OTLP variables name them (OTEL_EXPORTER_OTLP_<signal>_PROTOCOL).
const (
	signalTraces  = "TRACES"
	signalMetrics = "METRICS"
)

// checkExportEnv checks what the environment asks of the export against
// -exporter kind, so that a wrong variable is a usage error (exit 2) found
// before the run: OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER must be
// unset, otlp, console or none (and agree with -exporter otlp), and the
// OTLP protocol variables http/protobuf or grpc.
func checkExportEnv(kind string, getenv func(string) string) error {
	for _, v := range []struct{ name, signal string }{
		{"OTEL_TRACES_EXPORTER", signalTraces},
		{"OTEL_METRICS_EXPORTER", signalMetrics},
	} {
		env := getenv(v.name)
		switch env {
		case "", exporterOTLP, consoleExporter, exporterNone:
		case "prometheus":
			return fmt.Errorf("%s=prometheus: not supported here (the process ends after the run, before anything could scrape it): want otlp, console or none", v.name)
		default:
			return fmt.Errorf("%s=%s: want otlp, console or none", v.name, env)
		}
		if kind == exporterOTLP && env != "" && env != exporterOTLP {
			return fmt.Errorf("-exporter otlp contradicts %s=%s: unset one of them", v.name, env)
		}
		for _, k := range []string{"OTEL_EXPORTER_OTLP_" + v.signal + "_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
			switch p := getenv(k); p {
			case "", protocolHTTP, protocolGRPC:
			default:
				return fmt.Errorf("%s=%s: want %s or %s", k, p, protocolHTTP, protocolGRPC)
			}
		}
	}
	return nil
}

// exporterFor returns which exporter a signal uses: -exporter kind, else
// the signal's OTEL_<signal>_EXPORTER variable (console meaning stdout),
// else stdout.
func exporterFor(kind, signal string, getenv func(string) string) string {
	if kind != exporterAuto {
		return kind
	}
	switch env := getenv("OTEL_" + signal + "_EXPORTER"); env {
	case "", consoleExporter:
		return exporterStdout
	default:
		return env
	}
}

// newSpanExporter returns the span exporter kind asks for, and a short name
// of where the spans go for messages ("stdout", "otlp grpc", …). A nil
// exporter means none. getenv reads the environment.
//
// The OTLP exporters read the standard variables themselves
// (OTEL_EXPORTER_OTLP_ENDPOINT, _HEADERS, _TIMEOUT, …, per signal too); the
// demo picks the protocol (OTEL_EXPORTER_OTLP_PROTOCOL, http/protobuf by
// default) and, with no endpoint and no _INSECURE variable set, sends to the
// specification's default endpoint, http://localhost:4318 (grpc: 4317), in
// plain text, where the exporters on their own would use TLS.
func newSpanExporter(ctx context.Context, kind string, stdout io.Writer, getenv func(string) string) (sdktrace.SpanExporter, string, error) {
	if err := checkExportEnv(kind, getenv); err != nil {
		return nil, "", err
	}
	switch exporterFor(kind, signalTraces, getenv) {
	case exporterStdout:
		exp, err := stdouttrace.New(stdouttrace.WithWriter(stdout), stdouttrace.WithPrettyPrint())
		return exp, exporterStdout, err
	case exporterOTLP:
		proto := otlpProtocol(signalTraces, getenv)
		var exp sdktrace.SpanExporter
		var err error
		if proto == protocolGRPC {
			var opts []otlptracegrpc.Option
			if plainByDefault(signalTraces, getenv) {
				opts = append(opts, otlptracegrpc.WithInsecure())
			}
			exp, err = otlptracegrpc.New(ctx, opts...)
		} else {
			var opts []otlptracehttp.Option
			if plainByDefault(signalTraces, getenv) {
				opts = append(opts, otlptracehttp.WithInsecure())
			}
			exp, err = otlptracehttp.New(ctx, opts...)
		}
		if err != nil {
			return nil, "", fmt.Errorf("OTLP span exporter: %w", err)
		}
		return exp, exporterOTLP + " " + proto, nil
	}
	return nil, exporterNone, nil
}

// newMetricReader returns the metric reader kind asks for, and a short name
// of where the metrics go for messages. A nil reader means none.
//
// It follows the rules of newSpanExporter; the OTLP metric exporters also
// honour OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE and
// OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION. The readers
// export when they are shut down (their interval, 60s unless
// OTEL_METRIC_EXPORT_INTERVAL says otherwise, is longer than any scenario).
func newMetricReader(ctx context.Context, kind string, stdout io.Writer, getenv func(string) string) (sdkmetric.Reader, string, error) {
	if err := checkExportEnv(kind, getenv); err != nil {
		return nil, "", err
	}
	switch exporterFor(kind, signalMetrics, getenv) {
	case exporterStdout:
		exp, err := stdoutmetric.New(stdoutmetric.WithWriter(stdout), stdoutmetric.WithPrettyPrint())
		if err != nil {
			return nil, "", err
		}
		return sdkmetric.NewPeriodicReader(exp), exporterStdout, nil
	case exporterOTLP:
		proto := otlpProtocol(signalMetrics, getenv)
		var exp sdkmetric.Exporter
		var err error
		if proto == protocolGRPC {
			var opts []otlpmetricgrpc.Option
			if plainByDefault(signalMetrics, getenv) {
				opts = append(opts, otlpmetricgrpc.WithInsecure())
			}
			exp, err = otlpmetricgrpc.New(ctx, opts...)
		} else {
			var opts []otlpmetrichttp.Option
			if plainByDefault(signalMetrics, getenv) {
				opts = append(opts, otlpmetrichttp.WithInsecure())
			}
			exp, err = otlpmetrichttp.New(ctx, opts...)
		}
		if err != nil {
			return nil, "", fmt.Errorf("OTLP metric exporter: %w", err)
		}
		return sdkmetric.NewPeriodicReader(exp), exporterOTLP + " " + proto, nil
	}
	return nil, exporterNone, nil
}

// plainByDefault reports whether the OTLP exporter for signal must be told
// to send in plain text: no endpoint and no _INSECURE variable is set for
// it, so it goes to the specification's default, http://localhost:4318 (or
// 4317), where the exporters on their own would use https.
func plainByDefault(signal string, getenv func(string) string) bool {
	for _, k := range []string{"ENDPOINT", signal + "_ENDPOINT", "INSECURE", signal + "_INSECURE"} {
		if getenv("OTEL_EXPORTER_OTLP_"+k) != "" {
			return false
		}
	}
	return true
}

// otlpProtocol returns the OTLP protocol for signal:
// OTEL_EXPORTER_OTLP_<signal>_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
// else http/protobuf.
func otlpProtocol(signal string, getenv func(string) string) string {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := getenv(k); v != "" {
			return v
		}
	}
	return protocolHTTP
}

// writesStdout reports whether an exporter sending to where writes to the
// process's standard output.
func writesStdout(where string) bool {
	return where == exporterStdout
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

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// The values of -exporter.
const (
	exporterAuto   = ""       // stdout, unless OTEL_TRACES_EXPORTER is set
	exporterStdout = "stdout" // the stdout trace exporter, pretty-printed JSON
	exporterOTLP   = "otlp"   // OTLP, configured by the OTEL_EXPORTER_OTLP_* variables
	exporterNone   = "none"   // spans are made but not exported
)

// serviceName is the service.name of the demo's spans unless
// OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) says otherwise.
const serviceName = "tracedemo"

// newSpanExporter returns the exporter kind asks for, and a short name of
// where the spans go for messages. getenv reads the environment.
//
// OTLP goes through contrib autoexport, which reads OTEL_TRACES_EXPORTER,
// OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf or grpc),
// OTEL_EXPORTER_OTLP_ENDPOINT and the rest of the standard variables. A nil
// exporter means none.
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
		if env == exporterOTLP {
			env += " " + otlpProtocol(getenv)
		}
		return exp, env, nil
	case exporterStdout:
		exp, err := stdouttrace.New(stdouttrace.WithWriter(stdout), stdouttrace.WithPrettyPrint())
		return exp, exporterStdout, err
	case exporterOTLP:
		if env != "" && env != exporterOTLP {
			return nil, "", fmt.Errorf("-exporter otlp contradicts OTEL_TRACES_EXPORTER=%s: unset one of them", env)
		}
		exp, err := autoexport.NewSpanExporter(ctx) // its default is OTLP
		if err != nil {
			return nil, "", fmt.Errorf("OTLP exporter: %w", err)
		}
		return exp, exporterOTLP + " " + otlpProtocol(getenv), nil
	case exporterNone:
		return nil, exporterNone, nil
	}
	return nil, "", fmt.Errorf("unknown exporter %q: want stdout, otlp or none", kind)
}

// otlpProtocol returns the OTLP protocol autoexport will use.
func otlpProtocol(getenv func(string) string) string {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := getenv(k); v != "" {
			return v
		}
	}
	return "http/protobuf"
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

// spanBuffer is a span exporter that keeps every span in memory until
// flush hands them all to the real exporter in one export, under a deadline
// of the caller's. The SDK's batch processor would keep exporting (and
// retrying an unreachable collector) in a goroutine after a timed-out
// shutdown; this way the export is bounded, its one error is reported once,
// and nothing outlives the run.
type spanBuffer struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

// ExportSpans keeps spans; it never fails.
func (b *spanBuffer) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.spans = append(b.spans, spans...)
	return nil
}

// Shutdown does nothing: flush does the work.
func (b *spanBuffer) Shutdown(context.Context) error { return nil }

// flush exports every span kept to exp and shuts exp down, both within
// timeout. It returns how many spans it handed over and the first error.
func (b *spanBuffer) flush(ctx context.Context, exp sdktrace.SpanExporter, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	b.mu.Lock()
	spans := b.spans
	b.spans = nil
	b.mu.Unlock()
	var err error
	if len(spans) > 0 {
		err = exp.ExportSpans(ctx, spans)
	}
	if serr := exp.Shutdown(ctx); serr != nil && !errors.Is(serr, context.DeadlineExceeded) {
		err = errors.Join(err, serr)
	}
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("gave up after %s: %w", timeout, err)
	}
	return len(spans), err
}

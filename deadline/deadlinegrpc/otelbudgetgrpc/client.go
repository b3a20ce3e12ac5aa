package otelbudgetgrpc

import (
	"context"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
	"github.com/deadlinebudget/budget/otelbudget"
)

// DialOptions returns the options that install, on a connection, a
// [deadlinegrpc.Client] built from opts and observed through obs, and
// otelgrpc's client stats handler:
//
//	grpc.WithChainUnaryInterceptor(…), grpc.WithChainStreamInterceptor(…),
//	grpc.WithDisableRetry(),
//	grpc.WithStatsHandler(otelgrpc.NewClientHandler(
//		otelgrpc.WithTracerProvider(<the observer's ClientTracerProvider>),
//		otelgrpc.WithMeterProvider(obs.MeterProvider()), otelOpts...))
//
// Each physical attempt is one otelgrpc CLIENT span that carries the
// attempt attributes, a child of the call's INTERNAL span (see the package
// documentation). otelOpts come last and win.
//
// The calls are observed by an observer derived from obs (the same tracer
// and meter providers): it keeps http.request.resend_count, an HTTP
// attribute, off the gRPC attempt spans. Attach nothing else: obs's own
// hooks attached to the same calls (on a policy or a context) would record
// them a second time. A nil obs means otelbudget.New() (the global
// providers).
//
// It returns the [*deadline.PolicyError] of an invalid option, as
// [deadlinegrpc.NewClient] does.
func DialOptions(obs *otelbudget.Observer, opts []deadlinegrpc.ClientOption, otelOpts ...otelgrpc.Option) ([]grpc.DialOption, error) {
	if obs == nil {
		obs = otelbudget.New()
	}
	rpc := otelbudget.New(
		otelbudget.WithTracerProvider(noResendProvider{obs.TracerProvider()}),
		otelbudget.WithMeterProvider(obs.MeterProvider()))
	all := make([]deadlinegrpc.ClientOption, 0, len(opts)+1)
	all = append(all, deadlinegrpc.WithHooks(rpc.ClientHooks()))
	all = append(all, opts...)
	c, err := deadlinegrpc.NewClient(all...)
	if err != nil {
		return nil, err
	}
	hopts := make([]otelgrpc.Option, 0, len(otelOpts)+2)
	hopts = append(hopts,
		otelgrpc.WithTracerProvider(rpc.ClientTracerProvider()),
		otelgrpc.WithMeterProvider(obs.MeterProvider()))
	hopts = append(hopts, otelOpts...)
	return append(c.DialOptions(), grpc.WithStatsHandler(otelgrpc.NewClientHandler(hopts...))), nil
}

// noResendProvider drops http.request.resend_count from the attributes a
// span starts with: otelbudget's client attempts carry it for HTTP, and an
// RPC span must not.
type noResendProvider struct{ trace.TracerProvider }

func (p noResendProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return noResendTracer{p.TracerProvider.Tracer(name, opts...)}
}

type noResendTracer struct{ trace.Tracer }

func (t noResendTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	cfg := trace.NewSpanStartConfig(opts...)
	attrs := cfg.Attributes()
	keep := -1
	for i, a := range attrs {
		if a.Key == semconv.HTTPRequestResendCountKey {
			keep = i
			break
		}
	}
	if keep < 0 {
		return t.Tracer.Start(ctx, name, opts...)
	}
	kept := make([]attribute.KeyValue, 0, len(attrs)-1)
	for _, a := range attrs {
		if a.Key != semconv.HTTPRequestResendCountKey {
			kept = append(kept, a)
		}
	}
	rebuilt := []trace.SpanStartOption{
		trace.WithSpanKind(cfg.SpanKind()),
		trace.WithAttributes(kept...),
		trace.WithLinks(cfg.Links()...),
	}
	if ts := cfg.Timestamp(); !ts.IsZero() {
		rebuilt = append(rebuilt, trace.WithTimestamp(ts))
	}
	if cfg.NewRoot() {
		rebuilt = append(rebuilt, trace.WithNewRoot())
	}
	return t.Tracer.Start(ctx, name, rebuilt...)
}

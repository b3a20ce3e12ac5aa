package otelbudgetgrpc

import (
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
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
//		otelgrpc.WithTracerProvider(obs.RPCClientTracerProvider()),
//		otelgrpc.WithMeterProvider(obs.MeterProvider()), otelOpts...))
//
// with the interceptors observed by obs.ClientHooks(), placed before the
// hooks of opts ([deadlinegrpc.WithHooks]). Each physical attempt is one
// otelgrpc CLIENT span that carries the attempt attributes and no http.*
// attribute, a child of the call's INTERNAL span (see the package
// documentation). otelOpts come last and win. A nil obs means
// otelbudget.New() (the global providers).
//
// obs observes the calls itself, so attaching it again changes nothing:
// obs.Hooks() or obs.ClientHooks() on a policy the calls use
// ([deadlinegrpc.WithPolicy], [deadlinegrpc.WithRequestPolicy]), on the
// client ([deadlinegrpc.WithHooks]) or on the caller's context
// ([deadline.WithHooks]) records each call once: one call span, one
// otelgrpc CLIENT span per attempt (no INTERNAL attempt span beside it),
// one backoff event, metrics counted once. The exception is that of
// [otelbudget]: with a no-op TracerProvider, an observer attached twice
// counts its metrics twice. A different observer attached to the same calls
// records them on its own, with INTERNAL attempt spans.
//
// It returns the [*deadline.PolicyError] of an invalid option, as
// [deadlinegrpc.NewClient] does.
func DialOptions(obs *otelbudget.Observer, opts []deadlinegrpc.ClientOption, otelOpts ...otelgrpc.Option) ([]grpc.DialOption, error) {
	if obs == nil {
		obs = otelbudget.New()
	}
	all := make([]deadlinegrpc.ClientOption, 0, len(opts)+1)
	all = append(all, deadlinegrpc.WithHooks(obs.ClientHooks()))
	all = append(all, opts...)
	c, err := deadlinegrpc.NewClient(all...)
	if err != nil {
		return nil, err
	}
	hopts := make([]otelgrpc.Option, 0, len(otelOpts)+2)
	hopts = append(hopts,
		otelgrpc.WithTracerProvider(obs.RPCClientTracerProvider()),
		otelgrpc.WithMeterProvider(obs.MeterProvider()))
	hopts = append(hopts, otelOpts...)
	return append(c.DialOptions(), grpc.WithStatsHandler(otelgrpc.NewClientHandler(hopts...))), nil
}

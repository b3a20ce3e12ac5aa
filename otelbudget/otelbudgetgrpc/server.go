package otelbudgetgrpc

import (
	"context"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
	"github.com/deadlinebudget/budget/otelbudget"
)

// ServerOptions returns the options that install, on a server, a
// [deadlinegrpc.Server] built from opts and otelgrpc's server stats handler
// (otelgrpc.NewServerHandler with obs's tracer and meter providers, then
// otelOpts), and that set the server's decision about each RPC's budget on
// otelgrpc's SERVER span (the deadline.server.* attributes). A nil obs
// means otelbudget.New(). It returns the [*deadline.PolicyError] of an
// invalid option, as [deadlinegrpc.NewServer] does.
func ServerOptions(obs *otelbudget.Observer, opts []deadlinegrpc.ServerOption, otelOpts ...otelgrpc.Option) ([]grpc.ServerOption, error) {
	if obs == nil {
		obs = otelbudget.New()
	}
	all := make([]deadlinegrpc.ServerOption, 0, len(opts)+1)
	all = append(all, opts...)
	all = append(all, deadlinegrpc.WithAdmission(annotate))
	s, err := deadlinegrpc.NewServer(all...)
	if err != nil {
		return nil, err
	}
	hopts := make([]otelgrpc.Option, 0, len(otelOpts)+2)
	hopts = append(hopts,
		otelgrpc.WithTracerProvider(obs.TracerProvider()),
		otelgrpc.WithMeterProvider(obs.MeterProvider()))
	hopts = append(hopts, otelOpts...)
	return append([]grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(hopts...))}, s.ServerOptions()...), nil
}

// annotate sets the admission on the server span in ctx.
func annotate(ctx context.Context, _ string, a deadlinegrpc.Admission) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	// The same deadline.server.* keys as the HTTP server composition
	// (otelbudgethttp.NewHandler), documented in docs/attributes.md.
	attrs := make([]attribute.KeyValue, 0, 11)
	if a.HasDeadline {
		attrs = append(attrs, otelbudget.AttrServerInboundBudgetMs.Int64(ms(a.Inbound)))
	}
	attrs = append(attrs,
		otelbudget.AttrServerMaxBudgetMs.Int64(ms(a.MaxBudget)),
		otelbudget.AttrServerBudgetMs.Int64(ms(a.Budget)),
		otelbudget.AttrServerLimitedBy.String(a.Limit.String()),
		otelbudget.AttrServerFloorMs.Int64(ms(a.Floor)),
	)
	attrs = otelbudget.AppendServerLearned(attrs, a.Learned, a.Estimate, a.Probe, a.Queued, a.QueueWait)
	if a.Refused() {
		attrs = append(attrs, otelbudget.AttrServerRefused.Bool(true), otelbudget.AttrServerRefusal.String(a.Refusal.String()))
	}
	span.SetAttributes(attrs...)
}

// ms converts d to whole milliseconds, rounded to the nearest, as otelbudget
// does.
func ms(d time.Duration) int64 { return d.Round(time.Millisecond).Milliseconds() }

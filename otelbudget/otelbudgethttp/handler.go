package otelbudgethttp

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/otelbudget"
)

// NewHandler returns the server side of the composition: otelhttp's
// handler, which records one SERVER span per request, around the budget
// middleware of [deadlinehttp.NewHandler] configured by opts, around next:
//
//	otelhttp.NewHandler(deadlinehttp.NewHandler(next, opts...), operation, …)
//
// otelhttp extracts the caller's trace context with the global propagator
// (otel.GetTextMapPropagator), as it does by default, so the SERVER span is
// the child of the caller's CLIENT span; it takes its tracer and meter from
// obs's providers ([otelbudget.Observer.TracerProvider],
// [otelbudget.Observer.MeterProvider]).
//
// The SERVER span carries what the middleware decided for the request
// ([deadlinehttp.Admission], through [deadlinehttp.WithAdmission]): the
// inbound budget, the server's maximum, the effective budget and which
// limit set it, the floor; on a refusal (504) deadline.server.refused, the
// reason, status Error with a description ("budget 5ms at or below the 20ms
// floor") and error.type deadline_refused. For an admitted request it says
// how the handler ended (deadline.server.ended_by): when its lease ended
// while it ran, or it aborted the response with http.ErrAbortHandler after
// that, the status is Error ("the handler's lease ended (budget 80ms)")
// instead of only otelhttp's status code or exception event. A caller's
// cancellation is not an error. A panic in next goes on after the span has
// recorded it; the span is ended by otelhttp as usual. docs/attributes.md
// ("Server spans") lists every attribute.
//
// Metrics go to obs's MeterProvider under [otelbudget.ScopeName]: refusals,
// clamps (a header above the maximum) and the effective budget
// ([otelbudget.MetricServerRefusals], [otelbudget.MetricServerClamps],
// [otelbudget.MetricServerBudget]). The instruments are created once, here.
// With no-op providers nothing is recorded and a request costs what
// otelhttp and deadlinehttp cost on their own: no allocation is added.
//
// A [deadlinehttp.WithAdmission] in opts runs too, after the one this
// composition installs. A nil obs means otelbudget.New() (the global
// providers). An invalid option or a nil next returns a nil handler and the
// *deadline.PolicyError of [deadlinehttp.NewHandler] (errors.Is(err,
// deadline.ErrInvalidPolicy)), here, never per request.
func NewHandler(next http.Handler, operation string, obs *otelbudget.Observer, opts ...deadlinehttp.HandlerOption) (http.Handler, error) {
	return NewHandlerWith(next, operation, obs, nil, opts...)
}

// NewHandlerWith is [NewHandler] with otelhttp options (otelOpts), for a
// filter, a span name formatter, public endpoints and the like. The
// TracerProvider and the MeterProvider are always obs's: a
// WithTracerProvider or WithMeterProvider in otelOpts is overridden (build
// obs with the providers you want). A request that an otelhttp filter
// excludes gets no span, but its budget, refusal and metrics are as usual.
func NewHandlerWith(next http.Handler, operation string, obs *otelbudget.Observer, otelOpts []otelhttp.Option, opts ...deadlinehttp.HandlerOption) (http.Handler, error) {
	if obs == nil {
		obs = otelbudget.New()
	}
	s := &server{next: next}
	s.newInstruments(obs.MeterProvider())

	var inner http.Handler
	if next != nil {
		inner = s // a nil next stays nil, for deadlinehttp to report
	}
	all := make([]deadlinehttp.HandlerOption, 0, len(opts)+1)
	all = append(all, deadlinehttp.WithAdmission(s.admit))
	all = append(all, opts...)
	budget, err := deadlinehttp.NewHandler(inner, all...)
	if err != nil {
		return nil, err
	}

	o := make([]otelhttp.Option, 0, len(otelOpts)+2)
	o = append(o, otelOpts...)
	o = append(o,
		otelhttp.WithTracerProvider(&serverTracerProvider{TracerProvider: obs.TracerProvider(), s: s}),
		otelhttp.WithMeterProvider(obs.MeterProvider()))
	return otelhttp.NewHandler(budget, operation, o...), nil
}

// server is the state of one NewHandler: the instruments, their pre-built
// attribute options, and next. As an http.Handler it runs next inside the
// budget middleware and records how it ended.
type server struct {
	next     http.Handler
	metrics  bool // false with a no-op meter: record nothing
	refusals metric.Int64Counter
	clamps   metric.Int64Counter
	budget   metric.Float64Histogram
	// Built once, so that recording allocates nothing per request.
	refusalOpts [deadlinehttp.RefusalQueueFull + 1][]metric.AddOption
	limitOpts   [deadlinehttp.LimitContext + 1][]metric.RecordOption
}

// serverBudgetBuckets are the boundaries of [otelbudget.MetricServerBudget],
// in seconds: 1 ms to 30 s, deadlinehttp's default maximum.
var serverBudgetBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// newInstruments creates the instruments on mp's meter of scope
// otelbudget.ScopeName. An error (an SDK rejecting an instrument) goes to
// otel.Handle and leaves a no-op instrument in place.
func (s *server) newInstruments(mp metric.MeterProvider) {
	m := mp.Meter(otelbudget.ScopeName, metric.WithInstrumentationVersion(otelbudget.Version()))
	if _, off := m.(metricnoop.Meter); off {
		return
	}
	s.metrics = true
	var nm metricnoop.Meter
	var err error
	if s.refusals, err = m.Int64Counter(otelbudget.MetricServerRefusals, metric.WithUnit("{request}"),
		metric.WithDescription("Requests refused before their handler ran: budget spent, at or below the floor, below what the route needs, run out in the admission queue, or the queue full.")); err != nil {
		otel.Handle(err)
		s.refusals, _ = nm.Int64Counter(otelbudget.MetricServerRefusals)
	}
	if s.clamps, err = m.Int64Counter(otelbudget.MetricServerClamps, metric.WithUnit("{request}"),
		metric.WithDescription("Requests whose budget header asked for more than the server's maximum budget.")); err != nil {
		otel.Handle(err)
		s.clamps, _ = nm.Int64Counter(otelbudget.MetricServerClamps)
	}
	if s.budget, err = m.Float64Histogram(otelbudget.MetricServerBudget, metric.WithUnit("s"),
		metric.WithDescription("Effective budget of a request on arrival: the smallest of its header, the server's maximum and an outer deadline."),
		metric.WithExplicitBucketBoundaries(serverBudgetBuckets...)); err != nil {
		otel.Handle(err)
		s.budget, _ = nm.Float64Histogram(otelbudget.MetricServerBudget)
	}
	for _, r := range []deadlinehttp.Refusal{deadlinehttp.RefusalSpent, deadlinehttp.RefusalFloor,
		deadlinehttp.RefusalLearned, deadlinehttp.RefusalQueueTimeout, deadlinehttp.RefusalQueueFull} {
		s.refusalOpts[r] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(otelbudget.AttrServerRefusal.String(r.String())))}
	}
	for _, l := range []deadlinehttp.Limit{deadlinehttp.LimitHeader, deadlinehttp.LimitMax, deadlinehttp.LimitContext} {
		s.limitOpts[l] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(otelbudget.AttrServerLimitedBy.String(l.String())))}
	}
}

// admit is the [deadlinehttp.WithAdmission] callback: the metrics, and the
// admission's attributes on this handler's SERVER span.
func (s *server) admit(r *http.Request, a deadlinehttp.Admission) {
	ctx := r.Context()
	if s.metrics {
		if int(a.Limit) < len(s.limitOpts) {
			s.budget.Record(ctx, a.Budget.Seconds(), s.limitOpts[a.Limit]...)
		}
		if a.HeaderValid && a.HeaderBudget > a.MaxBudget {
			s.clamps.Add(ctx, 1)
		}
		if a.Refused() && int(a.Refusal) < len(s.refusalOpts) {
			s.refusals.Add(ctx, 1, s.refusalOpts[a.Refusal]...)
		}
	}
	span := s.span(ctx)
	if span == nil {
		return
	}
	span.budget = a.Budget
	attrs := make([]attribute.KeyValue, 0, 16)
	if a.HeaderValid {
		attrs = append(attrs, otelbudget.AttrServerInboundBudgetMs.Int64(ms(a.HeaderBudget)))
	}
	if a.HeaderMalformed {
		attrs = append(attrs, otelbudget.AttrServerHeaderMalformed.Bool(true))
	}
	if a.HeaderStripped {
		attrs = append(attrs, otelbudget.AttrServerHeaderStripped.Bool(true))
	}
	attrs = append(attrs,
		otelbudget.AttrServerMaxBudgetMs.Int64(ms(a.MaxBudget)),
		otelbudget.AttrServerBudgetMs.Int64(ms(a.Budget)),
		otelbudget.AttrServerLimitedBy.String(a.Limit.String()),
		otelbudget.AttrServerFloorMs.Int64(ms(a.Floor)),
	)
	if a.HasContextDeadline {
		attrs = append(attrs, otelbudget.AttrServerContextRemainingMs.Int64(ms(a.ContextRemaining)))
	}
	attrs = otelbudget.AppendServerLearned(attrs, a.Learned, a.Estimate, a.Probe, a.Queued, a.QueueWait)
	if a.Refused() {
		attrs = append(attrs,
			otelbudget.AttrServerRefused.Bool(true),
			otelbudget.AttrServerRefusal.String(a.Refusal.String()),
			semconv.ErrorTypeKey.String(otelbudget.ServerRefusalErrorType(a.Refusal)))
	}
	span.SetAttributes(attrs...)
	if a.Refused() {
		span.settle(refusalDescription(a))
	}
}

// refusalDescription is the SERVER span's status description on a refusal.
func refusalDescription(a deadlinehttp.Admission) string {
	switch {
	case a.Refusal == deadlinehttp.RefusalFloor:
		return "budget " + dur(a.Budget) + " at or below the " + dur(a.Floor) + " floor"
	case a.Refusal == deadlinehttp.RefusalLearned:
		return "budget " + dur(a.Budget) + " below what the route very likely needs: it completes within it " +
			strconv.FormatFloat(100*a.Estimate.P, 'f', 1, 64) + "% of the time (" + strconv.FormatUint(a.Estimate.Samples, 10) + " recent samples)"
	case a.Refusal == deadlinehttp.RefusalQueueTimeout:
		return "waited " + dur(a.QueueWait) + " for a slot: what was left of the " + dur(a.Budget) + " budget could no longer cover the route's service time"
	case a.Refusal == deadlinehttp.RefusalQueueFull:
		return "admission queue full"
	case a.Limit == deadlinehttp.LimitContext:
		return "budget spent: the request's context deadline had passed on arrival"
	default:
		return "budget spent: the request's header said 0"
	}
}

// ServeHTTP runs next in the budget middleware, and records on the SERVER
// span how it ended. It recovers a panic only to record it, and panics
// again with the same value.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	span := s.span(r.Context())
	if span == nil {
		s.next.ServeHTTP(w, r)
		return
	}
	returned := false
	defer func() {
		if returned {
			return
		}
		// runtime.Goexit (no panic) leaves recover nil: nothing to record.
		if v := recover(); v != nil {
			span.panicked(r.Context(), v)
			panic(v)
		}
	}()
	s.next.ServeHTTP(w, r)
	returned = true
	span.returned(r.Context())
}

// span returns this handler's SERVER span in ctx, nil when there is none
// to decorate: not recording, a request an otelhttp filter excluded, or
// another handler's span.
func (s *server) span(ctx context.Context) *serverSpan {
	span, _ := trace.SpanFromContext(ctx).(*serverSpan)
	if span == nil || span.s != s {
		return nil
	}
	return span
}

// The values of deadline.server.ended_by.
const (
	endedCompleted = "completed"
	endedDeadline  = "deadline"
	endedCanceled  = "canceled"
	endedAbort     = "abort"
	endedPanic     = "panic"
)

// returned records how next ended when it returned: its request's context
// says whether the lease had ended or the caller had gone.
func (span *serverSpan) returned(ctx context.Context) {
	switch ctx.Err() {
	case nil:
		span.SetAttributes(otelbudget.AttrServerEndedBy.String(endedCompleted))
	case context.DeadlineExceeded:
		span.leaseEnded(endedDeadline)
	default:
		span.SetAttributes(otelbudget.AttrServerEndedBy.String(endedCanceled))
	}
}

// panicked records a panic in next: http.ErrAbortHandler (the handler
// dropped the response, as deadlinehttp.NewHandler suggests once its
// lease has ended) or any other value.
func (span *serverSpan) panicked(ctx context.Context, v any) {
	if v != any(http.ErrAbortHandler) {
		span.SetAttributes(otelbudget.AttrServerEndedBy.String(endedPanic),
			semconv.ErrorTypeKey.String(otelbudget.ErrorTypeServerPanic))
		span.settle("panic")
		return
	}
	switch ctx.Err() {
	case context.DeadlineExceeded:
		span.leaseEnded(endedAbort)
	case nil:
		span.SetAttributes(otelbudget.AttrServerEndedBy.String(endedAbort),
			semconv.ErrorTypeKey.String(otelbudget.ErrorTypeServerAborted))
		span.settle("the handler aborted the response (http.ErrAbortHandler)")
	default:
		// The caller went away: dropping the response is no error.
		span.SetAttributes(otelbudget.AttrServerEndedBy.String(endedAbort))
	}
}

func (span *serverSpan) leaseEnded(endedBy string) {
	span.SetAttributes(otelbudget.AttrServerEndedBy.String(endedBy),
		semconv.ErrorTypeKey.String(otelbudget.ErrorTypeServerDeadline))
	span.settle("the handler's lease ended (budget " + dur(span.budget) + ")")
}

// serverTracerProvider wraps obs's TracerProvider for otelhttp's handler,
// so that the SERVER span it starts is a [serverSpan] of this handler. It
// embeds the real provider, so every method it does not override,
// including any a later trace API adds, is the real one's.
type serverTracerProvider struct {
	trace.TracerProvider
	s *server
}

func (p *serverTracerProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return &serverTracer{Tracer: p.TracerProvider.Tracer(name, opts...), s: p.s}
}

// serverTracer embeds the real tracer and overrides only Start.
type serverTracer struct {
	trace.Tracer
	s *server
}

// Start starts a span of the wrapped tracer; a recording one comes back
// wrapped, a non-recording one (no-op provider, sampled out) as it is.
func (t *serverTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, span := t.Tracer.Start(ctx, name, opts...)
	if !span.IsRecording() {
		return ctx, span
	}
	ss := &serverSpan{Span: span, s: t.s}
	return trace.ContextWithSpan(ctx, ss), ss
}

// serverSpan is otelhttp's SERVER span, with the status this composition
// settles kept over the one otelhttp sets from the response's status code
// after next returns (an Error without a description for the 504 of a
// refusal). Every other method, End included, is the span's own: End is
// promoted, so the SDK still sees a panic otelhttp's deferred End is
// called in, and records its exception event.
type serverSpan struct {
	trace.Span
	s       *server
	budget  time.Duration // the effective budget, set at admission
	settled atomic.Bool
}

// SetStatus sets the span's status unless this composition has settled it.
func (span *serverSpan) SetStatus(code codes.Code, description string) {
	if !span.settled.Load() {
		span.Span.SetStatus(code, description)
	}
}

// settle sets status Error with description, kept over later SetStatus
// calls.
func (span *serverSpan) settle(description string) {
	span.settled.Store(true)
	span.Span.SetStatus(codes.Error, description)
}

// ms converts d to whole milliseconds, rounded to the nearest, like every
// other _ms attribute of otelbudget.
func ms(d time.Duration) int64 { return d.Round(time.Millisecond).Milliseconds() }

// dur formats d for a status description: to the millisecond ("80ms",
// "1.5s"), or as it is below one ("300µs").
func dur(d time.Duration) string {
	if d < time.Millisecond && d > -time.Millisecond {
		return d.String()
	}
	return d.Round(time.Millisecond).String()
}

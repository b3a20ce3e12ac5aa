package otelbudget

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// Observer turns the [deadline.Hooks] of every call it observes into
// OpenTelemetry spans and metrics: one span per logical call, one child span
// per attempt, the budget attributes, and the [Verdict].
//
// An Observer is safe for concurrent use by any number of calls; build one
// per application (or per provider pair) with [New] and share it. It keeps
// no per-call state of its own: what a call needs travels in the contexts
// the hooks return.
type Observer struct {
	tp      trace.TracerProvider
	mp      metric.MeterProvider
	tracer  trace.Tracer
	tracing bool // false with a no-op tracer: no span work at all
	metrics bool // false with a no-op meter
	inst    instruments
	cache   caches
	// internal is the call span's start option, built once.
	internal []trace.SpanStartOption

	hooks    *deadline.Hooks
	client   *deadline.Hooks
	clientTP *clientTracerProvider // HTTP: attempt spans count resends
	rpcTP    *clientTracerProvider // RPC: they do not
}

// New returns an Observer whose tracer and meter come from the configured
// providers (the global ones by default) under the instrumentation scope
// [ScopeName] at [Version]. Instruments are created once, here.
//
// With a no-op TracerProvider (go.opentelemetry.io/otel/trace/noop) the
// observer starts no span and allocates nothing for tracing; with a no-op
// MeterProvider (go.opentelemetry.io/otel/metric/noop) it records nothing;
// with both, its hooks are nil. Metrics alone allocate nothing per call:
// their attribute sets are built once per step and outcome.
func New(opts ...Option) *Observer {
	c := newConfig(opts)
	o := &Observer{tp: c.tp, mp: c.mp, internal: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}}
	o.tracer = c.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(version))
	_, off := o.tracer.(tracenoop.Tracer)
	o.tracing = !off
	meter := c.mp.Meter(ScopeName, metric.WithInstrumentationVersion(version))
	_, off = meter.(metricnoop.Meter)
	o.metrics = !off
	if o.metrics {
		o.inst = newInstruments(meter)
	}
	o.clientTP = &clientTracerProvider{TracerProvider: c.tp, o: o, resend: true}
	o.rpcTP = &clientTracerProvider{TracerProvider: c.tp, o: o}
	o.hooks = o.newHooks(false)
	o.client = o.newHooks(true)
	return o
}

// Hooks returns the hooks that produce the observer's spans and metrics.
// Install them on a policy ([deadline.Policy.Hooks]) or a context
// ([deadline.WithHooks]); compose them with others with [deadline.Compose].
// Every call returns the same value. The package documentation says which
// hooks to attach where; attaching the observer twice to one call is
// harmless.
//
// CallStart starts the call span (kind INTERNAL, named by the step, or
// "deadline.call" when the policy has no name). AttemptStart starts a child
// span per attempt (kind INTERNAL, named "<step> attempt") and returns the
// context that carries it, so whatever the operation starts is the
// attempt's child. AttemptEnd records how the attempt ended; Backoff adds
// the wait chosen after it to the failed attempt's span and an event to the
// call span; CallEnd sets the call attributes and the verdict and ends the
// call span. Every span started is ended, also when the operation panics.
//
// With a no-op TracerProvider and a no-op MeterProvider there is nothing to
// observe and Hooks returns nil, which every place that takes hooks accepts
// ([deadline.Policy.Hooks], [deadline.WithHooks], [deadline.Compose]), so the
// engine runs exactly as it does unobserved.
func (o *Observer) Hooks() *deadline.Hooks { return o.hooks }

// ClientHooks returns hooks like [Observer.Hooks] but for operations whose
// attempts a client instrumentation records with one span per physical
// request: otelhttp for HTTP, otelgrpc's client stats handler for gRPC.
// AttemptStart starts no span; it leaves the attempt in the context it
// returns, and the first span started in that context by a tracer of
// [Observer.ClientTracerProvider] (HTTP) or
// [Observer.RPCClientTracerProvider] (RPC) becomes the attempt's span,
// carrying the attempt attributes as a child of the call span. An attempt
// that no such span claims (the operation failed before its request was
// sent) gets an INTERNAL "<step> attempt" span at AttemptEnd, so none is
// lost.
//
// The hooks are the same for every protocol: which provider's tracer
// claims the attempt decides what its span carries beside the attempt
// attributes (http.request.resend_count for HTTP, nothing for RPC).
//
// Use them together with one of those providers; package otelbudgethttp
// does this for net/http, and the gRPC composition
// (otelbudget/otelbudgetgrpc) for gRPC. When the same call is also
// observed through [Observer.Hooks] of this observer, ClientHooks decide:
// the attempts are the client's spans. Like Hooks, it returns nil when both
// providers are no-ops.
func (o *Observer) ClientHooks() *deadline.Hooks { return o.client }

// ClientTracerProvider returns a TracerProvider to give the HTTP client
// instrumentation used under [Observer.ClientHooks]. It wraps the observer's
// own provider: spans started outside an attempt's context, or after the
// attempt's span, pass through untouched. The span that claims an attempt
// starts with the attempt attributes and, on every attempt after the first,
// http.request.resend_count (number - 1); it comes back wrapped, and only
// its End and SetStatus are held: the real span is ended once both its
// instrumentation has ended it (the end timestamp is the one it asked for)
// and the attempt's outcome attributes are set, whichever comes last, so it
// does not matter whether the instrumentation ends it before the engine's
// hooks run (a failed request, a drained retryable response) or after (a
// body the caller reads). A caller's cancellation does not set its status to
// Error. Every other method, including any the trace API adds later, is the
// real span's.
func (o *Observer) ClientTracerProvider() trace.TracerProvider { return o.clientTP }

// RPCClientTracerProvider returns a TracerProvider to give an RPC client
// instrumentation (otelgrpc's client stats handler) used under
// [Observer.ClientHooks]. It is [Observer.ClientTracerProvider] in every
// respect but one: the span that claims an attempt carries no
// http.request.resend_count, an HTTP attribute. The semantic conventions
// define no resend count for RPC; deadline.attempt.number says it (1 for
// the first attempt, so the resend count is the number less one).
//
// Both providers may serve one observer at once (an HTTP client and a gRPC
// connection): whichever claims an attempt decides what its span carries.
// The observer does not depend on gRPC; any RPC instrumentation that starts
// one span per physical call in the context it is given works.
func (o *Observer) RPCClientTracerProvider() trace.TracerProvider { return o.rpcTP }

// TracerProvider returns the TracerProvider the observer was built with
// (the global one at the time of New by default).
func (o *Observer) TracerProvider() trace.TracerProvider { return o.tp }

// MeterProvider returns the MeterProvider the observer was built with (the
// global one at the time of New by default), for instrumentation composed
// with it, such as otelhttp's client metrics.
func (o *Observer) MeterProvider() metric.MeterProvider { return o.mp }

func (o *Observer) newHooks(client bool) *deadline.Hooks {
	if !o.tracing && !o.metrics {
		// Nothing to observe: nil hooks cost the engine nothing at all.
		return nil
	}
	h := &deadline.Hooks{
		AttemptEnd: o.attemptEnd,
		CallEnd:    o.callEnd,
	}
	if o.tracing {
		h.Backoff = o.backoff
		// AttemptStart is the same for both: the call knows since its
		// CallStart whether ClientHooks observe it.
		h.AttemptStart = o.attemptStart
		if client {
			h.CallStart = o.callStartClient
		} else {
			h.CallStart = o.callStartOwn
		}
	}
	return h
}

// callKey finds a call's state in the contexts the hooks return; it holds
// the observer so that two observers composed on one call keep apart.
type callKey struct{ o *Observer }

// call is the state of one observed call, from CallStart to CallEnd. The
// engine runs the hooks of one call on one goroutine, one after the other
// (hedged attempts included: their hooks interleave, they never run at
// once), so it needs no lock.
//
// The counters make a second attachment of the same observer to the same
// call harmless: the composed hooks run once per attachment, and every run
// after the first finds its event already recorded.
type call struct {
	name     string     // CallInfo.Name and Start: what tells a second
	start    time.Time  // attachment from a call nested in the operation
	span     trace.Span // nil when the call span is not recording
	client   bool       // attached through ClientHooks at least once
	attempts int        // the latest attempt started
	measured uint64     // attempts 1 to 64 whose end was recorded, a bit each
	measure  int        // past 64: the latest attempt whose end was recorded
	backoffs int        // the latest attempt whose backoff was recorded
	ended    bool       // CallEnd was recorded
	cur      *attempt   // the latest attempt, until its span is settled
	// earlier holds, with hedging, the attempts that were still open when
	// a later one started (a hedge): attempts overlap, and each is found
	// by its number. Nil without hedging.
	earlier []*attempt
}

// endSeen records that attempt n's end was recorded and reports whether it
// already was. Hedged attempts end in any order; past 64 attempts it falls
// back to the latest number, enough for attempts that do not overlap.
func (c *call) endSeen(n int) bool {
	if n >= 1 && n <= 64 {
		bit := uint64(1) << (n - 1)
		seen := c.measured&bit != 0
		c.measured |= bit
		return seen
	}
	if n <= c.measure {
		return true
	}
	c.measure = n
	return false
}

// open returns the attempt numbered n still held by the call, or nil.
func (c *call) open(n int) *attempt {
	if c.cur != nil && c.cur.info.Number == n {
		return c.cur
	}
	for _, at := range c.earlier {
		if at.info.Number == n {
			return at
		}
	}
	return nil
}

// hold makes at the call's latest attempt, keeping the previous one when it
// has not ended yet (a hedge started beside it).
func (c *call) hold(at *attempt) {
	if prev := c.cur; prev != nil {
		prev.mu.Lock()
		running := prev.outcome == 0
		prev.mu.Unlock()
		if running {
			c.earlier = append(c.earlier, prev)
		}
	}
	c.cur = at
}

func (o *Observer) callState(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{o}).(*call)
	return c
}

func (o *Observer) callStartOwn(ctx context.Context, c deadline.CallInfo) context.Context {
	return o.callStart(ctx, c, false)
}

func (o *Observer) callStartClient(ctx context.Context, c deadline.CallInfo) context.Context {
	return o.callStart(ctx, c, true)
}

// callStart starts the call span, unless ctx already carries this
// observer's state for the very same call: the same name and start instant
// (CallInfo) and no attempt started yet. That is the observer attached twice
// (policy, transport, context) and reached again through the composed
// hooks, not a call nested in another's operation, which always starts
// after its parent's first attempt.
func (o *Observer) callStart(ctx context.Context, info deadline.CallInfo, client bool) context.Context {
	if c := o.callState(ctx); c != nil && c.attempts == 0 && !c.ended && c.start.Equal(info.Start) && c.name == info.Name {
		c.client = c.client || client
		return nil
	}
	name := info.Name
	if name == "" {
		name = "deadline.call"
	}
	ctx, span := o.tracer.Start(ctx, name, o.internal...)
	if !span.IsRecording() {
		// Sampled out: the span still parents what follows (its context
		// propagates), but no attempt span or attribute is worth building.
		// The state is kept only so that the metrics count a call once.
		if !o.metrics {
			return ctx
		}
		return context.WithValue(ctx, callKey{o}, &call{name: info.Name, start: info.Start, client: client})
	}
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs,
		AttrStep.String(info.Name),
		AttrBudgetMs.Int64(ms(info.Budget)),
		AttrRemainingAtStartMs.Int64(ms(info.Remaining)),
		AttrFloorMs.Int64(ms(info.Floor)),
		AttrMaxAttempts.Int(info.MaxAttempts),
	)
	if info.Ceiling > 0 {
		attrs = append(attrs, AttrCeilingMs.Int64(ms(info.Ceiling)))
	}
	span.SetAttributes(attrs...)
	return context.WithValue(ctx, callKey{o}, &call{name: info.Name, start: info.Start, span: span, client: client})
}

func (o *Observer) attemptStart(ctx context.Context, a deadline.AttemptInfo) context.Context {
	c := o.callState(ctx)
	if c == nil || a.Number <= c.attempts {
		// Not observed, or the same attempt reached through a second
		// attachment: ctx already carries its span.
		return nil
	}
	c.attempts = a.Number
	if c.span == nil {
		return nil
	}
	if c.client {
		return o.pendClientAttempt(ctx, c, a)
	}
	at := &attempt{o: o, info: a}
	c.hold(at)
	ctx, at.span = o.tracer.Start(ctx, o.cache.attemptName(a.Name),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(a.Start),
		trace.WithAttributes(at.startAttrs(false)...))
	return ctx
}

// attemptKey finds a pending attempt in the context [Observer.ClientHooks]
// returns.
type attemptKey struct{ o *Observer }

// pendClientAttempt leaves the attempt in the context for the first span a
// tracer of ClientTracerProvider starts in it.
func (o *Observer) pendClientAttempt(ctx context.Context, c *call, a deadline.AttemptInfo) context.Context {
	at := &attempt{o: o, info: a, client: true, parent: ctx}
	c.hold(at)
	return context.WithValue(ctx, attemptKey{o}, at)
}

func (o *Observer) attemptEnd(ctx context.Context, a deadline.AttemptInfo, r deadline.AttemptResult) {
	c := o.callState(ctx)
	if c != nil && c.endSeen(a.Number) {
		return
	}
	if o.metrics {
		o.inst.attemptDuration.Record(ctx, r.Duration.Seconds(), o.cache.attemptOpts(attemptMetricKey{a.Name, r.EndedBy})...)
	}
	if c != nil {
		if at := c.open(a.Number); at != nil {
			at.finish(r)
		}
	}
}

func (o *Observer) backoff(ctx context.Context, b deadline.BackoffInfo) {
	c := o.callState(ctx)
	if c == nil || c.span == nil || b.Attempt <= c.backoffs {
		return
	}
	c.backoffs = b.Attempt
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs,
		AttrAttemptNumber.Int(b.Attempt),
		AttrBackoffDelayMs.Int64(ms(b.Delay)),
		AttrBackoffSource.String(b.Source.String()),
		AttrBackoffFits.Bool(b.Fits),
	)
	if b.Source == deadline.SourceRetryAfter {
		attrs = append(attrs, AttrRetryAfterMs.Int64(ms(b.RetryAfter)))
	}
	if b.RetryBudget {
		attrs = append(attrs, AttrRetryBudgetDenied.Bool(b.RetryDenied), AttrRetryBudgetBalance.Int(b.RetryBalance))
	}
	if b.RefusedLearned {
		attrs = append(attrs, refusedAttrs(b.Lease, b.Estimate)...)
	}
	c.span.AddEvent(BackoffEventName, trace.WithAttributes(attrs...))
	if at := c.open(b.Attempt); at != nil {
		at.backoff(b)
	}
}

func (o *Observer) callEnd(ctx context.Context, r deadline.CallResult) {
	c := o.callState(ctx)
	if c != nil {
		if c.ended {
			return
		}
		c.ended = true
	}
	v := deadline.VerdictOf(r)
	if o.metrics {
		opts := o.cache.callOpts(callMetricKey{r.Name, r.Reason, v})
		o.inst.callDuration.Record(ctx, r.Duration.Seconds(), opts.rec...)
		o.inst.attempts.Record(ctx, int64(r.Attempts), opts.rec...)
		o.inst.slack.Record(ctx, max(r.Remaining, 0).Seconds(), opts.rec...)
		switch r.Reason {
		case deadline.ReasonRefused, deadline.ReasonRefusedLearned:
			o.inst.refusals.Add(ctx, 1, opts.add...)
		case deadline.ReasonRetryBudget:
			o.inst.denials.Add(ctx, 1, opts.add...)
		case deadline.ReasonLimited, deadline.ReasonOpen, deadline.ReasonThrottled:
			o.inst.limited.Add(ctx, 1, opts.all...)
		}
	}
	if c == nil || c.span == nil {
		return
	}
	if at := c.cur; at != nil {
		at.settle()
		c.cur = nil
	}
	for _, at := range c.earlier {
		at.settle()
	}
	c.earlier = nil
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs,
		AttrRemainingMs.Int64(ms(r.Remaining)),
		AttrAttempts.Int(r.Attempts),
		AttrStopReason.String(r.Reason.String()),
		AttrVerdict.String(string(v)),
		AttrCeilingTimeouts.Int(r.CeilingTimeouts),
		AttrDeadlineCuts.Int(r.DeadlineCuts),
	)
	if r.Hedges > 0 {
		attrs = append(attrs, AttrHedges.Int(r.Hedges))
	}
	// error.type says why the call did not succeed; the status says whether
	// that counts as an error, which a caller's cancellation does not.
	if r.Reason != deadline.ReasonSuccess {
		attrs = append(attrs, semconv.ErrorTypeKey.String(callErrorType(r.Reason)))
	}
	if r.Reason == deadline.ReasonRefusedLearned {
		attrs = append(attrs, refusedAttrs(r.Lease, r.Estimate)...)
	}
	if rf := r.Refusal; rf != nil {
		attrs = append(attrs, limitAttrs(rf)...)
	}
	if r.Reason == deadline.ReasonRetryBudget {
		attrs = append(attrs, AttrRetryBudgetDenied.Bool(true))
		if se, ok := r.Err.(*deadline.StopError); ok {
			attrs = append(attrs, AttrRetryBudgetBalance.Int(se.Balance))
		}
	}
	switch {
	case r.Reason == deadline.ReasonSuccess, r.Reason == deadline.ReasonCanceled:
	case r.Err != nil:
		c.span.SetStatus(codes.Error, r.Err.Error())
	default:
		c.span.SetStatus(codes.Error, r.Reason.String())
	}
	c.span.SetAttributes(attrs...)
	c.span.End()
}

// limitAttrs says why a limiter or throttling refused an attempt.
func limitAttrs(rf *overload.RefusedError) []attribute.KeyValue {
	attrs := []attribute.KeyValue{AttrLimitCause.String(rf.Cause.String())}
	switch rf.Cause {
	case overload.CauseQueueFull, overload.CauseQueueTimeout:
		attrs = append(attrs, AttrLimitLimit.Int(rf.Limit), AttrLimitQueuePosition.Int(rf.Position), AttrLimitWaitedMs.Int64(ms(rf.Waited)))
	case overload.CauseOpen:
		attrs = append(attrs, AttrLimitLimit.Int(rf.Limit))
	}
	return attrs
}

// refusedAttrs says why the learned floor refused an attempt.
func refusedAttrs(lease time.Duration, e deadline.Estimate) []attribute.KeyValue {
	return []attribute.KeyValue{
		AttrRefusedLeaseMs.Int64(ms(lease)),
		AttrRefusedCompletionProbability.Float64(e.P),
		AttrRefusedCompletionSamples.Int64(int64(e.Samples)),
	}
}

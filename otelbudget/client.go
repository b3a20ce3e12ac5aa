package otelbudget

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The client side wraps the observer's provider, its tracers and the one
// span per attempt that a client instrumentation (otelhttp, otelgrpc)
// starts, so that the attempt decides when that span really ends. Each wrapper embeds the
// real interface value and overrides only what it must: every other method,
// including any the trace API adds later, goes straight to the real one.

// clientTracerProvider is [Observer.ClientTracerProvider] (resend: HTTP)
// and [Observer.RPCClientTracerProvider].
type clientTracerProvider struct {
	trace.TracerProvider // the observer's own provider
	o                    *Observer
	resend               bool // its attempt spans carry http.request.resend_count
}

// Tracer returns a tracer of the observer's provider under the client
// instrumentation's own scope, wrapped so that its first span in an
// attempt's context becomes the attempt span.
func (p *clientTracerProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return &clientTracer{Tracer: p.TracerProvider.Tracer(name, opts...), o: p.o, resend: p.resend}
}

type clientTracer struct {
	trace.Tracer
	o      *Observer
	resend bool
}

// Start starts a span of the real tracer. In an attempt's context that no
// span has claimed yet, the span gets the attempt attributes at start and
// comes back wrapped so that the attempt decides when it really ends.
func (t *clientTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	at, _ := ctx.Value(attemptKey{t.o}).(*attempt)
	if at == nil {
		return t.Tracer.Start(ctx, name, opts...)
	}
	var sctx context.Context
	span, ok := at.claim(func() trace.Span {
		all := make([]trace.SpanStartOption, 0, len(opts)+1)
		all = append(append(all, opts...), trace.WithAttributes(at.startAttrs(t.resend)...))
		var s trace.Span
		sctx, s = t.Tracer.Start(ctx, name, all...)
		return s
	})
	if !ok {
		return t.Tracer.Start(ctx, name, opts...)
	}
	cs := &clientSpan{Span: span, at: at}
	return trace.ContextWithSpan(sctx, cs), cs
}

// clientSpan is a claimed client span: End and SetStatus go through the
// attempt, which holds them until its outcome is known; every other method
// is the real span's.
type clientSpan struct {
	trace.Span
	at *attempt
}

func (s *clientSpan) End(opts ...trace.SpanEndOption) { s.at.clientEnd(opts) }

func (s *clientSpan) SetStatus(code codes.Code, desc string) { s.at.clientStatus(code, desc) }

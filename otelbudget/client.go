package otelbudget

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// clientTracerProvider wraps the observer's TracerProvider for a client
// instrumentation used under [Observer.ClientHooks].
type clientTracerProvider struct {
	embedded.TracerProvider
	o *Observer
}

// Tracer returns a tracer of the observer's provider under the client
// instrumentation's own scope, wrapped so that its first span in an
// attempt's context becomes the attempt span.
func (p *clientTracerProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return &clientTracer{tp: p, t: p.o.tp.Tracer(name, opts...)}
}

type clientTracer struct {
	embedded.Tracer
	tp *clientTracerProvider
	t  trace.Tracer
}

// Start starts a span of the wrapped tracer. In an attempt's context that no
// span has claimed yet, the span gets the attempt attributes at start and
// comes back wrapped so that the attempt decides when it really ends.
func (t *clientTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	at, _ := ctx.Value(attemptKey{t.tp.o}).(*attempt)
	if at == nil {
		return t.t.Start(ctx, name, opts...)
	}
	var sctx context.Context
	span, ok := at.claim(func() trace.Span {
		all := make([]trace.SpanStartOption, 0, len(opts)+1)
		all = append(append(all, opts...), trace.WithAttributes(at.startAttrs()...))
		var s trace.Span
		sctx, s = t.t.Start(ctx, name, all...)
		return s
	})
	if !ok {
		return t.t.Start(ctx, name, opts...)
	}
	cs := &clientSpan{span: span, at: at, tp: t.tp}
	return trace.ContextWithSpan(sctx, cs), cs
}

// clientSpan is a claimed client span: End and SetStatus go through the
// attempt; everything else goes straight to the span.
type clientSpan struct {
	embedded.Span
	span trace.Span
	at   *attempt
	tp   *clientTracerProvider
}

func (s *clientSpan) End(opts ...trace.SpanEndOption) { s.at.clientEnd(opts) }

func (s *clientSpan) SetStatus(code codes.Code, desc string) { s.at.clientStatus(code, desc) }

func (s *clientSpan) AddEvent(name string, opts ...trace.EventOption) { s.span.AddEvent(name, opts...) }

func (s *clientSpan) AddLink(l trace.Link) { s.span.AddLink(l) }

func (s *clientSpan) IsRecording() bool { return s.span.IsRecording() }

func (s *clientSpan) RecordError(err error, opts ...trace.EventOption) {
	s.span.RecordError(err, opts...)
}

func (s *clientSpan) SpanContext() trace.SpanContext { return s.span.SpanContext() }

func (s *clientSpan) SetName(name string) { s.span.SetName(name) }

func (s *clientSpan) SetAttributes(kv ...attribute.KeyValue) { s.span.SetAttributes(kv...) }

func (s *clientSpan) TracerProvider() trace.TracerProvider { return s.tp }

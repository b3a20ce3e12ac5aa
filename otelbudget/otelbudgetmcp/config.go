package otelbudgetmcp

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// Option configures the spans of [ClientMiddleware] and [ServerMiddleware].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	prop propagation.TextMapPropagator
}

// WithPropagators sets the propagator that carries the trace context in a
// request's _meta. The default is the global one
// (otel.GetTextMapPropagator, read once when the middleware is built), as
// otelhttp's and otelgrpc's default; a nil p keeps it.
func WithPropagators(p propagation.TextMapPropagator) Option {
	return optionFunc(func(c *config) {
		if p != nil {
			c.prop = p
		}
	})
}

func newConfig(opts []Option) config {
	c := config{prop: otel.GetTextMapPropagator()}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

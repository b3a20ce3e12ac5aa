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
	prop      propagation.TextMapPropagator
	transport string
}

// WithNetworkTransport sets network.transport on every span: "tcp" (or
// "quic") for MCP over HTTP, "pipe" for stdio, as the MCP conventions say
// (genai.NetworkTransportTCP, genai.NetworkTransportPipe). Without it, a
// client span gets the value [Transport] finds for its transport, and a
// server span "tcp" when the request came over HTTP; otherwise none. An
// empty v keeps the default.
func WithNetworkTransport(v string) Option {
	return optionFunc(func(c *config) {
		if v != "" {
			c.transport = v
		}
	})
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

package mcpspan

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// Option configures the spans of an SDK adapter (otelbudgetmcp,
// otelbudgetmcpgo): both take these options.
type Option interface{ apply(*Config) }

type optionFunc func(*Config)

func (f optionFunc) apply(c *Config) { f(c) }

// Config is what the options set, as an adapter reads it ([NewConfig]).
type Config struct {
	// Propagator carries the trace context in a request's _meta.
	Propagator propagation.TextMapPropagator
	// Network is network.transport for every span, "" to let the adapter
	// find it.
	Network string
}

// WithNetworkTransport sets network.transport on every span: "tcp" (or
// "quic") for MCP over HTTP, "pipe" for stdio, as the MCP conventions say
// (genai.NetworkTransportTCP, genai.NetworkTransportPipe). Without it, a
// client span gets the value the adapter finds for its transport, and a
// server span "tcp" when the request came over HTTP; otherwise none. An
// empty v keeps the default.
func WithNetworkTransport(v string) Option {
	return optionFunc(func(c *Config) {
		if v != "" {
			c.Network = v
		}
	})
}

// WithPropagators sets the propagator that carries the trace context in a
// request's _meta. The default is the global one
// (otel.GetTextMapPropagator, read once when the adapter is built), as
// otelhttp's and otelgrpc's default; a nil p keeps it.
func WithPropagators(p propagation.TextMapPropagator) Option {
	return optionFunc(func(c *Config) {
		if p != nil {
			c.Propagator = p
		}
	})
}

// NewConfig applies opts (nil ones ignored) to the defaults.
func NewConfig(opts []Option) Config {
	c := Config{Propagator: otel.GetTextMapPropagator()}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

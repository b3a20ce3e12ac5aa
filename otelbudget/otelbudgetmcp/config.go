package otelbudgetmcp

import (
	"go.opentelemetry.io/otel/propagation"

	"github.com/deadlinebudget/budget/otelbudget/mcpspan"
)

// Option configures the spans of [ClientMiddleware] and [ServerMiddleware]:
// [mcpspan.Option], which otelbudgetmcpgo takes too.
type Option = mcpspan.Option

// WithNetworkTransport is [mcpspan.WithNetworkTransport]: network.transport
// on every span. Without it, a client span gets the value [Transport]
// finds for its transport, and a server span "tcp" when the request came
// over HTTP.
func WithNetworkTransport(v string) Option { return mcpspan.WithNetworkTransport(v) }

// WithPropagators is [mcpspan.WithPropagators]: the propagator that carries
// the trace context in a request's _meta (default: the global one).
func WithPropagators(p propagation.TextMapPropagator) Option { return mcpspan.WithPropagators(p) }

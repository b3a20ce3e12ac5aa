package otelbudgethttp

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/otelbudget"
)

// NewTransport returns a [deadlinehttp.Transport] whose physical attempts go
// through otelhttp over base, observed by obs:
//
//	deadlinehttp.NewTransport(NewBase(base, obs),
//		deadlinehttp.WithHooks(obs.ClientHooks()), opts...)
//
// Every request runs under deadline.Do with the policy and options in opts
// (see [deadlinehttp.NewTransport]). obs records one INTERNAL span per
// logical call; otelhttp records one CLIENT span per physical request, which
// becomes that attempt's span: it carries the deadline.attempt.* attributes
// and http.request.resend_count and is a child of the call span. otelhttp
// propagates the trace context with the global propagator
// (otel.GetTextMapPropagator), as it does by default, and records its client
// metrics on obs's MeterProvider.
//
// A nil base means http.DefaultTransport; a nil obs means otelbudget.New()
// (the global providers). There is nothing else to attach: obs's hooks
// attached again (on the policy, on the request's context, as another
// transport option) are harmless, the call is still recorded once. As with
// any RoundTripper the caller must close the response body; the request's
// CLIENT span ends when it does. The transport's CloseIdleConnections (which
// http.Client.CloseIdleConnections calls) reaches base.
func NewTransport(base http.RoundTripper, obs *otelbudget.Observer, opts ...deadlinehttp.Option) *deadlinehttp.Transport {
	if obs == nil {
		obs = otelbudget.New()
	}
	all := make([]deadlinehttp.Option, 0, len(opts)+1)
	all = append(all, deadlinehttp.WithHooks(obs.ClientHooks()))
	all = append(all, opts...)
	if base == nil {
		base = http.DefaultTransport
	}
	return deadlinehttp.NewTransport(idleCloser{NewBase(base, obs), base}, all...)
}

// idleCloser forwards CloseIdleConnections, which otelhttp's transport does
// not have, to the base transport, so that http.Client.CloseIdleConnections
// reaches the connection pool.
type idleCloser struct {
	*otelhttp.Transport
	base http.RoundTripper
}

func (t idleCloser) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// NewBase returns the otelhttp transport over base that [NewTransport]
// sends attempts with: otelhttp.NewTransport(base,
// otelhttp.WithTracerProvider(obs.ClientTracerProvider()),
// otelhttp.WithMeterProvider(obs.MeterProvider()), opts...). Use it to pass
// otelhttp options (opts come last and win), then give it to
// deadlinehttp.NewTransport with deadlinehttp.WithHooks(obs.ClientHooks()).
//
// Outside a call observed with obs.ClientHooks() it is plain otelhttp. A nil
// base means http.DefaultTransport; a nil obs means otelbudget.New().
func NewBase(base http.RoundTripper, obs *otelbudget.Observer, opts ...otelhttp.Option) *otelhttp.Transport {
	if obs == nil {
		obs = otelbudget.New()
	}
	all := make([]otelhttp.Option, 0, len(opts)+2)
	all = append(all,
		otelhttp.WithTracerProvider(obs.ClientTracerProvider()),
		otelhttp.WithMeterProvider(obs.MeterProvider()))
	all = append(all, opts...)
	return otelhttp.NewTransport(base, all...)
}

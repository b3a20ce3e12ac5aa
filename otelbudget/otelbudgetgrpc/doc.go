// Package otelbudgetgrpc composes the budget-aware gRPC interceptors of
// package deadlinegrpc with otelgrpc's stats handlers and an
// [otelbudget.Observer], so that a trace of a gRPC call answers the same
// question as one of an HTTP call: was the deadline too small, or the
// operation too slow?
//
// On the client ([DialOptions]) every RPC made through the connection is
// recorded as one INTERNAL call span (named by the method, e.g.
// "pkg.Service/Get") with the budget, the stop reason and the verdict, and
// one otelgrpc CLIENT span per physical attempt, a child of the call span,
// carrying the attempt attributes (deadline.attempt.number, granted_ms,
// remaining_ms, limited_by, ended_by, retryable, and the backoff and the
// server's pushback as deadline.backoff.* and deadline.retry_after_ms). The
// verdict rules are those of [otelbudget] ([deadline.VerdictOf]).
//
// The semantic conventions define no resend count for RPC spans (HTTP has
// http.request.resend_count): a gRPC attempt span carries
// deadline.attempt.number instead (1 for the first attempt, so the resend
// count is that number less one), and no http.* attribute: otelgrpc is given
// the observer's [otelbudget.Observer.RPCClientTracerProvider]. The calls
// are observed by the observer given to [DialOptions] itself, so the same
// observer's hooks attached again (on a policy or the caller's context)
// record nothing twice.
//
// On the server ([ServerOptions]) otelgrpc's SERVER span carries what the
// server decided about the RPC's budget, with the keys of the HTTP server
// composition ([otelbudget.AttrServerInboundBudgetMs],
// [otelbudget.AttrServerMaxBudgetMs], [otelbudget.AttrServerBudgetMs],
// [otelbudget.AttrServerLimitedBy], [otelbudget.AttrServerFloorMs], and on a
// refusal [otelbudget.AttrServerRefused] and [otelbudget.AttrServerRefusal]).
//
// The package imports the OpenTelemetry API only; the application chooses
// the SDK and the exporters. otelgrpc injects and extracts the trace context
// with the global propagator unless told otherwise (otelgrpc.WithPropagators).
package otelbudgetgrpc

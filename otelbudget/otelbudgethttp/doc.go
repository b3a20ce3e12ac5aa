// Package otelbudgethttp composes the deadline budget's HTTP transport
// and handler (package deadlinehttp) with OpenTelemetry's HTTP
// instrumentation (otelhttp) and the otelbudget observer, in one line each.
//
// A trace of an HTTP call made under a budget then has exactly:
//
//   - one call span per logical call, kind INTERNAL, with the budget, the
//     stop reason and the verdict, and no http.* attribute (the semantic
//     conventions forbid an HTTP-shaped logical parent);
//   - one semantic-conventions HTTP CLIENT span per physical request,
//     otelhttp's own, as a child of the call span, carrying
//     http.request.resend_count (1, 2, … on resends; absent on the first) and
//     the deadline.attempt.* attributes: no duplicate span per attempt.
//
// The composition is one line:
//
//	client := &http.Client{Transport: otelbudgethttp.NewTransport(http.DefaultTransport, obs, deadlinehttp.WithPolicy(p))}
//
// It is built on [otelbudget.Observer.ClientHooks] and
// [otelbudget.Observer.ClientTracerProvider]; see [NewTransport] and
// [NewBase] for how.
//
// # Server
//
// [NewHandler] is the server side: otelhttp's handler (one SERVER span per
// request, the child of the caller's CLIENT span through the propagated
// trace context) around [deadlinehttp.NewHandler] around the application's
// handler:
//
//	h, err := otelbudgethttp.NewHandler(mux, "api", obs, deadlinehttp.WithFloor(20*time.Millisecond))
//
// The SERVER span then shows the budget: the one the request's header
// asked for, the server's maximum, the effective budget and which limit
// set it, the floor, and a refusal (504) as an Error with its reason and a
// description. When the handler's lease ends while it runs, the span says
// so (deadline.server.ended_by, status Error "the handler's lease ended
// (budget 80ms)") instead of leaving only a status code or an exception
// event. Metrics count refusals and clamps and record the effective
// budgets. With no-op providers the composition adds no allocation to a
// request. [NewHandlerWith] passes otelhttp options. docs/attributes.md
// ("Server spans") lists every attribute.
package otelbudgethttp

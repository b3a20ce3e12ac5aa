// Package otelbudgethttp composes the deadline budget's HTTP transport
// (package deadlinehttp), OpenTelemetry's HTTP client instrumentation
// (otelhttp) and the otelbudget observer, so that a trace of an HTTP call
// made under a budget has exactly:
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
package otelbudgethttp

// Package otelbudget turns the hooks of package deadline into OpenTelemetry
// spans and metrics, so that a trace answers the incident question: was the
// deadline too small, or was the operation too slow?
//
// An [Observer] built by [New] produces, for every call of [deadline.Do] it
// observes:
//
//   - one span per logical call, kind INTERNAL, named by the step
//     ([deadline.Policy.Name]), carrying the budget, what was left at the end,
//     the attempts, the stop reason and the [Verdict];
//   - one child span per attempt, carrying its number, ceiling, granted lease,
//     the budget left at its start, which limit bound the lease, what ended
//     it, whether its error was retryable, the Retry-After a server asked for
//     and the backoff chosen after it, and http.request.resend_count on every
//     attempt after the first. The attempt span is the parent of whatever the
//     operation does;
//   - metrics: call and attempt durations, attempts per call, refusals, and
//     the budget left at the end of a call (the slack histogram).
//
// The project's attributes live under the one namespace "deadline." with
// durations as integer milliseconds named "_ms"; http.request.resend_count
// and error.type come from the semantic conventions (v1.43.0). Status is
// Error only on failed attempts and on a call's final failure; a caller's
// cancellation is not an error. docs/attributes.md lists every attribute and
// metric.
//
// For HTTP, package otelbudgethttp composes the observer with otelhttp so
// that each physical request is exactly one semantic-conventions CLIENT span
// carrying the attempt attributes, a child of the call span; it is built on
// [Observer.ClientHooks] and [Observer.ClientTracerProvider].
//
// The package imports the OpenTelemetry API only, never the SDK or an
// exporter: the application chooses those. The providers default to the
// global ones.
package otelbudget

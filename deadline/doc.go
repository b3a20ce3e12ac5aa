// Package deadline keeps every retry of a run inside one shared deadline.
//
// A request handler or an agent run decides one [Deadline] (an instant on the
// monotonic clock) once, at the top. Every step below derives its limits from
// what is left of it:
//
//   - an attempt gets a lease: granted = min(ceiling, remaining - floor);
//   - when remaining <= floor the attempt is refused locally instead of started;
//   - a backoff sleep is spending: it is capped, jittered, and checked against
//     the budget before it starts;
//   - a server's Retry-After replaces the local backoff, is never shortened, and
//     gives up at once when it would outlast the deadline;
//   - only work the classifier calls safe is retried.
//
// Two entry points share those rules. [Call] is the minimal contract: retry an
// operation marked [Retryable] at once, inside a fresh [Deadline.Scope], until
// it succeeds, runs out of retries, or runs out of time. [Do] applies a full
// [Policy]: leases, refusal below a floor, budget-checked backoff with jitter,
// Retry-After, and typed stop reasons ([StopError], [Reason]).
//
// The retry loop reports what it does through [Hooks], a struct of optional
// callbacks modelled on net/http/httptrace.ClientTrace: free when none is
// installed, composable, and carried by the context ([WithHooks]) or by the
// policy ([Policy.Hooks]). [LogHooks] writes each attempt's granted lease and
// remaining budget to a log/slog logger; the otelbudget package turns the same
// hooks into OpenTelemetry spans. Both report the call's [Verdict]
// ([VerdictOf]), the answer to the incident question: was the deadline too
// small, or was the operation too slow?
//
// The receiving side, a server's admission of the budget its callers send
// (clamp, floor, refusal, learned service time, the admission queue), is
// package [github.com/deadlinebudget/budget/deadline/admission]; the HTTP
// and gRPC transports adapt it.
//
// The package imports the standard library only.
package deadline

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
//     and the backoff chosen after it. The attempt span is the parent of
//     whatever the operation does;
//   - metrics: call and attempt durations, attempts per call, refusals,
//     retries the shared retry budget denied, and the budget left at the end
//     of a call (the slack histogram).
//
// [Observer.StartRun] adds the span of a whole run of calls under one
// deadline (an agent's plan): [Run.End] records on it the budget, the time
// each step spent and its verdict, the step that exhausted the budget, and
// the run's outcome, so that any tracing backend shows the run's story on
// its root span.
//
// The project's attributes live under the one namespace "deadline." with
// durations as integer milliseconds named "_ms"; error.type comes from the
// semantic conventions (v1.43.0) and takes one of a fixed, documented set of
// values (attempt_timeout, deadline_exceeded, canceled, panic, a stop
// reason, an HTTP status code, _OTHER), with or without HTTP. Status is
// Error only on failed attempts and on a call's final failure; a caller's
// cancellation is not an error. docs/attributes.md lists every attribute and
// metric.
//
// For HTTP, package otelbudgethttp composes the observer with otelhttp so
// that each physical request is exactly one semantic-conventions CLIENT span
// carrying the attempt attributes and http.request.resend_count, a child of
// the call span; it is built on [Observer.ClientHooks] and
// [Observer.ClientTracerProvider]. For gRPC, package
// otelbudgetgrpc (module otelbudget/otelbudgetgrpc) does the same with
// otelgrpc, on [Observer.ClientHooks] and [Observer.RPCClientTracerProvider]:
// the attempt spans carry no http.* attribute (the semantic conventions have
// no RPC resend count; deadline.attempt.number says it).
//
// # Which hooks where
//
// Hooks can be attached in three places: a policy ([deadline.Policy.Hooks]),
// an HTTP transport or gRPC client (deadlinehttp.WithHooks,
// deadlinegrpc.WithHooks) and a context ([deadline.WithHooks], which reaches
// every call made under it, an HTTP transport's and a gRPC client's
// included).
//
//   - Your own operations (a query, a function): [Observer.Hooks], on their
//     policy, or on a context to observe every call made under it.
//   - HTTP: otelbudgethttp.NewTransport. It attaches [Observer.ClientHooks]
//     to the transport and gives otelhttp [Observer.ClientTracerProvider];
//     there is nothing else to attach.
//   - gRPC: otelbudgetgrpc.DialOptions. It attaches [Observer.ClientHooks]
//     to the client interceptors and gives otelgrpc
//     [Observer.RPCClientTracerProvider]; there is nothing else to attach.
//   - [Observer.ClientHooks] by hand only together with a client
//     instrumentation that uses [Observer.ClientTracerProvider] or
//     [Observer.RPCClientTracerProvider], as otelbudgethttp.NewBase does; not
//     on a context or on a policy that other operations share: their
//     attempts would get no span until they end, and what they start would
//     hang from the call span.
//
// Attaching the same observer more than once is harmless. A call reached
// through two attachments (Hooks twice, or Hooks and ClientHooks, in any of
// the three places) is recorded once: one call span, one span per attempt,
// one backoff event, metrics counted once; when ClientHooks is among them,
// the client instrumentation's spans are the attempt spans. The observer
// recognises the second attachment by the call's name and start instant
// ([deadline.CallInfo]) arriving again before any attempt; a call made
// inside another call's operation comes after that call's first attempt
// and is a call of its own, with its own spans. The one exception: with a
// no-op TracerProvider the hooks keep no state per call (so that metrics
// alone allocate nothing), and an observer attached twice then counts its
// metrics twice.
//
// # Metrics and histograms
//
// The duration histograms are in seconds with explicit bucket boundaries
// from 1 ms to 30 s. An application that wants base-2 exponential
// histograms, which a Collector can merge across instances, selects them in
// its SDK: a View on the instruments [DurationInstruments] lists, or for
// OTLP exporters the variable
// OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION=base2_exponential_bucket_histogram.
//
// The package imports the OpenTelemetry API only, never the SDK or an
// exporter: the application chooses those. The providers default to the
// global ones.
package otelbudget

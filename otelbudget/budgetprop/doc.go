// Package budgetprop carries the remaining budget across every hop that
// OpenTelemetry instruments, services and queues that do not use this
// project's transports included: a propagation.TextMapPropagator
// ([Propagator]) to compose with TraceContext and Baggage in the global
// propagator, and a queue consumer's helper ([Propagator.Consume]).
//
// Two fields travel (docs/propagation.md, "Across every hop"):
// [FieldBudget], the remaining budget in milliseconds at injection (the
// Deadline-Budget-Ms header of deadline/deadlinehttp, so that on HTTP a
// receiver with deadlinehttp.NewHandler and one with only this propagator
// agree), and [FieldExpiry], the same instant on the sender's wall clock
// in unix milliseconds.
//
//   - A direct hop (a server, through otelhttp or otelgrpc) uses the
//     relative budget: exact, on the receiver's monotonic clock, with no
//     clock agreement needed. The expiry only charges a relative value that
//     went stale on the way by more than the skew allowance.
//   - A pass-through service that has only otelhttp or otelgrpc and this
//     propagator charges the time it spent: Extract stores a
//     [deadline.Deadline] measured on its own clock, and its
//     instrumentation's Inject, on its outgoing calls, writes what is left.
//   - A queue consumer ([Propagator.Consume]) uses the expiry, so the time
//     the message waited is charged; its error is the hosts' clock skew. A
//     message whose budget is spent is not processed: Consume returns a
//     [RefusedError] for the application to acknowledge it as expired.
//
// On arrival both clamp to the receiver's maximum and refuse at or below
// its floor with the one admission rule of package deadline
// ([admission.Admit]); the decision is an [Extraction] in the context
// ([FromContext], [Check]) and attributes on the receiver's span
// ([Annotate]).
//
// The package imports the OpenTelemetry API only. A NATS adapter and its
// tests against an embedded NATS server are in the nested module
// otelbudget/budgetprop/budgetnats.
package budgetprop

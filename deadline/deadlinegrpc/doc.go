// Package deadlinegrpc keeps every gRPC retry inside one shared deadline:
// the same budget, leases, refusals and retries as package deadlinehttp,
// over gRPC.
//
// grpc-go already carries a deadline on the wire (grpc-timeout), but it
// sends the whole remaining time, keeps no floor, and its own retry policy
// backs off without looking at the caller's budget. A [Client]'s
// interceptors run every RPC under [deadline.Do]: each attempt's context
// deadline is its lease, so grpc-timeout carries the lease; only methods
// declared safe to repeat are retried, on UNAVAILABLE and
// RESOURCE_EXHAUSTED by default; the server's grpc-retry-pushback-ms is
// honoured like Retry-After; a hedging policy hedges idempotent unary
// methods; and a stop returns the last attempt's status unchanged, the
// reason reached by [StopOf]. The standard long-lived streams (health
// Watch, ORCA, reflection) and those of [WithExemptMethods] get no budget
// when their caller set none.
//
// A [Server]'s interceptors clamp the inbound deadline to the server's
// maximum, refuse at once what arrives at or below the floor, and put the
// [deadline.Deadline] in the handler's context, so that the handler's
// outgoing gRPC and HTTP calls spend the same budget.
//
// This package is its own module, so that programs that only speak HTTP
// never download gRPC; package otelbudgetgrpc (module
// otelbudget/otelbudgetgrpc) composes both sides with otelgrpc and
// otelbudget. docs/grpc.md describes the wire, the retry rules and the
// telemetry.
package deadlinegrpc

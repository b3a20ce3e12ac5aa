// Package deadlinehttp carries a run's deadline budget over HTTP: a client
// [Transport] that runs every request under [deadline.Do], and server
// middleware ([NewHandler]) that turns the budget a request arrives with
// into a local [deadline.Deadline].
//
// # On the wire
//
// Each attempt sends the lease it was granted, not the run's remaining
// budget, in one header ([DefaultHeader], "Deadline-Budget-Ms"): whole
// milliseconds, rounded up, 1 to 10 digits ([FormatBudget], [ParseBudget]).
// Only a duration crosses the wire, never an instant, so the two sides need
// no common clock. The receiver converts it to a local deadline on arrival,
// clamps it to its own maximum, refuses it with 504 and [RefusedHeader] when
// it is at or below its floor, ignores a malformed value, and can strip the
// header at a trust edge. docs/propagation.md in the repository describes
// the format and its precedents (gRPC grpc-timeout, Connect
// connect-timeout-ms, Envoy x-envoy-expected-rq-timeout-ms).
//
// # Client
//
// The [Transport] finds the run's deadline in the request's context
// ([deadline.FromContext]), retries only what RFC 9110 says is safe to
// repeat ([IsIdempotent], and a replayable body), honours Retry-After
// ([ParseRetryAfter]) without ever shortening it or waiting past the
// deadline, drains and closes every response it does not return, and
// reports every attempt to the [deadline.Hooks] of its policy, of
// [WithHooks] and of the request's context.
//
// # Server
//
// A handler wrapped by [NewHandler] finds the budget in its request's
// context, both as a [deadline.Deadline] and as the context's deadline, so
// a Transport used inside it spends what is left of the same budget: the
// next hop sees a smaller budget than this one received.
//
// The package imports the standard library and [deadline] only.
package deadlinehttp

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
// no common clock. The receiver reads the header as a list and keeps its
// smallest valid value, converts it to a local deadline on arrival, clamps
// it to its own maximum and to any deadline the request already has,
// refuses it with 504 and [RefusedHeader] when it is at or below its floor
// (an explicit 0 is a budget already spent), reports and ignores malformed
// values, and can strip the header at a trust edge. docs/propagation.md in
// the repository describes the format and its precedents (gRPC
// grpc-timeout, Connect connect-timeout-ms, Envoy
// x-envoy-expected-rq-timeout-ms).
//
// # Client
//
// The [Transport] finds the run's deadline in the request's context
// ([deadline.FromContext]), and the policy of the step that makes the
// request there too ([WithRequestPolicy]) or from the transport
// ([WithPolicyFunc], else [WithPolicy]), so one http.Client serves a whole
// service. It retries only what RFC 9110 says is safe to repeat
// ([IsIdempotent], and a replayable body), honours Retry-After
// ([ParseRetryAfter]) without ever shortening it or waiting past the
// deadline, and reports every attempt to the [deadline.Hooks] of the
// request's context, of its policy and of [WithHooks].
//
// It also follows the conventions of the LLM providers' APIs (OpenAI,
// Anthropic, Azure OpenAI), so that their SDKs can run with their own
// retries off and this transport as their HTTP client: a millisecond
// Retry-After ([RetryAfterMsHeader], [AzureRetryAfterMsHeader]), the
// server's own verdict on a retry ([ShouldRetryHeader]), and 529
// ([StatusOverloaded]) as an overload answer like 503.
//
// It keeps the [http.RoundTripper] contract: a call that ended on an answer
// returns it with a nil error, whatever its status. When that answer has a
// retryable status (a 503 after the last attempt, a 429 whose Retry-After
// does not fit, a 503 to a POST that is not safe to repeat), [StopOf]
// returns the [*deadline.StopError] that says why the transport stopped. An
// error means there was no answer to return: the call was refused below
// the floor, failed in transport, or reached the deadline first.
//
// Nothing outlives an attempt's lease: an answer discarded for a retry is
// drained within [MaxDrain] bytes and [MaxDrainTime], then closed; a
// streamed request body whose producer stalls ends with the lease; after a
// panic in a hook or the base transport, the lease, the response and the
// request body the call held are released before the panic goes on.
//
// # Server
//
// [NewHandler] checks its options once and returns an error
// ([*deadline.PolicyError]) for a contradictory or invalid one; the handler
// it returns never answers 500 on its own account. For each request it
// reads every line of the budget header, split at commas, and keeps the
// smallest valid value: a proxy that adds a line cannot raise the budget,
// and a duplicated line is read as itself, not as malformed. Invalid values
// are reported to [WithMalformed] (at most [MaxMalformedValue] bytes of
// them) and ignored.
//
// The effective budget is the smallest of the header's value, the server's
// maximum ([WithMaxBudget]) and the time left on a deadline the request's
// context already carries (an outer layer's). At or below the floor
// ([WithFloor]), or spent (a header of 0, an outer deadline already past),
// the request is refused with 504 and [RefusedHeader], and the body says
// only that the budget was too small. [WithAdmission] reports each decision
// as an [Admission], for telemetry.
//
// The floor can also be learned from traffic: with [WithLearnedAdmission]
// the middleware records each route's service time and refuses at once a
// request whose budget is below what its route very likely needs; with
// [WithAdmissionQueue] it runs a bounded number of requests at once, and a
// request that waits for a slot leaves refused, before starting, as soon as
// its budget can no longer cover its route's service time
// ([WithAdmissionLimiter]: the same with an adaptive limit). Both adapt
// [admission.Admitter], the server's one admission rule, shared with the
// gRPC interceptors.
//
// On the client side, [WithLimiter] bounds the requests in flight to a
// downstream with a [overload.Limiter] (one per downstream): a request waits
// for a slot only while it can still finish, and a refused one is not sent
// ([deadline.ReasonLimited], or [deadline.ReasonOpen] when its breaker is
// open). With [WithThrottle], 429, 503 and 529 answers drive client-side
// throttling ([overload.Throttle]).
//
// A handler wrapped by [NewHandler] finds the budget in its request's
// context, both as a [deadline.Deadline] and as the context's deadline, so
// a Transport used inside it spends what is left of the same budget: the
// next hop sees a smaller budget than this one received. When that context
// is done the caller has stopped waiting: the handler should return
// promptly, without a success it did not finish (see [NewHandler]). With
// [WithStripHeader] the handler receives a copy of the request without the
// header; the inbound request is never modified.
//
// The package imports the standard library and [deadline] only.
package deadlinehttp

// Package overload is the project's overload control, in parts you can
// see, each usable alone: it imports the standard library only, and
// package deadline's engine (Do, DoHedged), package admission and the
// transports use it through its exported API.
//
//   - [Limiter]: how many calls run at once against one downstream (or in
//     one server's handlers), and who waits. It holds the limit algorithm
//     (fixed, [WithFixedLimit], or adaptive: each route's latency against
//     its own baseline) apart from the enforcement (slots, the waiting
//     order, refusals): a call is admitted, from a free slot or a place in
//     the queue, only while it can still finish. [Limiter.Acquire] gives
//     a [Permit]; [Permit.Done] tells the limiter how the call ended
//     ([Outcome]).
//   - [Breaker]: opens on sustained failure over a sliding window, refuses
//     while open, then lets probes a caller's budget can carry decide
//     whether to close; its [State] and every [Transition] are observable.
//     A Limiter asks it before every call ([WithBreaker]).
//   - [Throttle]: client-side throttling (Google's SRE book): drops a
//     request with the probability that the downstream would refuse it,
//     from the requests and accepts of a sliding window.
//
// They compose as deadline.Policy composes them: before an attempt goes
// out, the Limiter (its Breaker first) gives it a slot, then the Throttle
// lets it out; when it ends, its Outcome goes to both. A refusal by any
// part is a [*RefusedError] whose [Cause] says which and why, matching
// [ErrLimited], [ErrDownstreamOpen] or [ErrThrottled] (package deadline
// re-exports the same sentinels). Invalid options are errors
// ([*OptionError]), never panics.
//
// What a gauge needs is read without a lock: [Limiter.Limit],
// [Limiter.Len] (in flight, waiting), [Breaker.State],
// [Throttle.DropProbability] (package otelbudget exports them as
// observable gauges).
//
// The split follows failsafe-go's package per policy and Netflix
// concurrency-limits' algorithm / limiter split; unlike them, refusals
// explain themselves (position, limit, what was left and needed), probes
// are budget-aware, and the hot path ([Limiter.TryAcquire], a free slot)
// takes no lock and allocates nothing.
package overload

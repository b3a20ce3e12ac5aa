package deadlinegrpc

import (
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// WithLearnedAdmission makes the server learn how long each method's unary
// handler takes and refuse at once an RPC whose budget is below what its
// method very likely needs ([admission.Learned]): DEADLINE_EXCEEDED
// with [RefusedTrailer] "budget-ms=80, floor-ms=0, reason=learned", and the
// handler is not called; nothing of what was learned is in the answer.
// Every admitted unary RPC's service time (the handler's duration, time
// waiting in the queue of [WithAdmissionQueue] excluded; grpc-go has
// received the request message before the interceptor runs, so how fast a
// client sends it is not in it) is recorded in
// l.Recorder under its full method name, as completed, or as cut by its
// budget when its context ended first; a canceled RPC or a panic is not
// recorded. Until a method has enough samples (l.MinSamples, and the
// estimator's own minimum) its RPCs are admitted exactly as without this
// option.
//
// Streams are admitted by the fixed rule only, never learned nor queued: a
// stream lasts as long as its conversation, which is not a service time,
// and a long-lived stream would hold a slot for its whole life. An invalid
// l makes NewServer return its [*deadline.PolicyError].
func WithLearnedAdmission(l admission.Learned) ServerOption {
	return serverOptionFunc(func(c *serverConfig) { c.learned = &l })
}

// WithAdmissionQueue bounds how many unary RPCs the server's handlers run
// at once (limit) and how many may wait for a slot (backlog), with a
// [admission.NewQueue] (adaptive LIFO: its doc says why). An RPC that
// finds every slot taken waits; it is answered DEADLINE_EXCEEDED with
// [RefusedTrailer] "reason=queue_timeout", without the handler running, as
// soon as what is left of its budget could no longer cover what its method
// needs (the learned service time of [WithLearnedAdmission], else the
// floor), or when it ends. An RPC that finds the backlog full, or that
// waited in a standing queue as long as [admission.NewQueue] lets it (twice
// its need), is answered RESOURCE_EXHAUSTED without the trailer: overload,
// not a budget too small. Streams are not queued. limit <= 0 or backlog < 0 makes NewServer
// return a [*deadline.PolicyError].
func WithAdmissionQueue(limit, backlog int) ServerOption {
	return serverOptionFunc(func(c *serverConfig) {
		q, err := admission.NewQueue(limit, backlog)
		switch {
		case limit <= 0:
			c.fail("deadlinegrpc.WithAdmissionQueue limit", limit, "> 0 RPCs at once")
		case err != nil:
			c.fail("deadlinegrpc.WithAdmissionQueue backlog", backlog, ">= 0 waiting RPCs (0: none wait)")
		default:
			c.queue = q
		}
	})
}

// WithAdmissionLimiter bounds how many unary RPCs the server's handlers run
// at once with an adaptive limit in place of [WithAdmissionQueue]'s fixed
// one: a [overload.Limiter], whose limit follows the handlers' latency
// against its baseline per method, with the same waiting rule and answers
// (DEADLINE_EXCEEDED with [RefusedTrailer] "reason=queue_timeout" when a
// waiting RPC can no longer finish, RESOURCE_EXHAUSTED when the backlog is
// full or its breaker open). Streams are not limited. l must be built with
// [overload.WithArrivalOrder]: the deadline a client sends must not buy
// its place in the queue. Setting both, or l in deadline order, makes
// NewServer return a [*deadline.PolicyError]; a nil l adds nothing.
func WithAdmissionLimiter(l *overload.Limiter) ServerOption {
	return serverOptionFunc(func(c *serverConfig) { c.limiter = l })
}

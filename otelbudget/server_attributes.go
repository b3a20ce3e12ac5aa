package otelbudget

import (
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
)

// The attribute keys set on a SERVER span by the server composition
// (otelbudgethttp.NewHandler), from what the budget middleware decided for
// the request (deadlinehttp.Admission) and how its handler ended. Like the
// rest they live under "deadline."; durations are integers in
// milliseconds, rounded to the nearest, named "_ms". docs/attributes.md
// ("Server spans") says when each one is set.
const (
	// AttrServerInboundBudgetMs is the budget the request's header asked
	// for: its smallest valid member, before the clamp. Set only when the
	// header held a valid member; 0 means an explicit 0, a budget already
	// spent.
	AttrServerInboundBudgetMs = attribute.Key("deadline.server.inbound_budget_ms")
	// AttrServerHeaderMalformed is true when the header held a member that
	// is not a budget, or no member at all (the valid members still count).
	// Set only when true.
	AttrServerHeaderMalformed = attribute.Key("deadline.server.header_malformed")
	// AttrServerHeaderStripped is true when the server is a trust edge that
	// ignored a header the request carried. Set only when true.
	AttrServerHeaderStripped = attribute.Key("deadline.server.header_stripped")
	// AttrServerMaxBudgetMs is the server's own maximum budget.
	AttrServerMaxBudgetMs = attribute.Key("deadline.server.max_budget_ms")
	// AttrServerContextRemainingMs is the time an outer deadline already on
	// the request's context had left on arrival (negative when it had
	// passed). Set only when the context had one.
	AttrServerContextRemainingMs = attribute.Key("deadline.server.context_remaining_ms")
	// AttrServerBudgetMs is the effective budget: the smallest of the
	// inbound budget, the maximum and the outer deadline's time left.
	AttrServerBudgetMs = attribute.Key("deadline.server.budget_ms")
	// AttrServerLimitedBy says which limit set the effective budget:
	// "header", "max" or "context".
	AttrServerLimitedBy = attribute.Key("deadline.server.limited_by")
	// AttrServerFloorMs is the server's floor: an effective budget at or
	// below it is refused.
	AttrServerFloorMs = attribute.Key("deadline.server.floor_ms")
	// AttrServerRefused is true when the request was refused with 504 and
	// its handler was not called. Set only when true.
	AttrServerRefused = attribute.Key("deadline.server.refused")
	// AttrServerRefusal says why: "spent" (nothing was left), "floor"
	// (the budget was at or below the floor), "learned" (below what the
	// route very likely needs, learned from its recent requests),
	// "queue_timeout" (it waited for a slot until it could no longer
	// finish, or its request ended) or "queue_full" (the admission queue's
	// backlog was full: overload, answered 503). Set only on a refusal;
	// also the attribute of [MetricServerRefusals].
	AttrServerRefusal = attribute.Key("deadline.server.refusal")
	// AttrServerCompletionProbability is the learned estimate that a
	// request of the route completes within its effective budget
	// (deadlinehttp.WithLearnedAdmission); set only when the route had one.
	AttrServerCompletionProbability = attribute.Key("deadline.server.completion_probability")
	// AttrServerCompletionSamples is the weight of the recent samples that
	// estimate rests on; set with it.
	AttrServerCompletionSamples = attribute.Key("deadline.server.completion_samples")
	// AttrServerProbe is true on a request admitted as a probe although
	// its estimate was below the threshold. Set only when true.
	AttrServerProbe = attribute.Key("deadline.server.probe")
	// AttrServerQueueWaitMs is how long the request waited for a slot in
	// the admission queue (deadlinehttp.WithAdmissionQueue), until it got
	// one or was refused. Set only when it waited.
	AttrServerQueueWaitMs = attribute.Key("deadline.server.queue_wait_ms")
	// AttrServerEndedBy says how the handler of an admitted request ended:
	// "completed", "deadline" (it returned after its lease ended),
	// "canceled" (it returned after the request was canceled, the client
	// gone), "abort" (it panicked with http.ErrAbortHandler) or "panic"
	// (any other panic). Absent on a refusal.
	AttrServerEndedBy = attribute.Key("deadline.server.ended_by")
)

// The values of error.type (semconv ErrorTypeKey) the server composition
// sets on a SERVER span, with status Error: a small fixed set.
const (
	// ErrorTypeServerRefused: the request was refused, its budget spent,
	// at or below the floor, below what its route needs, or run out while
	// it waited for a slot ([ServerRefusalErrorType]).
	ErrorTypeServerRefused = "deadline_refused"
	// ErrorTypeServerQueueFull: the request was refused because the
	// admission queue's backlog was full (HTTP 503, MCP's refusal with
	// "refusal": "queue_full"), overload rather than a budget too small
	// ([ServerRefusalErrorType]).
	ErrorTypeServerQueueFull = "queue_full"
	// ErrorTypeServerDeadline: the handler's lease ended while it ran.
	ErrorTypeServerDeadline = "deadline_exceeded"
	// ErrorTypeServerAborted: the handler aborted the response
	// (http.ErrAbortHandler) with its lease not ended and its request not
	// canceled.
	ErrorTypeServerAborted = "aborted"
	// ErrorTypeServerPanic: the handler panicked with another value.
	ErrorTypeServerPanic = "panic"
)

// ServerRefusalErrorType is the error.type every server composition (HTTP,
// MCP, the propagator) sets on the SERVER span of a request admission
// refused with r: [ErrorTypeServerQueueFull] for
// [admission.RefusalQueueFull], the one refusal that says the server is
// overloaded whatever the budget; [ErrorTypeServerRefused] for every
// refusal of the budget (spent, floor, learned, queue_timeout) and for a
// refusal this version does not know. [admission.RefusalNone] is not a
// refusal: it returns "".
func ServerRefusalErrorType(r admission.Refusal) string {
	switch {
	case r == admission.RefusalNone:
		return ""
	case r == admission.RefusalQueueFull:
		return ErrorTypeServerQueueFull
	}
	return ErrorTypeServerRefused
}

// The metric instruments of the server composition, created once per
// otelbudgethttp.NewHandler on the meter of scope [ScopeName].
const (
	// MetricServerRefusals counts refused requests: 504, or 503 for a full
	// admission queue (counter, {request}; attribute
	// deadline.server.refusal).
	MetricServerRefusals = "deadline.server.refusals"
	// MetricServerClamps counts requests whose header asked for more than
	// the server's maximum, which was granted instead (counter, {request};
	// no attribute).
	MetricServerClamps = "deadline.server.clamps"
	// MetricServerBudget is the effective budget of every request, refused
	// ones included (histogram, s; attribute deadline.server.limited_by;
	// boundaries from 1 ms to 30 s).
	MetricServerBudget = "deadline.server.budget"
)

// AppendServerLearned appends to attrs what learned admission and the
// admission queue had to say about one inbound request or RPC, as the
// server compositions (otelbudgethttp, otelbudgetgrpc) set it on their
// SERVER span: [AttrServerCompletionProbability] and
// [AttrServerCompletionSamples] when learned (the route had an estimate e),
// [AttrServerProbe] when admitted as a probe, [AttrServerQueueWaitMs] when
// it waited wait in the queue. It appends nothing when none applies.
func AppendServerLearned(attrs []attribute.KeyValue, learned bool, e deadline.Estimate, probe, queued bool, wait time.Duration) []attribute.KeyValue {
	if learned {
		attrs = append(attrs,
			AttrServerCompletionProbability.Float64(e.P),
			AttrServerCompletionSamples.Int64(int64(min(e.Samples, math.MaxInt64))))
	}
	if probe {
		attrs = append(attrs, AttrServerProbe.Bool(true))
	}
	if queued {
		attrs = append(attrs, AttrServerQueueWaitMs.Int64(ms(wait)))
	}
	return attrs
}

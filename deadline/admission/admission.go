package admission

import (
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

// Inbound is the budget a caller sent with one inbound call, as a transport
// read it: a relative budget (an HTTP header, an MCP _meta field, a queue
// message's remaining milliseconds) or an absolute end on this process's
// clock (gRPC's context deadline, already converted by grpc-go on arrival).
//
// The zero value is "the call carried no budget".
type Inbound struct {
	// Present reports that the call carried a usable budget. When false,
	// Budget and End are ignored and the server's maximum applies.
	Present bool
	// Budget is the time the caller gave, measured from arrival; 0 or less
	// is a budget already spent. Ignored when End is set.
	Budget time.Duration
	// End, when not zero, is the instant the caller's budget ends; the
	// budget is then the time from arrival to End.
	End time.Time
}

// Limit says which limit set an admitted call's effective budget
// ([Decision.Budget]). On a tie the inbound budget wins over the maximum,
// and either over the outer deadline.
type Limit uint8

const (
	// ByInbound: the caller's budget, at or below the maximum.
	ByInbound Limit = iota + 1
	// ByMax: the server's maximum, because the inbound budget was
	// larger, absent or unusable.
	ByMax
	// ByOuter: a deadline the call already ran under on arrival (an
	// outer layer's), which ends sooner than the other two. The call keeps
	// that deadline.
	ByOuter
)

var admissionLimitNames = [...]string{
	ByInbound: "header",
	ByMax:     "max",
	ByOuter:   "context",
}

// String returns the stable telemetry name: "header" (the inbound budget,
// whatever carried it), "max" or "context".
func (l Limit) String() string {
	if l > 0 && int(l) < len(admissionLimitNames) {
		return admissionLimitNames[l]
	}
	return "unknown"
}

// Refusal says why a server refused an inbound call before its handler
// ran, if it did.
type Refusal uint8

const (
	// RefusalNone: the call was admitted.
	RefusalNone Refusal = iota
	// RefusalSpent: nothing was left on arrival. Refused whatever the floor.
	RefusalSpent
	// RefusalFloor: the effective budget was above zero but at or below the
	// server's floor: the work could not finish in time.
	RefusalFloor
	// RefusalLearned: the effective budget was above the floor, but below
	// what the route very likely needs: the route's learned service time
	// says a call given this budget completes with a probability below the
	// threshold ([Learned]).
	RefusalLearned
	// RefusalQueueTimeout: the call waited in the admission queue
	// ([NewQueue]) until what was left of its budget could no longer
	// cover what the route needs (the learned service time, else the
	// floor), or until its request ended: it left the queue without
	// starting.
	RefusalQueueTimeout
	// RefusalQueueFull: the admission queue held as many waiting calls as
	// it may, or the call waited in a standing queue as long as such a
	// queue lets a call wait ([overload.StandingWaitNeeds] × its need,
	// with budget left: [NewQueue]): the server is overloaded, whatever the
	// budget. Unlike the others it says nothing about the budget: a
	// transport answers it as overload (HTTP 503, gRPC RESOURCE_EXHAUSTED),
	// without the refusal marker.
	RefusalQueueFull
)

var refusalNames = [...]string{
	RefusalNone:         "none",
	RefusalSpent:        "spent",
	RefusalFloor:        "floor",
	RefusalLearned:      "learned",
	RefusalQueueTimeout: "queue_timeout",
	RefusalQueueFull:    "queue_full",
}

// Budget reports whether the refusal says the budget was too small
// ([RefusalSpent], [RefusalFloor], [RefusalLearned],
// [RefusalQueueTimeout]): a transport answers it with its deadline status
// and the refusal marker, which a client never retries, since a next
// attempt would arrive with less. [RefusalQueueFull] and [RefusalNone] are
// not.
func (r Refusal) Budget() bool {
	return r != RefusalNone && r != RefusalQueueFull && int(r) < len(refusalNames)
}

// String returns the stable telemetry name: "none", "spent", "floor",
// "learned", "queue_timeout" or "queue_full".
func (r Refusal) String() string {
	if int(r) < len(refusalNames) {
		return refusalNames[r]
	}
	return "unknown"
}

// Decision is what the server side's one rule decided for one inbound call
// ([Admit], [Admitter.Admit]), the rule every transport that receives a
// budget shares: the effective budget is the smallest of the inbound
// budget (when present), the server's maximum and an outer deadline (when
// one exists), never below 0; at 0 the call is refused as spent, at or
// below the floor as unable to finish. It is a plain value, measured at
// one instant on arrival.
type Decision struct {
	// Inbound is what the caller sent (its Budget as measured on arrival,
	// negative when its End had already passed).
	Inbound Inbound
	// MaxBudget is the server's maximum.
	MaxBudget time.Duration
	// HasOuter reports that the call already ran under a deadline on
	// arrival; OuterRemaining is what it had left then (negative if it had
	// passed).
	HasOuter       bool
	OuterRemaining time.Duration
	// Budget is the effective budget.
	Budget time.Duration
	// Limit says which of the three set Budget.
	Limit Limit
	// Floor is the server's floor.
	Floor time.Duration
	// Refusal says whether the call was refused, and why.
	Refusal Refusal
	// Deadline is the deadline an admitted call runs under: the outer one
	// when it bound, else arrival + Budget. It is set when refused too.
	Deadline deadline.Deadline

	// The rest is set by an [Admitter] only ([Admit] leaves it zero).

	// Learned reports that the route's learned service time was consulted
	// ([Learned]): the estimator had an estimate for the budget,
	// resting on enough samples. Estimate is that estimate: the
	// probability that a call of the route completes within Budget.
	Learned  bool
	Estimate deadline.Estimate
	// Probe reports that the estimate was below the threshold but the call
	// was admitted anyway, as a probe ([Learned.ProbeShare]).
	Probe bool
	// Queued reports that the call waited in the admission queue
	// ([NewQueue]); QueueWait is how long, until it got a slot or
	// left the queue refused. A call refused on arrival, the queue full or
	// its request already ended, did not wait.
	Queued    bool
	QueueWait time.Duration
}

// Refused reports whether the call was refused.
func (a Decision) Refused() bool { return a.Refusal != RefusalNone }

// Admit applies the admission rule to one inbound call on arrival: in is
// what the caller sent, outer a deadline the call already runs under (the
// zero Deadline for none), l the server's maximum and floor. It is
// measured on arrival. Transports validate l when they are built
// ([Limits.Validate]); Admit itself never fails: a MaxBudget of 0 or less
// admits nothing (every call is refused as spent).
func Admit(in Inbound, outer deadline.Deadline, l Limits) Decision {
	maxBudget, floor := l.MaxBudget, l.Floor
	now := time.Now()
	a := Decision{Inbound: in, MaxBudget: maxBudget, Floor: floor, Budget: maxBudget, Limit: ByMax}
	var end time.Time
	if in.Present {
		if !in.End.IsZero() {
			a.Inbound.Budget = in.End.Sub(now)
		}
		if a.Inbound.Budget <= a.Budget {
			a.Budget, a.Limit = a.Inbound.Budget, ByInbound
			end = in.End
		}
	}
	if !outer.IsZero() {
		a.HasOuter, a.OuterRemaining = true, outer.End().Sub(now)
		if a.OuterRemaining < a.Budget {
			a.Budget, a.Limit = a.OuterRemaining, ByOuter
		}
	}
	a.Budget = max(a.Budget, 0)
	switch {
	case a.Budget <= 0:
		a.Refusal = RefusalSpent
	case a.Budget <= floor:
		a.Refusal = RefusalFloor
	}
	switch {
	case a.Limit == ByOuter:
		a.Deadline = outer
	case !end.IsZero():
		a.Deadline = deadline.At(end)
	default:
		a.Deadline = deadline.New(a.Budget)
	}
	return a
}

package deadlinegrpc

import (
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
)

// Admission is what a [Server] decided for one RPC, as reported to
// [WithAdmission]: the inbound deadline, the limits the server applied, the
// budget that resulted, and whether the RPC was refused. It is a plain
// value; durations are measured on arrival.
type Admission struct {
	// HasDeadline reports that the RPC arrived with a deadline (grpc-timeout).
	HasDeadline bool
	// Inbound is the time its deadline had left on arrival: negative if it
	// had already passed, saturated for a grpc-timeout too large for a
	// time.Duration, 0 when HasDeadline is false.
	Inbound time.Duration
	// MaxBudget is the server's maximum ([WithMaxBudget]).
	MaxBudget time.Duration
	// Budget is the effective budget: the smaller of Inbound (when
	// present) and MaxBudget, never below 0.
	Budget time.Duration
	// Limit says which of the two set Budget.
	Limit Limit
	// Floor is the server's floor ([WithFloor]).
	Floor time.Duration
	// Refusal says whether the RPC was refused, and why.
	Refusal Refusal

	// Learned reports that the method's learned service time was consulted
	// ([WithLearnedAdmission]): there was an estimate for Budget, resting
	// on enough samples. Estimate is it: the probability that an RPC of the
	// method completes within Budget. Probe reports that it was below the
	// threshold and the RPC was admitted anyway, as a probe.
	Learned  bool
	Estimate deadline.Estimate
	Probe    bool
	// Queued reports that the RPC waited for a slot
	// ([WithAdmissionQueue]); QueueWait is how long, until it got one or
	// was refused.
	Queued    bool
	QueueWait time.Duration
}

// Clamped reports whether the inbound deadline was further away than the
// server's maximum, which replaced it.
func (a Admission) Clamped() bool { return a.HasDeadline && a.Limit == LimitMax }

// Refused reports whether the RPC was refused and the handler not called.
func (a Admission) Refused() bool { return a.Refusal != RefusalNone }

// Limit says which limit set an RPC's effective budget. On a tie the
// inbound deadline wins. It is the admission vocabulary every transport
// shares ([admission.Limit]): the inbound deadline arrives as the
// grpc-timeout header, so its name is "header", as the HTTP middleware's.
type Limit = admission.Limit

const (
	// LimitInbound: the inbound deadline, at or below the maximum.
	LimitInbound = admission.ByInbound
	// LimitMax: the server's maximum, because the inbound deadline was
	// further away, or absent.
	LimitMax = admission.ByMax
)

// Refusal says why a [Server] refused an RPC, if it did
// ([admission.Refusal], shared by every transport).
type Refusal = admission.Refusal

const (
	// RefusalNone: the RPC was admitted and the handler ran.
	RefusalNone = admission.RefusalNone
	// RefusalSpent: nothing was left on arrival. Refused whatever the floor.
	RefusalSpent = admission.RefusalSpent
	// RefusalFloor: the budget was above zero but at or below the floor.
	RefusalFloor = admission.RefusalFloor
	// RefusalLearned: the budget was below what the method very likely
	// needs, as learned from its recent RPCs ([WithLearnedAdmission]).
	RefusalLearned = admission.RefusalLearned
	// RefusalQueueTimeout: the RPC waited for a slot ([WithAdmissionQueue])
	// until what was left of its budget could no longer cover what the
	// method needs, or it ended.
	RefusalQueueTimeout = admission.RefusalQueueTimeout
	// RefusalQueueFull: the admission queue's backlog was full (answered
	// RESOURCE_EXHAUSTED, without [RefusedTrailer]), or the RPC waited in
	// a standing queue as long as it may, or was displaced from a full
	// backlog by a newer one (Decision.Queued: RESOURCE_EXHAUSTED with
	// [RefusedTrailer] "reason=standing_queue", a shed).
	RefusalQueueFull = admission.RefusalQueueFull
)

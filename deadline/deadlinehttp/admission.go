package deadlinehttp

import (
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
)

// Admission is what [NewHandler] decided for one request, as reported to
// [WithAdmission]: what the budget header held, the limits the server
// applied, the budget that resulted, and whether the request was refused.
//
// It is a plain value: the middleware keeps no reference to it, and
// changing a copy changes nothing. Durations are measured on arrival.
type Admission struct {
	// HeaderPresent reports that the request carried the budget header:
	// at least one line, an empty one included, also when it was stripped.
	HeaderPresent bool
	// HeaderStripped reports that [WithStripHeader] removed a present
	// header unread: the other Header fields are then false and zero.
	HeaderStripped bool
	// HeaderMalformed reports that the header held a member that is not a
	// budget, or no member at all. The value was reported to
	// [WithMalformed]; the valid members still count.
	HeaderMalformed bool
	// HeaderValid reports that at least one member of the header was a
	// budget (1 to 10 digits, 0 included): HeaderBudget is the smallest.
	HeaderValid bool
	// HeaderBudget is the smallest valid member of the header, before the
	// clamp: up to [MaxBudget], or 0 for an explicit zero (see
	// [Admission.HeaderZero]). It is 0 when HeaderValid is false.
	HeaderBudget time.Duration

	// MaxBudget is the server's maximum ([WithMaxBudget]).
	MaxBudget time.Duration
	// HasContextDeadline reports that the request's context already had a
	// deadline, its own or a [deadline.Deadline] stored in it, when the
	// request arrived: an outer layer's limit.
	HasContextDeadline bool
	// ContextRemaining is the time that outer deadline had left on arrival,
	// negative if it had already passed. It is 0 when HasContextDeadline is
	// false.
	ContextRemaining time.Duration

	// Budget is the effective budget: the smallest of the header's budget
	// (when valid), MaxBudget and ContextRemaining (when present), and
	// never below 0. An admitted request runs under a deadline this far
	// from its arrival.
	Budget time.Duration
	// Limit says which of the three set Budget.
	Limit Limit
	// Floor is the server's floor ([WithFloor]).
	Floor time.Duration
	// Refusal says whether the request was refused, and why. The zero
	// value, [RefusalNone], means next ran.
	Refusal Refusal

	// Learned reports that the route's learned service time was consulted
	// ([WithLearnedAdmission]): there was an estimate for Budget, resting
	// on enough samples. Estimate is it: the probability that a request of
	// the route completes within Budget. Probe reports that it was below
	// the threshold and the request was admitted anyway, as a probe.
	Learned  bool
	Estimate deadline.Estimate
	Probe    bool
	// Queued reports that the request waited for a slot
	// ([WithAdmissionQueue]); QueueWait is how long, until it got one or
	// was refused.
	Queued    bool
	QueueWait time.Duration
}

// HeaderZero reports whether the header's smallest valid member was an
// explicit 0: a budget already spent, always refused with [RefusalSpent].
func (a Admission) HeaderZero() bool { return a.HeaderValid && a.HeaderBudget == 0 }

// Refused reports whether the request was refused (504, or 503 for
// [RefusalQueueFull]) and next was not called.
func (a Admission) Refused() bool { return a.Refusal != RefusalNone }

// Limit says which limit set a request's effective budget ([Admission.Budget]).
// On a tie the header wins over the maximum, and either over the context. It
// is the admission vocabulary every transport shares ([admission.Limit]).
type Limit = admission.Limit

const (
	// LimitHeader: the budget header's value, at or below the maximum.
	LimitHeader = admission.ByInbound
	// LimitMax: the server's maximum ([WithMaxBudget]), because the header
	// was larger, absent, malformed without a valid member, or stripped.
	LimitMax = admission.ByMax
	// LimitContext: the request context's own deadline (or a
	// [deadline.Deadline] already stored in it), which ended sooner than
	// the other two. The middleware keeps that deadline.
	LimitContext = admission.ByOuter
)

// Refusal says why [NewHandler] refused a request, if it did
// ([admission.Refusal], shared by every transport).
type Refusal = admission.Refusal

const (
	// RefusalNone: the request was admitted and next ran.
	RefusalNone = admission.RefusalNone
	// RefusalSpent: nothing was left. The header said 0, or the context's
	// deadline had already passed on arrival. Refused whatever the floor.
	RefusalSpent = admission.RefusalSpent
	// RefusalFloor: the effective budget was above zero but at or below
	// the server's floor ([WithFloor]): the work could not finish in time.
	RefusalFloor = admission.RefusalFloor
	// RefusalLearned: the effective budget was below what the request's
	// route very likely needs, as learned from its recent requests
	// ([WithLearnedAdmission]).
	RefusalLearned = admission.RefusalLearned
	// RefusalQueueTimeout: the request waited for a slot
	// ([WithAdmissionQueue]) until what was left of its budget could no
	// longer cover what its route needs, or its request ended.
	RefusalQueueTimeout = admission.RefusalQueueTimeout
	// RefusalQueueFull: the admission queue's backlog was full (answered
	// 503, without [RefusedHeader]), or the request waited in a standing
	// queue as long as it may, or was displaced from a full backlog by a
	// newer one ([Admission].Queued: 503 with [RefusedHeader]
	// "reason=standing_queue", a shed).
	RefusalQueueFull = admission.RefusalQueueFull
)

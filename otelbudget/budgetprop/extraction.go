package budgetprop

import (
	"context"
	"errors"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
)

// Extraction is what [Propagator.Extract] or [Propagator.Consume] found in
// a carrier and decided. It is a plain value, measured on arrival.
//
// The budget the receiver works under is [Extraction.Budget] (the
// effective budget, from [Extraction.Admission]); SentBudget and Expiry
// are the raw fields, as the sender wrote them, before the receiver's
// maximum, an outer deadline, the expiry or the time in a queue lowered
// them. Telemetry that wants what the caller asked for reads SentBudget;
// everything else reads Budget.
type Extraction struct {
	// HasSentBudget reports that [FieldBudget] held a valid value;
	// SentBudget is its smallest valid member (at most 9999999999 ms), as
	// sent: not the budget the receiver grants ([Extraction.Budget]).
	HasSentBudget bool
	SentBudget    time.Duration
	// HasExpiry reports that [FieldExpiry] held a valid value; Expiry is
	// its earliest valid member, on the sender's wall clock.
	HasExpiry bool
	Expiry    time.Time
	// Malformed reports that a field held something else (a sign, a unit,
	// a fraction, too many digits, nothing): that member was ignored, the
	// valid ones still count.
	Malformed bool
	// Queued reports that the queue rule decided the budget
	// ([Propagator.Consume]); otherwise the direct-hop rule did
	// ([Propagator.Extract]).
	Queued bool
	// QueueTime is, for a queued message that carried both fields, the
	// time between injection and arrival as the two wall clocks show it:
	// Budget minus the expiry's remaining. It includes the clocks'
	// disagreement, so it can be off by the skew, and negative.
	QueueTime time.Duration
	// SkewExceeded reports, for a queued message, that the expiry was
	// later than the relative budget allows by more than the skew
	// allowance: this host's clock is behind the sender's by more than
	// the allowance (or the field is forged). The budget is then the
	// relative one, which does not count the time in the queue.
	SkewExceeded bool
	// Admission is the receiver's decision ([admission.Admit]): the inbound
	// budget, the clamp to the maximum, the effective budget, the floor
	// and the refusal. After Extract it is the zero Admission when no
	// field was usable; Consume always decides one (the maximum applies
	// to a message without a usable budget).
	Admission admission.Decision

	expiryRemaining time.Duration // Expiry - now on this host's wall clock
}

// Budget returns the effective budget: the one the receiver's
// [deadline.Deadline] was given on arrival (Admission.Budget), after the
// maximum, an outer deadline, the expiry and the time in a queue; <= 0 when
// it was spent. It is 0 when no field was usable ([Extraction.Usable]).
// [Extraction.SentBudget] is what the sender wrote.
func (x Extraction) Budget() time.Duration { return x.Admission.Budget }

// Usable reports that a field held a valid value, so that Admission was
// decided and a Deadline stored.
func (x Extraction) Usable() bool { return x.HasSentBudget || x.HasExpiry }

// Refused reports that the inbound budget was spent or at or below the
// floor: the receiver should not start the work.
func (x Extraction) Refused() bool { return x.Admission.Refused() }

type extractionKey struct{}

// FromContext returns the Extraction [Propagator.Extract] or
// [Propagator.Consume] stored in ctx. It reports false when no budget
// field was present in the carrier (nothing was stored).
func FromContext(ctx context.Context) (Extraction, bool) {
	x, ok := ctx.Value(extractionKey{}).(Extraction)
	return x, ok
}

// ErrRefused is matched by every [RefusedError]. It also matches
// [deadline.ErrRefused] and context.DeadlineExceeded through the
// RefusedError.
var ErrRefused = errors.New("budgetprop: inbound budget refused")

// RefusedError says that an inbound budget was refused: spent on arrival
// ([admission.RefusalSpent]: an expired message) or at or below the
// receiver's floor ([admission.RefusalFloor]). errors.Is matches
// [ErrRefused], [deadline.ErrRefused] and context.DeadlineExceeded.
type RefusedError struct {
	Extraction Extraction
}

// Error says why, what was left and, for a queued message, the time it
// waited, e.g. "budgetprop: refused: budget spent (0s left after 3s
// queued)".
func (e *RefusedError) Error() string {
	a := e.Extraction.Admission
	msg := "budgetprop: refused: "
	if a.Refusal == admission.RefusalFloor {
		msg += "budget " + a.Budget.String() + " at or below the " + a.Floor.String() + " floor"
	} else {
		msg += "budget spent (" + a.Budget.String() + " left"
		if e.Extraction.Queued && e.Extraction.HasExpiry && e.Extraction.HasSentBudget {
			msg += " after " + e.Extraction.QueueTime.String() + " queued"
		}
		msg += ")"
	}
	return msg
}

// Is matches ErrRefused, deadline.ErrRefused and context.DeadlineExceeded.
func (e *RefusedError) Is(target error) bool {
	return target == ErrRefused || target == deadline.ErrRefused || target == context.DeadlineExceeded
}

// Reason is the refusal: [admission.RefusalSpent] or [admission.RefusalFloor].
func (e *RefusedError) Reason() admission.Refusal { return e.Extraction.Admission.Refusal }

// ErrorType returns "deadline_refused", the error.type of a refused
// inbound call on a server span.
func (e *RefusedError) ErrorType() string { return "deadline_refused" }

// Check returns a *RefusedError when ctx carries an Extraction whose
// budget was refused, and nil otherwise (no budget field, or admitted). A
// server that extracts with the propagator calls it before it starts the
// work and answers the error in its protocol (HTTP 504, gRPC
// DEADLINE_EXCEEDED).
func Check(ctx context.Context) error {
	if x, ok := FromContext(ctx); ok && x.Refused() {
		return &RefusedError{Extraction: x}
	}
	return nil
}

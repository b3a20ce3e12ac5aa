package budgetprop

import (
	"context"

	"go.opentelemetry.io/otel/propagation"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
)

// Consume runs handle for one message taken from a queue, under what is
// left of the budget its producer injected into the message's headers
// (carrier), and returns handle's error untouched.
//
// The time the message waited in the queue is spent budget, and only the
// wall-clock expiry counts it: the inbound budget is [FieldExpiry] read on
// this host's clock ([WithClock]), never more than [FieldBudget] (the
// budget at injection). Its error is the clocks' disagreement: with hosts
// kept by NTP a few milliseconds, with a skew of ±200 ms at most 200 ms
// more or less than was really left (docs/propagation.md, "Queues"). A
// message with only FieldBudget gets it, its queue time uncounted; one
// with no usable field gets the maximum. The inbound budget then goes
// through [admission.Admit] (clamp to the maximum, the floor, ctx's own
// deadline as an outer limit).
//
// A message whose budget is spent, or at or below the floor, is not
// processed: handle is not called and Consume returns a *[RefusedError]
// (errors.Is(err, ErrRefused)), so that the application acknowledges it as
// expired (dead-letters, counts or drops it, and does not have it
// redelivered). Otherwise handle runs with a context that carries the
// [Extraction] ([FromContext]) and the admitted [deadline.Deadline]
// (deadline.NewContext), and that ends at that deadline; what handle sends
// on, through an instrumentation that injects with this propagator,
// carries what is left.
//
// Before deciding, Consume sets the extraction's attributes ([Annotate])
// on the span in ctx: start the consumer's span first, as a child of the
// producer's trace context extracted from the same carrier. A nil handle
// is a *deadline.PolicyError; handle is then not called.
func (p *Propagator) Consume(ctx context.Context, carrier propagation.TextMapCarrier, handle func(context.Context) error) error {
	if handle == nil {
		return &deadline.PolicyError{Field: "budgetprop.Consume handle", Value: "nil", Allowed: "a non-nil func(context.Context) error"}
	}
	x := p.read(carrier)
	x.Queued = true
	in := admission.Inbound{Present: x.Usable(), Budget: x.SentBudget}
	if x.HasExpiry {
		e := x.expiryRemaining
		if x.HasSentBudget {
			x.QueueTime = x.SentBudget - e
			x.SkewExceeded = e-x.SentBudget > p.c.skew
		}
		if !x.HasSentBudget || e < in.Budget {
			in.Budget = e
		}
	}
	ctx = p.admit(ctx, x, in)
	x, _ = FromContext(ctx)
	Annotate(ctx)
	if x.Refused() {
		return &RefusedError{Extraction: x}
	}
	ctx, cancel := x.Admission.Deadline.Scope(ctx)
	defer cancel()
	return handle(ctx)
}

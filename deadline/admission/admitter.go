package admission

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// ServiceRecorder records how long a server's handler took for one call of
// a route, in the form package deadline/learn records attempts: d is the
// duration of a call that completed ([deadline.EndedCompleted]), or the budget a
// call cut by its deadline had when it started ([deadline.EndedDeadline]); at is
// when it ended. *learn.Recorder implements it (its Record method).
type ServiceRecorder interface {
	Record(route string, ended deadline.EndedBy, d time.Duration, at time.Time)
}

// Learned makes a server refuse, on arrival, a call whose budget
// is below what its route very likely needs, learned from the route's own
// recent calls ([Admitter]). The server records every admitted call's
// service time (the handler's duration, queue wait and the time the
// transport gives [Ticket.Exclude] excluded) into
// Recorder, and asks Estimator how likely a call of the route is to
// complete within the budget it arrived with; below Threshold the call is
// refused with [RefusalLearned] before the handler runs.
//
// Too few samples is exactly the server without it: while Estimator has no
// answer for a route (fewer samples than it requires, or than MinSamples,
// an unknown route, or a budget longer than anything it has seen when calls
// were cut), only the fixed floor applies. Use a Recorder and the
// [deadline.CompletionEstimator] of its live mode (package deadline/learn: a
// *learn.Recorder and the *learn.Live its Live method returns), the
// Recorder of its own: the server's routes are not the client's steps.
type Learned struct {
	// Recorder records each admitted call's service time under its route.
	// Required.
	Recorder ServiceRecorder
	// Estimator estimates, from those records, the probability that a
	// call of the route completes within a budget. Required.
	Estimator deadline.CompletionEstimator
	// Threshold is the least probability of completing within its budget
	// for which a call is admitted, e.g. 0.05. Must be in (0, 1).
	Threshold float64
	// MinSamples is the least [deadline.Estimate.Samples] an estimate must rest on
	// to refuse anything; 0 leaves it to the estimator.
	MinSamples uint64
	// ProbeShare is the share, in [0, 1], of the calls the estimate would
	// refuse that are admitted anyway, as probes ([Decision.Probe]), drawn
	// with math/rand/v2: without them a route whose estimate refuses every
	// budget its callers send records nothing new, and the estimate never
	// notices that the route became fast again. 0: no probes.
	ProbeShare float64
}

// validate reports an invalid Learned as a [*deadline.PolicyError].
func (l *Learned) validate() error {
	switch {
	case l.Recorder == nil:
		return &deadline.PolicyError{Field: "admission.Learned.Recorder", Value: "nil", Allowed: "a ServiceRecorder (e.g. a *learn.Recorder)"}
	case l.Estimator == nil:
		return &deadline.PolicyError{Field: "admission.Learned.Estimator", Value: "nil", Allowed: "a deadline.CompletionEstimator (e.g. the *learn.Live of the Recorder)"}
	case math.IsNaN(l.Threshold) || l.Threshold <= 0 || l.Threshold >= 1:
		return &deadline.PolicyError{Field: "admission.Learned.Threshold", Value: l.Threshold, Allowed: "in (0, 1), e.g. 0.05"}
	case math.IsNaN(l.ProbeShare) || l.ProbeShare < 0 || l.ProbeShare > 1:
		return &deadline.PolicyError{Field: "admission.Learned.ProbeShare", Value: l.ProbeShare, Allowed: "in [0, 1] (0: no probes)"}
	}
	return nil
}

// need returns the least budget with which a call of route completes with
// a probability of at least the threshold, given that budget does (a
// bisection of the estimator's answers, to about 1%).
func (l *Learned) need(route string, budget time.Duration) time.Duration {
	f := deadline.LearnedFloor{Estimator: l.Estimator, Threshold: l.Threshold, MinSamples: l.MinSamples}
	return f.Need(route, budget)
}

// Config configures [NewAdmitter].
type Config struct {
	// Limits are the server's maximum and floor, as for [Admit].
	Limits Limits
	// Learned, when not nil, adds admission by learned service time
	// ([Learned]). It is copied.
	Learned *Learned
	// Limiter, when not nil, bounds how many admitted calls run at once
	// and how many wait: the fixed queue of [NewQueue], or an adaptive
	// [overload.Limiter] whose limit follows the handlers' latency, with
	// the same waiting rule; several Admitters may share one. It must be
	// ordered by arrival ([overload.WithArrivalOrder], as NewQueue's is):
	// the budget a caller claims must not buy its place (see [NewQueue]).
	// A refusal of its breaker is answered as [RefusalQueueFull].
	Limiter *overload.Limiter
}

// Admitter is a server's admission, configured once and used for every
// call the server receives: the rule of [Admit] (inbound budget, maximum,
// outer deadline, floor), then, when configured, the learned rule
// ([Learned]) and the bounded admission queue ([Config.Limiter]).
// Transports (deadlinehttp's middleware, deadlinegrpc's interceptors, and
// next MCP and queue consumers) adapt this one piece: they read the inbound
// budget, call [Admitter.Admit], answer a refusal in their own terms, run
// the handler, and end the [Ticket].
//
// It is safe for concurrent use.
type Admitter struct {
	limits  Limits
	learned *Learned
	limiter *overload.Limiter // Config.Limiter
}

// NewAdmitter checks c and returns its Admitter, or a [*deadline.PolicyError]
// naming the first problem: invalid Limits ([Limits.Validate]), a Limiter
// not in arrival order or not built by [overload.NewLimiter], an invalid
// [Learned].
func NewAdmitter(c Config) (*Admitter, error) {
	if err := c.Limits.Validate(); err != nil {
		return nil, err
	}
	g := &Admitter{limits: c.Limits, limiter: c.Limiter}
	switch {
	case c.Limiter != nil && c.Limiter.Limit() < 1:
		return nil, &deadline.PolicyError{Field: "admission.Config.Limiter", Value: "Limiter{}", Allowed: "nil or a limiter from NewQueue or overload.NewLimiter"}
	case c.Limiter != nil && !c.Limiter.ArrivalOrder():
		return nil, &deadline.PolicyError{Field: "admission.Config.Limiter", Value: "ordered by deadline",
			Allowed: "a Limiter built with overload.WithArrivalOrder(): a caller's claimed budget must not buy its place in the queue"}
	}
	if c.Learned != nil {
		if err := c.Learned.validate(); err != nil {
			return nil, err
		}
		l := *c.Learned
		g.learned = &l
	}
	return g, nil
}

// Limiter returns the admission queue's limiter ([Config.Limiter]), nil
// when there is none.
func (g *Admitter) Limiter() *overload.Limiter { return g.limiter }

// Admit decides one inbound call of route, on arrival: in is what the
// caller sent, outer a deadline the call already runs under (the zero
// Deadline for none), ctx the call's context (the inbound request's, before
// the budget is applied).
//
// It applies [Admit]'s rule first. Then, with a [Learned] and a
// non-empty route, it asks the estimator how likely a call of route is to
// complete within the effective budget, and refuses it with
// [RefusalLearned] below the threshold (unless drawn as a probe). Then,
// with a queue ([Config.Limiter]), it waits for a slot: while it waits, the call
// leaves the queue refused with [RefusalQueueTimeout] once what is left of
// its budget could no longer cover what the route needs (the budget
// learned to give the threshold's probability, or the floor when nothing
// is learned), or when ctx ends; a full queue refuses it with
// [RefusalQueueFull].
//
// The returned Ticket belongs to an admitted call: the transport must end
// it with [Ticket.Done] when the handler returns or panics, which frees the
// call's slot and records its service time. A refused call's Ticket is the
// zero Ticket, on which Done does nothing. Without a queue, Admit never
// blocks; with one it blocks only when every slot is taken.
func (g *Admitter) Admit(ctx context.Context, route string, in Inbound, outer deadline.Deadline) (Decision, Ticket) {
	a := Admit(in, outer, g.limits)
	if a.Refused() {
		return a, Ticket{}
	}
	l := g.learned
	if route == "" {
		l = nil // an unnamed route is not learned: see the transports
	}
	if l != nil {
		if e, ok := l.Estimator.Completion(route, a.Budget); ok && e.Samples >= l.MinSamples {
			a.Learned, a.Estimate = true, e
			if e.P < l.Threshold {
				if l.ProbeShare == 0 || rand.Float64() >= l.ProbeShare {
					a.Refusal = RefusalLearned
					return a, Ticket{}
				}
				a.Probe = true
			}
		}
	}
	t := Ticket{l: l, route: route, end: a.Deadline.End()}
	if lim := g.limiter; lim != nil {
		var ok bool
		if t.p, ok = lim.TryAcquire(route); !ok {
			need := g.limits.Floor
			if a.Learned && !a.Probe {
				need = max(need, l.need(route, a.Budget))
			}
			a.Queued, a.QueueWait, t.p, a.Refusal = acquire(ctx, lim, route, a.Deadline.End(), need)
			if a.Refused() {
				return a, Ticket{}
			}
		}
		t.q = true
	}
	if t.l != nil || t.q {
		t.start = time.Now()
	}
	return a, t
}

// Ticket is an admitted call's hold on its [Admitter]: its slot in the
// admission queue, and the start of its service time. The zero Ticket
// holds nothing.
type Ticket struct {
	l     *Learned
	q     bool // p holds a slot
	p     overload.Permit
	route string
	start time.Time
	end   time.Time // the call's deadline
	// excluded is time inside the call that is not service time.
	excluded time.Duration
}

// Exclude takes d out of the service time that [Ticket.Done] records, and
// out of the latency it teaches an adaptive limit ([overload.Permit.Exclude]):
// time the call spent waiting on its caller rather than working, such as
// the Reads of a request body the client sends slowly or the Writes of an
// answer it reads slowly (deadlinehttp excludes both). What a client
// controls must not teach the server that a route is slow: learned
// admission would then refuse the calls of every other client, and the
// adaptive limit fall for all of them. Call it before Done; d <= 0 does nothing, and so does
// Exclude on the zero Ticket or after Done.
func (t *Ticket) Exclude(d time.Duration) {
	if d > 0 {
		t.excluded += d
	}
}

// Done ends the call's hold, once the handler has returned (returned true)
// or panicked (false): it frees its slot in the queue, and records the
// service time of a handler that returned. ctx is the context the handler
// ran under: if it ended before the handler returned, the call is recorded
// as cut by its deadline ([deadline.EndedDeadline], censored at the budget it had
// when it started) or, canceled, not at all. Both durations are less the
// time given to [Ticket.Exclude]. Calls after the first do nothing.
func (t *Ticket) Done(ctx context.Context, returned bool) {
	if t.q {
		t.p.Exclude(t.excluded)
		o := overload.OutcomeIgnore
		switch {
		case !returned:
		case ctx.Err() == nil:
			o = overload.OutcomeSuccess
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			o = overload.OutcomeCut
		}
		t.p.Done(o)
		t.q = false
	}
	if t.l == nil {
		return
	}
	l := t.l
	t.l = nil
	if !returned {
		return
	}
	now := time.Now()
	switch err := ctx.Err(); {
	case err == nil:
		l.Recorder.Record(t.route, deadline.EndedCompleted, max(now.Sub(t.start)-t.excluded, 0), now)
	case errors.Is(err, context.DeadlineExceeded):
		// Cut after working for its budget less the excluded time: that
		// is what it is known to need more than.
		l.Recorder.Record(t.route, deadline.EndedDeadline, max(t.end.Sub(t.start)-t.excluded, 0), now)
	}
}

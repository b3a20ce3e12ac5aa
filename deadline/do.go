package deadline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/deadlinebudget/budget/deadline/overload"
)

// Do runs op under policy p and the run's Deadline d, applying the budget
// rules, and returns op's result or a [*StopError] that says why it stopped.
//
// The effective deadline is the earlier of d and ctx's own deadline. Before
// each attempt:
//
//  1. If ctx is canceled the call stops with [ReasonCanceled].
//  2. Refusal: if remaining <= p.Floor no attempt starts; the call stops
//     with [ReasonRefused] (matching [ErrRefused] and
//     context.DeadlineExceeded), carrying the previous attempt's error.
//  3. Lease: the attempt is granted min(ceiling, remaining - p.Floor),
//     where the ceiling is the one p.Ceiling supplies, if any, else
//     p.AttemptTimeout (0: none), and runs in a context built with context.WithDeadlineCause, so
//     context.Cause tells [ErrCeilingReached] (the operation was slow) from
//     [ErrDeadlineReached] (the budget ran out). op receives that context and
//     the [AttemptInfo] (number, grant, remaining).
//  4. Learned floor: with p.LearnedFloor set, its estimator is asked how
//     likely the attempt is to complete within that grant; below the
//     threshold (on enough samples) no attempt starts, unless drawn as a
//     probe, and the call stops with [ReasonRefusedLearned] (matching
//     [ErrRefusedLearned], [ErrRefused] and context.DeadlineExceeded),
//     carrying the previous attempt's error. A retry is judged so on the
//     grant it would get after its wait, before the wait (see
//     [LearnedFloor]).
//
// A failed attempt was ended by whichever came first: the caller's
// cancellation ([EndedCanceled]), op's own error ([EndedError]), or the
// attempt's limit, its start plus its grant. The limit is the one that set
// the grant: the ceiling, configured or learned ([EndedAttemptTimeout]), or
// the shared deadline ([EndedDeadline]). It is decided from the instants, not from which timer
// fired, so an op that ignores its context and returns late is still blamed
// on the limit it overran first, and a tie always gives the same answer: an
// op that returns as its limit is reached was ended by the limit, and a
// caller's context deadline at the same instant as a ceiling that bound the
// grant leaves the blame on the ceiling.
//
// An attempt ended by the deadline stops the call ([ReasonDeadline]) and a
// canceled one stops it ([ReasonCanceled]). An attempt ended by its own
// ceiling becomes an [*AttemptTimeoutError]. The
// error is retried only if p.Retryable (default [IsRetryable]) says so
// ([ReasonNotRetryable] otherwise) and attempts remain ([ReasonExhausted]
// otherwise). The wait before the retry is the server's Retry-After if the
// error carries one ([RetryAfter]; never shortened), else p.Backoff's
// jittered delay. A wait that is not shorter than remaining - p.Floor is not
// taken: the call stops at once with [ReasonRetryAfterTooLong] or
// [ReasonBackoffTooLong]. Then, when p.RetryBudget is set, the retry asks
// it for a token before any sleep: a denied retry is not taken, and the call
// stops at once with [ReasonRetryBudget] (a retry that would be denied never
// sleeps first). Every first attempt that starts is counted in
// p.RetryBudget as a deposit. The wait ends early if ctx ends.
//
// Hedging: with [Policy.Hedge] set (MaxHedges > 0), every attempt runs op
// on a goroutine of its own, and when the latest attempt has run for the
// hedge delay without any attempt of its round returning, a hedge (another
// attempt, [AttemptInfo.Hedge]) starts beside it, if: fewer than
// 1 + MaxHedges attempts are in flight, fewer than MaxAttempts have
// started, no attempt of the round has failed yet, the caller's context is
// live, rules 2 and 3 grant it a lease (no hedge below the floor), and
// p.RetryBudget, if set, grants it a token (hedges and retries draw on it
// together; a denied hedge is not started and the round goes on). The first
// attempt to succeed wins: its value is returned and the others' contexts
// are canceled with the cause [ErrHedgeLost]; they end with
// [EndedHedgeLost], and a value one of them returns anyway is given to
// [Hedge.Discard]. Do returns only once every attempt it started has
// returned, so op must honour its context's cancellation promptly. A failed
// attempt does not end the round while another runs: Do waits for the
// others, and when all failed the last one to end decides, as above,
// whether a retry follows.
//
// Every StopError keeps the attempts made and the last attempt's error, so
// errors.Is(err, lastErr) holds. A nil ctx, a zero d, an invalid policy or a
// nil op returns a [*PolicyError] (checked in that order) before anything
// runs.
//
// A panic in op or in a hook propagates unchanged after the attempt's
// context is released and every hook that began has been closed: AttemptEnd
// reports [EndedPanic] when op panicked, and CallEnd reports [ReasonPanic]
// once CallStart has returned (see [Hooks]). With no hooks installed, the
// success path allocates nothing beyond the attempt's context.
func Do[T any](ctx context.Context, d Deadline, p Policy, op func(context.Context, AttemptInfo) (T, error)) (T, error) {
	var zero T
	if err := check(ctx, d, &p, op == nil); err != nil {
		return zero, err
	}
	if p.Hedge.on() {
		return zero, &PolicyError{"Policy.Hedge", fmt.Sprintf("{Delay: %v, MaxHedges: %d}", p.Hedge.Delay, p.Hedge.MaxHedges),
			"nil (or MaxHedges 0) in Do: hedged calls go through DoHedged"}
	}
	var r run
	ctx = r.begin(ctx, d, &p)
	if r.h != nil {
		defer r.closeOnPanic(ctx)
	}
	for n := 1; ; n++ {
		var a AttemptInfo
		reason, cause := r.admit(ctx, n, &a)
		if cause == nil {
			return zero, r.stop(ctx, reason, 0)
		}
		v, err := attempt(ctx, &r, &a, cause, op)
		if err == nil {
			if r.h != nil {
				r.stop(ctx, ReasonSuccess, 0)
			}
			return v, nil
		}
		if reason, wait := r.next(ctx, n, err); reason != ReasonSuccess {
			return zero, r.stop(ctx, reason, wait)
		}
	}
}

// DoHedged is [Do] for a policy that may hedge ([Policy.Hedge]): while an
// attempt runs past the hedge delay, another one starts beside it, and the
// first success wins (see [Hedge]). Without a Hedge (or with MaxHedges 0)
// it behaves exactly as Do.
//
// It is a function of its own because its attempts run on goroutines of
// their own, so op escapes to the heap: a closure passed to DoHedged is
// allocated by the caller, one passed to Do is not. DoHedged returns only
// when every attempt it started has returned, so no goroutine outlives it.
func DoHedged[T any](ctx context.Context, d Deadline, p Policy, op func(context.Context, AttemptInfo) (T, error)) (T, error) {
	var zero T
	if err := check(ctx, d, &p, op == nil); err != nil {
		return zero, err
	}
	var r run
	ctx = r.begin(ctx, d, &p)
	if r.h != nil {
		defer r.closeOnPanic(ctx)
	}
	for n := 1; ; n++ {
		var a AttemptInfo
		reason, cause := r.admit(ctx, n, &a)
		if cause == nil {
			return zero, r.stop(ctx, reason, 0)
		}
		var v T
		var err error
		if r.p.Hedge.on() {
			v, err = hedgedCopy(ctx, &r, a, cause, op)
			n = r.attempts
		} else {
			v, err = attempt(ctx, &r, &a, cause, op)
		}
		if err == nil {
			if r.h != nil {
				r.stop(ctx, ReasonSuccess, 0)
			}
			return v, nil
		}
		if reason, wait := r.next(ctx, n, err); reason != ReasonSuccess {
			return zero, r.stop(ctx, reason, wait)
		}
	}
}

// on reports whether h turns hedging on.
func (h *Hedge) on() bool { return h != nil && h.MaxHedges > 0 }

// check validates Do's arguments, in the order the errors are reported.
func check(ctx context.Context, d Deadline, p *Policy, nilOp bool) error {
	if ctx == nil {
		return errNilContext()
	}
	if d.IsZero() {
		return errZeroDeadline()
	}
	if err := p.validate(); err != nil {
		return err
	}
	if nilOp {
		return &PolicyError{"op", "nil", "a non-nil function"}
	}
	return nil
}

// begin fills r for a call of p under d and ctx, and reports CallStart; it
// returns the context the call's attempts run under.
func (r *run) begin(ctx context.Context, d Deadline, p *Policy) context.Context {
	// r is zero (Do's own): assigning field by field skips zeroing it twice.
	r.p, r.end, r.h, r.retryable = *p, d.end, p.Hooks, p.Retryable
	if t, ok := ctx.Deadline(); ok && t.Before(r.end) {
		r.end = t
	}
	if ch := ContextHooks(ctx); ch != nil {
		r.h = Compose(ch, p.Hooks)
	}
	if r.retryable == nil {
		r.retryable = IsRetryable
	}
	if r.h != nil {
		r.start = time.Now()
		if r.h.CallStart != nil {
			if c := r.h.CallStart(ctx, CallInfo{
				Name: p.Name, Start: r.start, Budget: d.budget, Remaining: r.end.Sub(r.start),
				MaxAttempts: p.MaxAttempts, Ceiling: p.AttemptTimeout, Floor: p.Floor,
			}); c != nil {
				ctx = c
			}
		}
	}
	return ctx
}

// admit decides whether attempt n starts: the stop reason and a nil cause
// when the caller canceled or the budget refuses it (rules 2 and 7), else
// the cause of its lease (rule 1), with a filled in and the first attempt
// deposited in the retry budget.
func (r *run) admit(ctx context.Context, n int, a *AttemptInfo) (Reason, error) {
	if err := ctx.Err(); err != nil && errors.Is(err, context.Canceled) {
		return ReasonCanceled, nil
	}
	cause := r.lease(n, a)
	if cause == nil {
		if r.refusedLearned {
			return ReasonRefusedLearned, nil
		}
		return ReasonRefused, nil
	}
	if l := r.p.Limiter; l != nil {
		// The limiter's rule for every call: it can still finish from a
		// free slot, its need at least the route's now (its typical
		// latency on a downstream under no pressure, else what it needs
		// nine times in ten), plus the floor.
		need := r.need(a)
		if rn := l.NeedAt(r.p.Name, a.Start); rn > 0 {
			need = max(need, r.p.Floor+rn)
			if a.Remaining <= need {
				r.refusal = &overload.RefusedError{Cause: overload.CauseQueueTimeout, Limit: l.Limit(), Position: 1, Need: need, Remaining: a.Remaining}
				return ReasonLimited, nil
			}
		}
		p, ok := l.TryAcquireAt(r.p.Name, a.Start)
		if !ok {
			var err error
			if p, err = l.Acquire(ctx, r.p.Name, r.end, need); err != nil {
				r.refusal, _ = err.(*overload.RefusedError)
				return refusalReason(r.refusal), nil
			}
			if p.Queued {
				// Time passed in the queue: the lease is granted anew.
				if cause = r.lease(n, a); cause == nil {
					p.Done(overload.OutcomeIgnore)
					if r.refusedLearned {
						return ReasonRefusedLearned, nil
					}
					return ReasonRefused, nil
				}
			}
			if p.Probe && p.Ceiling > 0 && p.Ceiling < a.Granted {
				a.Ceiling, a.Granted, a.LimitedBy, cause = p.Ceiling, p.Ceiling, LimitCeiling, ErrCeilingReached
			}
		}
		r.permit = p
	}
	// Throttling counts what would go out to the downstream: after the
	// limiter, whose refusals are not the downstream's.
	if t := r.p.Throttle; t != nil && !t.Allow(r.draw()) {
		r.permit.Done(overload.OutcomeIgnore)
		r.refusal = &overload.RefusedError{Cause: overload.CauseThrottled, Remaining: a.Remaining}
		return ReasonThrottled, nil
	}
	if n == 1 && r.p.RetryBudget != nil {
		r.p.RetryBudget.deposit()
	}
	return ReasonSuccess, cause
}

// need is what attempt a needs to finish once started, for the Limiter's
// queue: the least lease the LearnedFloor's estimator gives its threshold's
// chance, else nothing beyond the floor (the limiter adds its baseline).
func (r *run) need(a *AttemptInfo) time.Duration {
	if f := r.p.LearnedFloor; f != nil {
		return r.p.Floor + f.Need(r.p.Name, a.Granted)
	}
	return r.p.Floor
}

// refusalReason is the stop reason of a refusal: [ReasonLimited],
// [ReasonOpen] or [ReasonThrottled].
func refusalReason(e *overload.RefusedError) Reason {
	switch {
	case e == nil:
		return ReasonLimited
	case e.Cause == overload.CauseOpen:
		return ReasonOpen
	case e.Cause == overload.CauseThrottled:
		return ReasonThrottled
	}
	return ReasonLimited
}

// settle frees the attempt's limiter slot and counts it for throttling,
// given how it ended.
func (r *run) settle(p *overload.Permit, ended EndedBy, err error, retry, answered bool) {
	o := overload.OutcomeIgnore
	// Only a completed call's latency is its route's service time. An
	// error answer says how the downstream ended the call, not how long
	// the route's work takes: a refusal answered at once, learned as the
	// route's latency, drove its baseline to nothing and the limit down
	// with it (the overload bench's two-route collapse): OutcomeError
	// (retryable: the downstream failed) and OutcomeAnswered teach no
	// latency. A call cut by its ceiling or the deadline is censored
	// (OutcomeTimeout, OutcomeCut): learned at the cut, a route whose
	// calls are cut showed a latency no higher than their deadline, and
	// the baseline followed it up until the limit stopped limiting.
	switch ended {
	case EndedCompleted:
		o = overload.OutcomeSuccess
		if answered {
			o = overload.OutcomeAnswered
		}
	case EndedError:
		switch {
		case errors.Is(err, ErrOverloaded):
			o = overload.OutcomeOverload
		case retry:
			o = overload.OutcomeError
		default:
			o = overload.OutcomeAnswered
		}
	case EndedAttemptTimeout:
		o = overload.OutcomeTimeout
	case EndedDeadline:
		o = overload.OutcomeCut
	}
	p.Done(o)
	// A shed from a standing queue is the server's admission choosing whom
	// to serve: throttling does not count it ([Shed]).
	if t := r.p.Throttle; t != nil && !(o == overload.OutcomeOverload && isShed(err)) {
		t.Record(o)
	}
}

// answered reports whether op's value v is an answer without the work
// ([Policy.Answered]).
func (r *run) answered(v any) bool {
	return r.p.Answered != nil && r.p.Answered(v)
}

// run is the state of one call to Do, kept out of the generic function so
// that one copy of the loop's logic serves every result type.
type run struct {
	p         Policy // a copy: a pointer to Do's parameter would move it to the heap
	end       time.Time
	h         *Hooks
	retryable func(error) bool
	start     time.Time

	attempts        int
	last            error
	ended           EndedBy
	retry           bool
	ceilingTimeouts int
	deadlineCuts    int
	hedges          int
	balance         int // the retry budget's balance when it denied a retry
	done            bool

	permit  overload.Permit        // the Limiter's slot for the attempt about to run
	refusal *overload.RefusedError // the Limiter's or the throttle's refusal

	// The learned floor's (LearnedFloor) refusal, and a retry it let
	// through as a probe before its backoff.
	refusedLearned bool
	probeNext      bool
	refusedLease   time.Duration
	refusedEst     Estimate
}

// lease applies rules one and two for attempt n: it fills a and returns the
// cause for the attempt's context, or nil when the attempt is refused.
func (r *run) lease(n int, a *AttemptInfo) error {
	// time.Until reads only the monotonic clock when r.end carries a
	// reading (time.Now reads the wall clock too, and is the largest cost
	// of the success path); the attempt's start is derived from it exactly.
	remaining := time.Until(r.end)
	if remaining <= r.p.Floor {
		return nil
	}
	*a = AttemptInfo{
		Name: r.p.Name, Number: n, Start: r.end.Add(-remaining), Ceiling: r.p.AttemptTimeout,
		Granted: remaining - r.p.Floor, Remaining: remaining, LimitedBy: LimitDeadline,
	}
	ceiling := LimitCeiling
	if r.p.Ceiling != nil {
		if lc, ok := r.p.Ceiling.Ceiling(r.p.Name); ok && lc.Ceiling > 0 {
			a.Ceiling, a.CeilingQuantile, ceiling = lc.Ceiling, lc.Quantile, LimitLearnedCeiling
		}
	}
	cause := ErrDeadlineReached
	if a.Ceiling > 0 && a.Ceiling <= a.Granted {
		a.Granted, a.LimitedBy = a.Ceiling, ceiling
		cause = ErrCeilingReached
	}
	if r.p.LearnedFloor != nil && !r.learnedAdmits(a) {
		return nil
	}
	return cause
}

// learnedAdmits applies the learned floor to attempt a, filling its
// Estimate and Probe, and reports whether it starts; a refusal is kept in r
// for the StopError.
func (r *run) learnedAdmits(a *AttemptInfo) bool {
	est, refuse, probe := r.doomed(a.Granted, r.probeNext)
	r.probeNext = false
	a.Estimate, a.Probe = est, probe
	if refuse {
		r.refusedLearned, r.refusedLease, r.refusedEst = true, a.Granted, est
		return false
	}
	return true
}

// attempt runs op once inside its lease and records how it ended.
func attempt[T any](ctx context.Context, r *run, a *AttemptInfo, cause error, op func(context.Context, AttemptInfo) (T, error)) (v T, err error) {
	r.attempts = a.Number
	actx, cancel := context.WithDeadlineCause(ctx, a.Start.Add(a.Granted), cause)
	octx := actx
	// Released on every path, a panic in AttemptStart, op or AttemptEnd
	// included; AttemptEnd closes an attempt whose op panicked, not one
	// whose AttemptStart did (it never began).
	began, finished := false, false
	permit := r.permit
	r.permit = overload.Permit{}
	defer func() {
		cancel()
		if !finished {
			permit.Done(overload.OutcomeIgnore)
		}
		if began && !finished && r.h.AttemptEnd != nil {
			r.h.AttemptEnd(octx, *a, AttemptResult{Duration: time.Since(a.Start), EndedBy: EndedPanic})
		}
	}()
	if r.h != nil {
		if r.h.AttemptStart != nil {
			if c := r.h.AttemptStart(actx, *a); c != nil {
				octx = c
			}
		}
		began = true
	}
	v, err = op(octx, *a)
	finished = true
	ended := EndedCompleted
	retry := false
	if err != nil {
		ended, err = r.classify(ctx, actx, a, err)
		if ended == EndedError || ended == EndedAttemptTimeout {
			retry = r.retryable(err)
		}
		r.last = err
	}
	if r.p.Limiter != nil || r.p.Throttle != nil {
		r.settle(&permit, ended, err, retry, err == nil && r.p.Answered != nil && r.answered(v))
	}
	r.ended = ended
	if r.h != nil && r.h.AttemptEnd != nil {
		r.h.AttemptEnd(octx, *a, AttemptResult{Duration: time.Since(a.Start), Err: err, Retryable: retry, EndedBy: ended})
	}
	r.retry = retry
	return v, err
}

// classify says what ended a failed attempt: whichever came first of the
// caller's cancellation, op's own return and the attempt's limit (its start
// plus its grant). It decides from instants, not from which timer fired: the
// caller's context deadline can fire at the same instant as the attempt's
// own and cancel the attempt's context with its own cause, and op may return
// late, after every limit passed. It runs only after a failed attempt.
func (r *run) classify(ctx, actx context.Context, a *AttemptInfo, err error) (EndedBy, error) {
	aerr := actx.Err()
	if errors.Is(aerr, context.Canceled) {
		// Only the caller's cancellation closes the attempt's context with
		// context.Canceled before op returns, and it got there before the
		// attempt's limit did (a limit closes it with DeadlineExceeded).
		return EndedCanceled, err
	}
	limit := a.Start.Add(a.Granted)
	if aerr == nil && time.Now().Before(limit) {
		return EndedError, err
	}
	// The limit was reached before op returned (or as it returned: a tie
	// goes to the limit). The grant's own limit ended the attempt, unless
	// the caller's context ends earlier still (a hook's context can move
	// it below the deadline the grant was computed from).
	if end, ok := ctx.Deadline(); ok && end.Before(limit) || a.LimitedBy == LimitDeadline {
		r.deadlineCuts++
		return EndedDeadline, err
	}
	r.ceilingTimeouts++
	return EndedAttemptTimeout, &AttemptTimeoutError{Attempt: a.Number, Ceiling: a.Ceiling, Err: err}
}

// next decides what follows failed attempt n: a stop reason, or
// ReasonSuccess after sleeping the wait.
func (r *run) next(ctx context.Context, n int, err error) (Reason, time.Duration) {
	switch r.ended {
	case EndedCanceled:
		return ReasonCanceled, 0
	case EndedDeadline:
		return ReasonDeadline, 0
	}
	if !r.retry {
		return ReasonNotRetryable, 0
	}
	if n >= r.p.MaxAttempts {
		return ReasonExhausted, 0
	}
	wait, src, asked := r.p.Backoff.Delay(n, r.p.Rand), SourcePolicy, time.Duration(0)
	if ra, ok := RetryAfterOf(err); ok {
		wait, src, asked = ra, SourceRetryAfter, ra
	}
	remaining := time.Until(r.end)
	fits := wait == 0 || wait < remaining-r.p.Floor
	// The learned floor judges the lease the retry would get after its
	// wait, before the wait: a retry that would very likely fail costs
	// neither the sleep nor a token.
	var lease time.Duration
	var est Estimate
	doomed := false
	if fits && r.p.LearnedFloor != nil {
		lease = r.leaseAfter(remaining, wait)
		est, doomed, r.probeNext = r.doomed(lease, false)
		if doomed {
			r.refusedLearned, r.refusedLease, r.refusedEst = true, lease, est
		}
	}
	// The retry budget is asked only for a retry that fits, and before the
	// sleep: a token is never spent on a retry that cannot start, and a
	// retry that will be denied never sleeps.
	budget, allowed, balance := r.p.RetryBudget != nil && fits && !doomed, true, 0
	if budget {
		allowed, balance = r.p.RetryBudget.withdraw()
		r.balance = balance
	}
	if r.h != nil && r.h.Backoff != nil {
		r.h.Backoff(ctx, BackoffInfo{
			Name: r.p.Name, Attempt: n, Delay: wait, Source: src, RetryAfter: asked, Remaining: remaining, Fits: fits,
			RetryBudget: budget, RetryDenied: !allowed, RetryBalance: balance,
			Lease: lease, Estimate: est, RefusedLearned: doomed,
		})
	}
	switch {
	case !fits && src == SourceRetryAfter:
		return ReasonRetryAfterTooLong, wait
	case !fits:
		return ReasonBackoffTooLong, wait
	case doomed:
		return ReasonRefusedLearned, 0
	case !allowed:
		return ReasonRetryBudget, 0
	}
	if wait <= 0 {
		return ReasonSuccess, 0
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return ReasonSuccess, 0
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.Canceled) {
			return ReasonCanceled, 0
		}
		return ReasonDeadline, 0
	}
}

// stop ends the call: it reports CallEnd and builds the StopError.
func (r *run) stop(ctx context.Context, reason Reason, wait time.Duration) error {
	var err error
	remaining := time.Until(r.end)
	if reason != ReasonSuccess {
		se := &StopError{
			Name: r.p.Name, Reason: reason, Attempts: r.attempts, Last: r.last,
			Remaining: remaining, Floor: r.p.Floor, Wait: wait,
		}
		if reason == ReasonRetryBudget {
			se.Balance = r.balance
		}
		if reason == ReasonRefusedLearned {
			se.Lease, se.Estimate = r.refusedLease, r.refusedEst
		}
		if reason == ReasonLimited || reason == ReasonOpen || reason == ReasonThrottled {
			se.Refusal = r.refusal
		}
		err = se
	}
	r.done = true
	if r.h != nil && r.h.CallEnd != nil {
		cr := CallResult{
			Name: r.p.Name, Reason: reason, Attempts: r.attempts, Err: err,
			Duration: time.Since(r.start), Remaining: remaining,
			CeilingTimeouts: r.ceilingTimeouts, DeadlineCuts: r.deadlineCuts, Hedges: r.hedges,
		}
		if reason == ReasonRefusedLearned {
			cr.Lease, cr.Estimate = r.refusedLease, r.refusedEst
		}
		if reason == ReasonLimited || reason == ReasonOpen || reason == ReasonThrottled {
			cr.Refusal = r.refusal
		}
		r.h.CallEnd(ctx, cr)
	}
	return err
}

// closeOnPanic reports CallEnd with ReasonPanic when op or a hook after
// CallStart panicked.
func (r *run) closeOnPanic(ctx context.Context) {
	if !r.done && r.h.CallEnd != nil {
		r.h.CallEnd(ctx, CallResult{
			Name: r.p.Name, Reason: ReasonPanic, Attempts: r.attempts,
			Duration: time.Since(r.start), Remaining: time.Until(r.end),
			CeilingTimeouts: r.ceilingTimeouts, DeadlineCuts: r.deadlineCuts, Hedges: r.hedges,
		})
	}
}

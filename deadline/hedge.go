package deadline

import (
	"context"
	"time"

	"github.com/deadlinebudget/budget/deadline/overload"
)

// flight is one attempt of a hedged round, run on a goroutine of its own.
type flight struct {
	a       AttemptInfo
	actx    context.Context    // the attempt's lease, a child of the round's context
	octx    context.Context    // what op runs in (AttemptStart's)
	release context.CancelFunc // ends the lease alone
	permit  overload.Permit    // its Limiter slot
	began   bool               // AttemptStart returned
	lost    bool               // canceled with ErrHedgeLost
	done    bool               // op returned
}

// outcome is what an attempt's goroutine reports.
type outcome[T any] struct {
	i        int
	v        T
	err      error
	panicked bool
	pv       any
}

// round runs one hedged round: the attempt a, granted by lease with cause,
// and the hedges started beside it.
//
// Every attempt's lease is a child of one context per round, lctx: the
// round's end cancels every attempt still running with ErrHedgeLost at
// once, and an attempt costs one context, not a cancelable context of its
// own under its lease.
type round[T any] struct {
	ctx      context.Context         // the caller's
	lctx     context.Context         // the attempts' parent
	lose     context.CancelCauseFunc // cancels lctx
	r        *run
	op       func(context.Context, AttemptInfo) (T, error)
	results  chan outcome[T]
	flights  []flight // at most 1 + MaxHedges: a round hedges only while none has returned
	inflight int
}

// hedgedCopy runs hedged on a copy of r on the heap and copies it back,
// also on a panic, so that the attempts' goroutines never make Do's own run
// escape: without hedging, Do's run stays on its stack.
func hedgedCopy[T any](ctx context.Context, r *run, a AttemptInfo, cause error, op func(context.Context, AttemptInfo) (T, error)) (T, error) {
	hr := new(run)
	*hr = *r
	defer func() { *r = *hr }()
	return hedged(ctx, hr, &a, cause, op)
}

// hedged runs the attempt a and its hedges (see Do) and returns the
// winner's value, or the error of the last attempt to fail. It records in r
// what attempt would: the attempts started, the last error, what ended it
// and whether it may be retried.
func hedged[T any](ctx context.Context, r *run, a *AttemptInfo, cause error, op func(context.Context, AttemptInfo) (T, error)) (v T, err error) {
	h := r.p.Hedge
	delay := h.Delay
	if h.DelaySource != nil {
		if d, ok := h.DelaySource.HedgeDelay(r.p.Name); ok && d > 0 {
			delay = d
		}
	}
	rd := round[T]{ctx: ctx, r: r, op: op, results: make(chan outcome[T], 1+h.MaxHedges), flights: make([]flight, 0, 1+h.MaxHedges)}
	rd.lctx, rd.lose = context.WithCancelCause(ctx)
	// On a panic (in op or a hook), every attempt still running is
	// canceled and awaited, and those that began are closed, before the
	// panic goes on.
	closed := false
	defer func() {
		if !closed {
			rd.abort()
		}
		rd.lose(nil)
	}()
	rd.start(*a, cause)
	timer := time.NewTimer(delay)
	defer timer.Stop()
	won, failed := false, false
	for rd.inflight > 0 {
		select {
		case o := <-rd.results:
			f := &rd.flights[o.i]
			f.done = true
			rd.inflight--
			if o.panicked {
				f.permit.Done(overload.OutcomeIgnore)
				rd.end(f, AttemptResult{EndedBy: EndedPanic})
				f.release()
				panic(o.pv)
			}
			switch {
			case f.lost:
				if o.err == nil && h.Discard != nil {
					h.Discard(o.v)
				}
				f.permit.Done(overload.OutcomeIgnore)
				rd.end(f, AttemptResult{Err: o.err, EndedBy: EndedHedgeLost})
			case o.err == nil:
				won, v = true, o.v
				r.ended, r.retry = EndedCompleted, false
				r.settle(&f.permit, EndedCompleted, nil, false, r.p.Answered != nil && r.answered(o.v))
				rd.end(f, AttemptResult{EndedBy: EndedCompleted, HedgeWinner: len(rd.flights) > 1})
				// The winner's lease is released before the round's
				// context: its cause is its own release, not ErrHedgeLost.
				f.release()
				rd.cancelOthers()
				continue
			default:
				failed = true
				ended, e := r.classify(ctx, f.actx, &f.a, o.err)
				retry := (ended == EndedError || ended == EndedAttemptTimeout) && r.retryable(e)
				r.last, r.ended, r.retry, err = e, ended, retry, e
				r.settle(&f.permit, ended, e, retry, false)
				rd.end(f, AttemptResult{Err: e, Retryable: retry, EndedBy: ended})
			}
			f.release()
		case <-timer.C:
			if !won && !failed && rd.hedge() && rd.inflight < 1+h.MaxHedges {
				timer.Reset(delay)
			}
		}
	}
	closed = true
	if won {
		return v, nil
	}
	return v, err
}

// hedge starts a hedge if the rules allow one (see Do) and reports whether
// it did.
func (rd *round[T]) hedge() bool {
	r := rd.r
	if rd.inflight >= 1+r.p.Hedge.MaxHedges || r.attempts >= r.p.MaxAttempts || rd.ctx.Err() != nil {
		return false
	}
	var a AttemptInfo
	cause := r.lease(r.attempts+1, &a)
	if cause == nil {
		// A hedge the learned floor refuses is simply not started.
		r.refusedLearned = false
		return false
	}
	var p overload.Permit
	if l := r.p.Limiter; l != nil {
		var ok bool
		if p, ok = l.TryAcquireAt(r.p.Name, a.Start); !ok {
			return false // a hedge never waits for a slot
		}
	}
	if t := r.p.Throttle; t != nil && !t.Allow(r.draw()) {
		p.Done(overload.OutcomeIgnore)
		return false
	}
	if r.p.RetryBudget != nil {
		if ok, _ := r.p.RetryBudget.withdraw(); !ok {
			p.Done(overload.OutcomeIgnore)
			return false
		}
	}
	a.Hedge = true
	r.hedges++
	r.permit = p
	rd.start(a, cause)
	return true
}

// start begins attempt a on a goroutine of its own.
func (rd *round[T]) start(a AttemptInfo, cause error) {
	r := rd.r
	r.attempts = a.Number
	actx, release := context.WithDeadlineCause(rd.lctx, a.Start.Add(a.Granted), cause)
	f := flight{a: a, actx: actx, octx: actx, release: release, permit: r.permit}
	r.permit = overload.Permit{}
	if r.h != nil && r.h.AttemptStart != nil {
		func() {
			ok := false
			defer func() {
				if !ok {
					f.release() // AttemptStart panicked: the attempt never began
					f.permit.Done(overload.OutcomeIgnore)
				}
			}()
			if c := r.h.AttemptStart(actx, a); c != nil {
				f.octx = c
			}
			ok = true
		}()
	}
	f.began = true
	i := len(rd.flights)
	rd.flights = append(rd.flights, f)
	rd.inflight++
	go run1(i, rd.op, f.octx, f.a, rd.results)
}

// run1 runs op on an attempt's goroutine and reports how it ended. It
// holds nothing of Do's run, which stays on the caller's stack.
func run1[T any](i int, op func(context.Context, AttemptInfo) (T, error), ctx context.Context, a AttemptInfo, results chan<- outcome[T]) {
	o := outcome[T]{i: i, panicked: true}
	defer func() {
		if o.panicked {
			o.pv = recover()
		}
		results <- o
	}()
	o.v, o.err = op(ctx, a)
	o.panicked = false
}

// cancelOthers cancels, with ErrHedgeLost, every attempt still running,
// once the winner has returned and its lease is released.
func (rd *round[T]) cancelOthers() {
	for i := range rd.flights {
		if f := &rd.flights[i]; !f.done {
			f.lost = true
		}
	}
	rd.lose(ErrHedgeLost)
}

// end reports the end of attempt f to the hooks.
func (rd *round[T]) end(f *flight, res AttemptResult) {
	if h := rd.r.h; h != nil && h.AttemptEnd != nil && f.began {
		res.Duration = time.Since(f.a.Start)
		h.AttemptEnd(f.octx, f.a, res)
	}
}

// abort, after a panic, cancels every attempt still running, waits for
// each to return, then closes those that began with EndedPanic (all of
// them, even if one AttemptEnd panics). Values they return are discarded
// (given to Hedge.Discard when they succeeded); the first panic goes on.
func (rd *round[T]) abort() {
	rd.lose(ErrHedgeLost)
	var ended []outcome[T]
	for ; rd.inflight > 0; rd.inflight-- {
		o := <-rd.results
		rd.flights[o.i].done = true
		ended = append(ended, o)
	}
	for i := range rd.flights {
		f := &rd.flights[i]
		f.release()
		f.permit.Done(overload.OutcomeIgnore)
	}
	endAll(len(ended)-1, func(i int) {
		o := ended[i]
		if !o.panicked && o.err == nil && rd.r.p.Hedge.Discard != nil {
			rd.r.p.Hedge.Discard(o.v)
		}
		rd.end(&rd.flights[o.i], AttemptResult{Err: o.err, EndedBy: EndedPanic})
	})
}

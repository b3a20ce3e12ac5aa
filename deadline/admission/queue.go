package admission

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// LIFOAfter is how long a queue ([NewQueue]) must have held waiting calls
// without a break before it serves the newest first: CoDel's interval, as
// Facebook's servers use it to switch to LIFO ("Fail at Scale", 2015). It
// is [overload.LIFOAfter]: the queue is an [overload.Limiter].
const LIFOAfter = overload.LIFOAfter

// NewQueue returns the admission queue ([Config.Limiter]) that runs at
// most limit calls at once (> 0) and lets at most backlog calls wait (>=
// 0; 0: a call that finds every slot taken is refused at once); other
// values return a [*deadline.PolicyError]: 0 is not "the default" (a
// backlog of 0 means none wait); [DefaultQueue] is the queue without
// numbers to pick. It bounds how many admitted
// calls a server runs at once (limit) and how many may wait for a slot
// (backlog). [Admitter] uses it: a call that finds every slot taken
// waits, and leaves without starting ([RefusalQueueTimeout]) once what is
// left of its budget could no longer cover what its route needs, or when
// its request ends; it never does work nobody will receive the answer to.
// A call that finds the backlog full is refused ([RefusalQueueFull]).
//
// # Order: adaptive LIFO
//
// While the queue empties regularly it serves waiting calls in arrival
// order (FIFO): under a passing burst, first come first served is fair and
// every call is soon served. Once it has held waiting calls for
// [LIFOAfter] without a break (overload: a standing queue, CoDel's
// signal), it serves the newest first (LIFO) until it empties: the newest
// call has the most budget left, so it is the one most likely to finish in
// time and the one whose caller is most likely still waiting; the oldest
// are the ones closest to their deadline, and they leave the queue by
// themselves when it comes. Under FIFO a standing queue makes every call
// wait the whole queue, and after an outage, when the queue is full of
// calls whose callers have gone, every new call waits behind them and
// times out too (a metastable failure); under LIFO the new calls are served
// at once, and the stale ones expire. This is Facebook's adaptive LIFO
// ("Fail at Scale", ACM Queue 2015) and the order of Netflix's
// concurrency-limits LifoBlockingLimiter, with each call's own deadline in
// place of CoDel's fixed queue-time target: a call leaves when its budget,
// not a server-wide constant, says it can no longer finish.
//
// Earliest deadline first was considered and not chosen: it is optimal
// while every call can be served in time, but under overload it serves the
// calls with the least time left, the ones most likely to miss, and the
// misses cascade (the domino effect); with the uniform budgets of one
// route it is FIFO.
//
// The order is by arrival alone, never by the budget a call claims: the
// budget is the caller's word (a header any client can forge or leave
// out), and a queue ordered by it would serve a request claiming the
// maximum before honest ones. The claim only decides whether a call is
// refused (it can no longer finish from its place) and clamps its budget
// to the maximum. (A client's [overload.Limiter] orders its own calls by
// their deadlines, which are its own.)
//
// # A standing queue bounds the wait
//
// Under a standing queue a call waits at most [overload.StandingWaitNeeds]
// × what its route needs (at least [overload.MinStandingWait]), counted
// from when the queue became standing or from its arrival if later; then it
// is refused as overload ([RefusalQueueFull]: HTTP 503, gRPC
// RESOURCE_EXHAUSTED), with the rest of its budget left for a retry
// elsewhere: CoDel's bound as Facebook applies it with adaptive LIFO. Its
// own deadline alone let a call with a 1 s budget wait 900 ms, served only
// in a lull, and such calls made the slowest good answers (a p99 of
// 690–820 ms in docs/benchmarks.md's overload scenario; bounded, 135–150
// ms). A queue that empties within [LIFOAfter] keeps FIFO, each call
// waiting while it can still finish.
//
// When the backlog is full, a FIFO queue refuses the new call; a LIFO queue
// admits it and refuses its oldest waiting call instead, the one it would
// serve last.
//
// The queue is an [overload.Limiter] with a fixed limit in arrival order
// ([overload.WithFixedLimit], [overload.WithBacklog],
// [overload.WithArrivalOrder]): the waiting rule is written once, there,
// and shared with the client side's limit ([deadline.Policy.Limiter]). An
// adaptive overload.Limiter, built with WithArrivalOrder, gives a server
// an adaptive limit in its place.
//
// It is safe for concurrent use. A waiting call is the caller's own
// goroutine, blocked until it gets a slot or leaves; the queue starts no
// goroutine.
func NewQueue(limit, backlog int) (*overload.Limiter, error) {
	switch {
	case limit <= 0:
		return nil, &deadline.PolicyError{Field: "admission.NewQueue limit", Value: limit, Allowed: "> 0 calls at once"}
	case backlog < 0:
		return nil, &deadline.PolicyError{Field: "admission.NewQueue backlog", Value: backlog, Allowed: ">= 0 waiting calls (0: none wait)"}
	}
	return overload.NewLimiter(overload.WithFixedLimit(limit), overload.WithBacklog(backlog), overload.WithArrivalOrder())
}

// DefaultBacklogPerSlot is how many calls [DefaultQueue] lets wait per
// slot. A backlog only bounds how many calls wait at once: how long each
// waits is bounded by its own budget (it leaves once it can no longer
// finish) and, under a standing queue, by [overload.StandingWaitNeeds] ×
// its need. So a backlog larger than needed costs only the waiting calls'
// memory, one too small refuses calls a passing burst would have served.
// Measured in virtual time (TestDefaultsFigures: handlers sharing 10
// workers of 20 ms, Poisson arrivals, budgets 100 ms to 1 s, a queue of 10
// slots, 60 s): at 0.8× of capacity a backlog of 0, 1, 5, 10, 20 and 1 000
// refuses 12.8, 8.8, 1.8, 0.6, 0.5 and 0.5 % of the calls; at 2×, goodput
// is 92.5, 97.7, 99.9, 100, 100, 100 % of capacity. Two per slot is where
// more stops helping.
const DefaultBacklogPerSlot = 2

// DefaultQueue returns a queue for handlers bound by the CPU:
// NewQueue(runtime.GOMAXPROCS(0), [DefaultBacklogPerSlot] ×
// runtime.GOMAXPROCS(0)), read when it is called. More CPU-bound handlers at
// once than Go runs threads only share the processors: each takes longer,
// none finishes sooner. For handlers that mostly wait (on a database, on
// other services), GOMAXPROCS says nothing about what the server can run:
// pass [NewQueue] the size of what they wait on (the connection pool), or
// use an adaptive limit ([Config.Limiter]), which finds it.
func DefaultQueue() *overload.Limiter {
	n := runtime.GOMAXPROCS(0)
	q, err := NewQueue(n, DefaultBacklogPerSlot*n)
	if err != nil {
		panic("admission: DefaultQueue: " + err.Error()) // GOMAXPROCS >= 1: unreachable
	}
	return q
}

// acquire takes a slot in l for a call that must end by end and needs need
// once started, waiting only while it can (see [overload.Limiter]): whether
// it waited, how long, the permit, and RefusalNone or the refusal
// ([RefusalQueueTimeout], [RefusalQueueFull]; a limiter's open breaker and
// its standing-queue bound are answered as full: overload).
func acquire(ctx context.Context, l *overload.Limiter, route string, end time.Time, need time.Duration) (bool, time.Duration, overload.Permit, Refusal) {
	if p, ok := l.TryAcquire(route); ok {
		return false, 0, p, RefusalNone
	}
	p, err := l.Acquire(ctx, route, end, need)
	if err == nil {
		return p.Queued, p.Waited, p, RefusalNone
	}
	var le *overload.RefusedError
	if errors.As(err, &le) {
		queued := le.Queued
		if le.Cause == overload.CauseQueueTimeout {
			return queued, le.Waited, overload.Permit{}, RefusalQueueTimeout
		}
		return queued, le.Waited, overload.Permit{}, RefusalQueueFull
	}
	return false, 0, overload.Permit{}, RefusalQueueFull
}

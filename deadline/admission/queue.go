package admission

import (
	"context"
	"sync"
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

// LIFOAfter is how long an [Queue] must have held waiting calls
// without a break before it serves the newest first: CoDel's interval, as
// Facebook's servers use it to switch to LIFO ("Fail at Scale", 2015).
const LIFOAfter = 100 * time.Millisecond

// Queue bounds how many admitted calls a server runs at once
// (limit) and how many may wait for a slot (backlog). [Admitter] uses it:
// a call that finds every slot taken waits, and leaves without starting
// ([RefusalQueueTimeout]) once what is left of its budget could no longer
// cover what its route needs, or when its request ends; it never does work
// nobody will receive the answer to. A call that finds the backlog full is
// refused ([RefusalQueueFull]).
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
// When the backlog is full, a FIFO queue refuses the new call; a LIFO queue
// admits it and refuses its oldest waiting call instead, which is the least
// likely to finish.
//
// It is safe for concurrent use. A waiting call is the caller's own
// goroutine, blocked until it gets a slot or leaves; the queue starts no
// goroutine.
type Queue struct {
	limit, backlog int

	mu         sync.Mutex
	running    int       // slots taken
	head, tail *waiter   // waiting calls, oldest first
	waiting    int       // len of the list
	busySince  time.Time // when the list last became non-empty
}

// waiter is a call waiting for a slot. Its fields after ready are the
// queue's, under its lock.
type waiter struct {
	ready      chan struct{} // closed when decided
	lastStart  time.Time     // it must start before this instant
	prev, next *waiter
	decided    bool
	refusal    Refusal // when decided: RefusalNone is a slot
}

// NewQueue returns a queue that runs at most limit calls at once
// (> 0) and lets at most backlog calls wait (>= 0; 0: a call that finds
// every slot taken is refused at once). Other values return a
// [*deadline.PolicyError].
func NewQueue(limit, backlog int) (*Queue, error) {
	switch {
	case limit <= 0:
		return nil, &deadline.PolicyError{Field: "admission.NewQueue limit", Value: limit, Allowed: "> 0 calls at once"}
	case backlog < 0:
		return nil, &deadline.PolicyError{Field: "admission.NewQueue backlog", Value: backlog, Allowed: ">= 0 waiting calls (0: none wait)"}
	}
	return &Queue{limit: limit, backlog: backlog}, nil
}

// Limit returns how many calls the queue runs at once.
func (q *Queue) Limit() int { return q.limit }

// Backlog returns how many calls may wait.
func (q *Queue) Backlog() int { return q.backlog }

// Len returns how many calls run and how many wait, now.
func (q *Queue) Len() (running, waiting int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.running, q.waiting
}

// tryAcquire takes a slot if one is free and nobody waits for one.
func (q *Queue) tryAcquire() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.running < q.limit && q.waiting == 0 {
		q.running++
		return true
	}
	return false
}

// wait waits for a slot for a call that must start before lastStart, or
// until ctx ends. It returns whether the call waited in the queue, how
// long, and RefusalNone with a slot taken, or the refusal.
func (q *Queue) wait(ctx context.Context, lastStart time.Time) (bool, time.Duration, Refusal) {
	start := time.Now()
	q.mu.Lock()
	switch {
	case q.running < q.limit && q.waiting == 0: // freed since tryAcquire
		q.running++
		q.mu.Unlock()
		return false, 0, RefusalNone
	case !start.Before(lastStart) || ctx.Err() != nil:
		q.mu.Unlock()
		return false, 0, RefusalQueueTimeout
	case q.waiting >= q.backlog:
		if q.backlog == 0 || !q.lifo(start) {
			q.mu.Unlock()
			return false, 0, RefusalQueueFull
		}
		q.decide(q.head, RefusalQueueFull)
	}
	w := &waiter{ready: make(chan struct{}), lastStart: lastStart}
	q.push(w, start)
	q.mu.Unlock()

	timer := time.NewTimer(lastStart.Sub(start))
	defer timer.Stop()
	select {
	case <-w.ready:
	case <-ctx.Done():
	case <-timer.C:
	}

	q.mu.Lock()
	defer q.mu.Unlock()
	waited := time.Since(start)
	if !w.decided {
		q.remove(w)
		return true, waited, RefusalQueueTimeout
	}
	if w.refusal == RefusalNone && (ctx.Err() != nil || !time.Now().Before(lastStart)) {
		// Given a slot as it was leaving: hand the slot on.
		q.handOff()
		return true, waited, RefusalQueueTimeout
	}
	return true, waited, w.refusal
}

// release frees a slot, handing it to a waiting call if one can still
// start.
func (q *Queue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.handOff()
}

// handOff gives the caller's slot to the next waiting call in the queue's
// order, refusing on the way those that can no longer start in time, or
// frees it. Under the lock.
func (q *Queue) handOff() {
	now := time.Now()
	for q.head != nil {
		w := q.head
		if q.lifo(now) {
			w = q.tail
		}
		if !now.Before(w.lastStart) {
			q.decide(w, RefusalQueueTimeout)
			continue
		}
		q.decide(w, RefusalNone) // the slot passes to w
		return
	}
	q.running--
}

// lifo reports whether the queue serves the newest first: it has held
// waiting calls without a break for LIFOAfter.
func (q *Queue) lifo(now time.Time) bool {
	return q.waiting > 0 && now.Sub(q.busySince) >= LIFOAfter
}

// decide removes w from the list and wakes it with r.
func (q *Queue) decide(w *waiter, r Refusal) {
	q.remove(w)
	w.decided, w.refusal = true, r
	close(w.ready)
}

func (q *Queue) push(w *waiter, now time.Time) {
	if q.tail == nil {
		q.head, q.busySince = w, now
	} else {
		q.tail.next, w.prev = w, q.tail
	}
	q.tail = w
	q.waiting++
}

func (q *Queue) remove(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next = nil, nil
	q.waiting--
}

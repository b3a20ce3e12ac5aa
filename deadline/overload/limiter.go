package overload

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// LIFOAfter is how long a [Limiter]'s queue must have held waiting calls
// without a break before it serves the one with the most budget left first
// instead of the oldest: CoDel's interval, as Facebook's servers use it to
// switch to LIFO ("Fail at Scale", 2015).
const LIFOAfter = 100 * time.Millisecond

// The adaptive limit's defaults ([NewLimiter]).
const (
	// DefaultInitialLimit is where an adaptive limit starts, as Netflix's
	// Gradient2 and failsafe-go's adaptivelimiter do; it reaches a
	// downstream's capacity within a second or two, since it is adjusted
	// every [DefaultLimitWindow].
	DefaultInitialLimit = 20
	// DefaultMinLimit and DefaultMaxLimit bound the adaptive limit.
	DefaultMinLimit = 1
	// DefaultMaxLimit is also a server's default (package admission's
	// Config.Limiter): the limit, not its maximum, keeps work from piling
	// up in the handlers, and a smaller maximum refuses servers whose
	// handlers mostly wait. Measured in virtual time (deadline/admission's
	// TestAdaptiveAdmissionDefaults* and TestDefaultsFigures, 60 s of
	// Poisson arrivals, budgets up to 1 s): in front of handlers sharing 10
	// workers of 20 ms, arrival order and every other default serve
	// 99.8–99.9 % of capacity at 2× and 99.9–100 % at 5× (a fixed queue of
	// exactly the 10 slots: 100 %), with peak limits of 22 and 28, and
	// refuse nothing at 0.8×; in front of 400 workers of 200 ms (handlers
	// waiting on I/O) at 0.8×, they refuse 5.8 %, all in the first 10 s
	// while the limit climbs from DefaultInitialLimit (peak 744), where a
	// maximum of 256, 64 and 16 refuses 24, 80 and 95 %: a multiple of
	// GOMAXPROCS would be the last. (On issue 38's main, ca687b3, the same
	// 2× run let the limit climb to 393, the good calls' p99 556 ms against
	// 60–66 ms now: the limit's signal, since fixed, not its maximum, piled
	// the work up.)
	DefaultMaxLimit = 1000
	// DefaultLatencyTolerance is how far the window's median latency may
	// rise above the baseline before the limit shrinks (Gradient2's
	// rttTolerance is 1.5; a deadline-bound caller has less room).
	DefaultLatencyTolerance = 1.25
	// DefaultLimitWindow is the shortest window of latency samples the
	// limit is adjusted from.
	DefaultLimitWindow = 100 * time.Millisecond
)

// Limiter bounds how many calls run at once against one downstream (a
// client's: one Limiter per downstream, shared by the policies of every
// route that calls it) or in one server's handlers, and lets a call wait
// for a slot only while it can still finish. Build it with [NewLimiter];
// set it on a deadline.Policy (Policy.Limiter) for client calls, or give
// it to package admission's Admitter for a server's handlers. It is the
// one waiting rule of the project: admission's queue is a Limiter with a
// fixed limit in arrival order.
//
// It holds two parts apart: the limit algorithm (how many calls at once:
// fixed, [WithFixedLimit], or adaptive, below) and the enforcement (the
// slots, the waiting order, the refusals), as Netflix's concurrency-limits
// separates a Limit from its Limiter; a [Breaker], when set, is asked
// before both.
//
// # Admission: can it still finish?
//
// Every call passes one rule, free slot or queue: it is admitted only if,
// from its place, it can still finish. A call that finds a free slot and
// nobody waiting takes it at once if its deadline less its need is ahead
// (the hot path: a few atomic operations, no lock, no allocation). Its need
// there is the route's typical latency while the downstream shows no
// pressure, else what the route needs nine times in ten
// ([Limiter.NeedAt]): on an idle downstream a call more likely to finish
// than not costs nobody a slot, and refused it would never be tried.
// Otherwise it is given its place in the queue only if, at that place, it
// can still finish: its deadline, less what it needs ([Limiter.Acquire]'s need: the
// learned service time of its route, and at least what the route needs
// nine times in ten when the downstream has no queue, from the latencies
// the limiter saw), less the wait its place implies (the calls before it ×
// the mean latency ÷ the limit, the rate at which slots free by Little's
// law), is still ahead. A waiting call leaves at once, refused with
// [ErrLimited] ([CauseQueueTimeout]), when its deadline less its need
// passes or its context ends: it never goes out to do work nobody will
// receive.
//
// # Order: adaptive, by what can finish
//
// While the queue empties regularly it serves waiting calls in arrival
// order (FIFO). Once it has held waiting calls for [LIFOAfter] without a
// break (a standing queue: overload), it serves first the call whose
// deadline, less twice its need, is latest, until it empties. Among the
// calls of one route that is the latest deadline first, the one most likely
// to finish in time, while the calls closest to their deadline leave by
// themselves; with one route's uniform budgets it is Facebook's adaptive
// LIFO ("Fail at Scale", ACM Queue 2015) and the order of Netflix's
// LifoBlockingLimiter. Across routes a cheap call goes before a costly one
// with the same deadline: a slot given to the call that needs less
// finishes more calls in time. When the backlog is full, the call the
// queue would serve last is refused ([CauseQueueFull]): under FIFO the
// newcomer; under the overloaded order the newcomer if it would be served
// last, else the waiting call served last (the earliest deadline less
// twice its need), never the one served first.
//
// That order trusts the deadlines: a client's are its own. A server's are
// its callers' claims, and a queue ordered by them sells places to whoever
// claims most; [WithArrivalOrder] orders by arrival alone (FIFO, then the
// newest first), the deadline deciding only who is refused.
//
// # Standing queue
//
// In a queue ordered by arrival ([WithArrivalOrder]: a server's), once the
// queue stands a call waits at most [StandingWaitNeeds] × its need or the
// limiter's mean latency, whichever is longer (at least [MinStandingWait]),
// counted from when the queue became standing or from its arrival if later,
// and is then refused with
// [CauseStandingQueue]: CoDel's bound under adaptive LIFO, as Facebook runs
// it. A client's queue, ordered by its own deadlines, lets a call wait
// while it can still finish.
//
// # The limit: each route's latency against its own baseline
//
// An adaptive limit (the default; [WithFixedLimit] turns it off) follows,
// in each window ([DefaultLimitWindow], at least 16 samples), the median
// of log(latency ÷ the route's baseline) over the calls that ended in it.
// It learns only service time: a completed call's latency is a sample; a
// call cut by its ceiling or its deadline is censored (its service time
// exceeds what it ran), a sample above the tolerance when what it ran
// already is, else nothing; a call that got no service time (an error or
// overload answer, a canceled call) teaches nothing ([Permit.Done]). The
// baseline is the route's typical latency when it is not queued: the
// lowest moving average of its completed calls' log-latency, each average
// counted at the top of its noise (4 standard errors above it: the lowest
// of a noisy average otherwise sinks with time below the typical latency,
// and the limit then sees a queue where there is none). It never
// follows a latency its own limit may have caused: it rises only when
// most windows (more than half, at every point) have shown queueing for
// 5 s and, the limit halved for one
// window, the calls started at that limit show a median still above the
// tolerance and lower by less than √2 (a queue of the limiter's own halves
// with the calls in flight; a downstream that really became slower does
// not); the limit then returns to where it was (else to what it would have
// been without the check). So the limit cannot ratchet up: a window's median rises
// with the queue the limit lets build, the baseline does not, and cut
// calls can only push the median up. When the median exceeds the
// tolerance, queueing has started downstream, and
// the limit is multiplied by tolerance ÷ median (at least ½), plus √limit
// of headroom; otherwise it grows by √limit, but never above twice the
// calls in flight in the window (Gradient2's rule for a limit the callers,
// not the downstream, bound).
//
// The signal is Netflix Gradient2's, a gradient of a short against a long
// latency (Gradient2Limit.java), with three changes for deadline-bound
// calls to a downstream with a heavy tail. The median, not the mean: one
// call of a Pareto tail moves a window's mean by a factor of two with no
// queue at all, while queueing moves every call, hence the median. Per
// route: routes of 20 ms and 200 ms sharing a downstream give a window
// median that jumps between the two; a log-ratio to each route's own
// baseline is comparable across them, so one limit serves the downstream.
// A baseline from the moving average, not the minimum: Vegas's and Envoy's
// minimum latency (VegasLimit.java; Envoy's gradient controller, which
// re-measures it by dropping to a small concurrency every minute) suits a
// narrow distribution, but in a log-normal one the minimum is a fraction
// of the median and the queue it implies never settles; failsafe-go's
// adaptivelimiter (a Vegas variant, adaptivelimiter/adaptivelimiter.go)
// compares a recent p90 with a baseline average, which the tail also
// moves. Peers grow
// about one permit a second (windows of a second or more, small steps);
// this one adjusts every 100 ms window and grows by √limit, which the
// can-finish rule makes safe: a limit that overshoots sends no call that
// could not finish, and the next window says so. Starting higher than the
// callers need was measured and not chosen: before the first window
// closes, a limit of 1000 sends a whole burst into the downstream's queue,
// and the first second of an overload is lost (docs/benchmarks.md).
//
// # Breaker
//
// With [WithBreaker] the limiter also refuses every call with
// [ErrDownstreamOpen] while the breaker is open, sends half-open probes
// under their ceiling, and tells the breaker how every call ended
// ([Breaker]).
//
// A Limiter is safe for concurrent use. A waiting call is the caller's own
// goroutine; the limiter starts none.
type Limiter struct {
	// The hot path.
	inflight atomic.Int64
	limit    atomic.Int64
	queued   atomic.Int64 // waiting calls: > 0 closes the hot path
	meanNS   atomic.Int64 // mean latency, for the queue's wait estimate
	// When the downstream last answered OutcomeOverload, in monotonic ns
	// since origin plus one (0: never), for the entry rule
	// (Limiter.NeedAt).
	overloadAt atomic.Int64

	config
	origin           time.Time
	minWindowSamples int

	mu        sync.Mutex
	head      *waiter // arrival order, oldest first
	tail      *waiter
	order     *waiter // the overloaded order's treap (limiterorder.go)
	seq       uint64  // arrivals, the order's tie-break
	rnd       uint64  // the treap's priorities
	busySince time.Time
	// The latency window: each sample is log(latency) less its route's
	// baseline.
	winStart  time.Time
	samples   []float64
	routes    map[string]*routeStat
	winMax    int64                                 // most calls in flight in the window
	routeView atomic.Pointer[map[string]*routeStat] // routes, for reading without the lock
	grants    []atomic.Uint64                       // the permits' grants: generation<<1 | held
	// The baseline check (rebaseAfter): whether one runs and since when
	// (only calls started since then are its samples), the median and the
	// limit before it, and since when every window has shown queueing.
	check      bool
	checkSince time.Time
	checkFrom  float64
	checkLimit float64
	aboveSince time.Time
	// The windows above and below the tolerance since aboveSince.
	aboveWins, belowWins int
	mean                 float64 // EWMA of latency, ns
	limitFloat           float64
}

// waiter is a call waiting for a slot. Its fields after ready are the
// limiter's, under its lock.
type waiter struct {
	ready      chan struct{} // closed when decided
	end        time.Time     // the call's deadline
	lastStart  time.Time     // it must start before this instant
	key        time.Time     // the overloaded order's: the largest first
	prev, next *waiter
	// In the overloaded order's treap: the calls served before it (left)
	// and after it (right), how many its tree holds, its arrival and its
	// random priority.
	left, right *waiter
	n           int
	seq, prio   uint64
	decided     bool
	refusal     Cause // when decided: CauseNone is a slot
	at          int   // when evicted: its place then (1 the next served)
}

// Option configures a [Limiter] built by [NewLimiter].
type Option interface{ apply(*config) error }

// config is a Limiter's configuration, set by its options.
type config struct {
	fixed      bool
	minLimit   int
	maxLimit   int
	initial    int
	backlog    int // < 0: as many as the limit
	backlogSet bool
	tolerance  float64
	window     time.Duration
	breaker    *Breaker
	arrival    bool // WithArrivalOrder
}

type option func(*config) error

func (f option) apply(c *config) error { return f(c) }

// WithFixedLimit turns adaptation off: the limiter runs at most n calls at
// once (> 0), as admission's Queue does. n <= 0 makes [NewLimiter] return a
// [*OptionError].
func WithFixedLimit(n int) Option {
	return option(func(l *config) error {
		if n <= 0 {
			return &OptionError{"overload.WithFixedLimit", n, "> 0 calls at once"}
		}
		l.fixed, l.initial, l.minLimit, l.maxLimit = true, n, n, n
		return nil
	})
}

// WithLimitRange sets where the adaptive limit starts and its bounds:
// 1 <= min <= initial <= max. Defaults: [DefaultMinLimit],
// [DefaultInitialLimit], [DefaultMaxLimit]. Anything else makes
// [NewLimiter] return a [*OptionError].
func WithLimitRange(minimum, initial, maximum int) Option {
	return option(func(l *config) error {
		if !(1 <= minimum && minimum <= initial && initial <= maximum) {
			return &OptionError{"overload.WithLimitRange", fmt.Sprintf("(%d, %d, %d)", minimum, initial, maximum),
				"1 <= min <= initial <= max"}
		}
		l.minLimit, l.initial, l.maxLimit = minimum, initial, maximum
		return nil
	})
}

// WithBacklog sets how many calls may wait for a slot (>= 0; 0: a call that
// finds every slot taken is refused at once). Default: as many as the
// current limit. n < 0 makes [NewLimiter] return a [*OptionError].
func WithBacklog(n int) Option {
	return option(func(l *config) error {
		if n < 0 {
			return &OptionError{"overload.WithBacklog", n, ">= 0 waiting calls (0: none wait)"}
		}
		l.backlog, l.backlogSet = n, true
		return nil
	})
}

// WithArrivalOrder orders the queue by arrival alone: FIFO while it
// empties, the newest first under a standing queue (adaptive LIFO),
// whatever the calls' deadlines, which then only decide whether a call is
// refused (it cannot finish from its place), never its place. A server's
// queue needs it: there the deadline is the caller's claim (a header any
// client can forge or leave out), and ordered by it, a request claiming a
// large budget would be served before honest ones; package admission's
// queues are built with it. Without it (a client's limiter, whose
// deadlines are its own) the overloaded order is the latest deadline less
// twice the need first (see [Limiter]).
func WithArrivalOrder() Option {
	return option(func(l *config) error {
		l.arrival = true
		return nil
	})
}

// ArrivalOrder reports whether the queue is ordered by arrival alone
// ([WithArrivalOrder]).
func (l *Limiter) ArrivalOrder() bool { return l.arrival }

// WithLatencyTolerance sets how far the median latency may rise above the
// baseline before the adaptive limit shrinks, in [1, 10] (default
// [DefaultLatencyTolerance]). Anything else, NaN included, makes
// [NewLimiter] return a [*OptionError].
func WithLatencyTolerance(t float64) Option {
	return option(func(l *config) error {
		if !(t >= 1 && t <= 10) {
			return &OptionError{"overload.WithLatencyTolerance", t, "in [1, 10] (e.g. 1.25: the median may rise 25 % above the baseline)"}
		}
		l.tolerance = t
		return nil
	})
}

// WithLimitWindow sets the shortest window the adaptive limit is adjusted
// from (> 0, default [DefaultLimitWindow]); a window also needs 16
// completed calls. Anything else makes [NewLimiter] return a [*OptionError].
func WithLimitWindow(d time.Duration) Option {
	return option(func(l *config) error {
		if d <= 0 {
			return &OptionError{"overload.WithLimitWindow", d, "> 0"}
		}
		l.window = d
		return nil
	})
}

// NewLimiter returns a Limiter with the defaults changed by opts: an
// adaptive limit from [DefaultInitialLimit] within [DefaultMinLimit] and
// [DefaultMaxLimit], a backlog as large as the limit, no breaker. An
// invalid option returns a [*OptionError] naming it; nil options are
// ignored. Build it inside a testing/synctest bubble to run it on the
// bubble's clock.
func NewLimiter(opts ...Option) (*Limiter, error) {
	l := &Limiter{
		config: config{
			minLimit: DefaultMinLimit, initial: DefaultInitialLimit, maxLimit: DefaultMaxLimit,
			tolerance: DefaultLatencyTolerance, window: DefaultLimitWindow, backlog: -1,
		},
		minWindowSamples: 16,
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&l.config); err != nil {
			return nil, err
		}
	}
	l.limit.Store(int64(l.initial))
	l.limitFloat = float64(l.initial)
	grants := 64
	for grants < maxGrants && grants < 2*l.maxLimit+8 {
		grants *= 2
	}
	l.grants = make([]atomic.Uint64, grants)
	l.origin = time.Now()
	l.rnd = uint64(l.origin.UnixNano()) | 1
	l.winStart = l.origin
	if !l.fixed {
		l.samples = make([]float64, 0, 256)
		l.routes = map[string]*routeStat{}
	}
	return l, nil
}

// Limit returns how many calls the limiter runs at once now; 0 for a
// Limiter not built by [NewLimiter].
func (l *Limiter) Limit() int { return int(l.limit.Load()) }

// Breaker returns the limiter's breaker ([WithBreaker]), nil without one.
func (l *Limiter) Breaker() *Breaker { return l.breaker }

// Backlog returns how many calls may wait now.
func (l *Limiter) Backlog() int {
	if l.backlog < 0 {
		return l.Limit()
	}
	return l.backlog
}

// Len returns how many calls run and how many wait, now.
func (l *Limiter) Len() (running, waiting int) {
	return int(l.inflight.Load()), int(l.queued.Load())
}

// TryAcquire takes a slot if one is free, nobody waits and the breaker is
// closed: the hot path, with no allocation and no lock. When it reports
// false, call [Limiter.Acquire], which decides whether the call may wait.
// It knows no deadline, so it cannot check that the call can still
// finish: a caller with one calls Acquire (which tries the hot path first).
// On an adaptive limit it reads the clock, to learn the call's latency
// when it is Done.
func (l *Limiter) TryAcquire(route string) (Permit, bool) {
	var now time.Time
	if !l.fixed {
		now = time.Now()
	}
	return l.TryAcquireAt(route, now)
}

// TryAcquireAt is [Limiter.TryAcquire] for a call that starts at now, a
// clock reading the caller has anyway (deadline.Do's attempt start): the
// permit's latency is measured from it, and the limiter reads no clock.
// A zero now on an adaptive limit teaches it nothing.
func (l *Limiter) TryAcquireAt(route string, now time.Time) (Permit, bool) {
	g, ok := l.tryAcquire()
	if !ok {
		return Permit{}, false
	}
	return Permit{l: l, route: route, start: now, grant: g}, true
}

// tryAcquire takes a free slot and its grant, if the hot path may.
func (l *Limiter) tryAcquire() (grant uint64, ok bool) {
	if l.breaker != nil && !l.breaker.closed() || l.queued.Load() > 0 {
		return 0, false
	}
	for {
		n := l.inflight.Load()
		if n >= l.limit.Load() {
			return 0, false
		}
		if l.inflight.CompareAndSwap(n, n+1) {
			return l.grantAt(uint64(n)), true
		}
	}
}

// Acquire takes a slot for a call that must end by end and needs need to
// finish once it starts (its learned service time, else the floor), waiting
// for one only while the call can still finish (see [Limiter]), or until
// ctx ends. It returns the permit, or a [*RefusedError]: [CauseQueueFull],
// [CauseQueueTimeout], [CauseStandingQueue] (matching [ErrLimited]) or
// [CauseOpen] (matching [ErrDownstreamOpen]). A zero end means no
// deadline.
//
// Every call passes the same rule, whether it finds a free slot or a place
// in the queue: one that could not finish even if it started now (end less
// its need, at least the route's: [Limiter.NeedAt] for a free slot,
// [Limiter.Need] for a place in the queue, is not ahead) is refused at once
// with [CauseQueueTimeout] at position 1, and takes no slot. A negative need
// returns a [*OptionError].
func (l *Limiter) Acquire(ctx context.Context, route string, end time.Time, need time.Duration) (Permit, error) {
	if need < 0 {
		return Permit{}, &OptionError{"overload.Limiter.Acquire need", need, ">= 0 (what the call needs once started)"}
	}
	now := time.Now()
	// What the route needs nine times in ten when the downstream has no
	// queue: its baseline plus 1.28 standard deviations, in logs.
	asked := need
	rs := l.routeStat(route)
	if rs != nil {
		need = max(need, time.Duration(rs.need.Load()))
	}
	if !end.IsZero() && !now.Add(need).Before(end) {
		// Not even a free slot would let it finish nine times in ten:
		// the same rule for a free slot as for a place in the queue,
		// unless the downstream shows no pressure and the call can
		// finish in the route's typical latency (see NeedAt).
		if rs != nil && now.Add(max(asked, time.Duration(rs.typical.Load()))).Before(end) && !l.pressed(now) {
			if g, ok := l.tryAcquire(); ok {
				return Permit{l: l, route: route, start: now, grant: g}, nil
			}
		}
		return Permit{}, l.refuse(CauseQueueTimeout, l.Limit(), 1, 0, need, end, now, false)
	}
	if g, ok := l.tryAcquire(); ok {
		return Permit{l: l, route: route, start: now, grant: g}, nil
	}
	if l.breaker != nil && !l.breaker.closed() {
		probe, ceiling, decided := l.breaker.admit(now, end, need, time.Duration(l.meanNS.Load()))
		switch {
		case probe:
			// A probe goes out whatever the limit: it is how the breaker
			// learns the downstream is back.
			l.inflight.Add(1)
			return l.grant(Permit{l: l, route: route, start: now, Probe: true, Ceiling: ceiling}), nil
		case decided:
			e := &RefusedError{Cause: CauseOpen, Limit: int(l.limit.Load()), Need: need}
			if !end.IsZero() {
				e.Remaining = end.Sub(now)
			}
			return Permit{}, e
		}
	}
	l.mu.Lock()
	limit := l.limit.Load()
	waiting := int(l.queued.Load())
	if waiting == 0 && l.take() { // freed since TryAcquire
		l.mu.Unlock()
		return l.grant(Permit{l: l, route: route, start: now}), nil
	}
	lastStart := time.Time{}
	if !end.IsZero() {
		lastStart = end.Add(-need)
	}
	lifo := l.lifo(now)
	w := &waiter{end: end, lastStart: lastStart, key: priority(end, need)}
	if l.arrival {
		w.key = l.origin // one key for all: the newest first
	}
	// Its place: FIFO behind every waiting call; in the overloaded order
	// behind those served before it (the newest first on a tie: it).
	place := waiting
	if lifo {
		w.seq = l.seq + 1
		place = l.orderPlace(w)
	}
	expect := time.Duration(float64(place+1) * float64(l.meanNS.Load()) / float64(limit))
	backlog := l.backlog
	if backlog < 0 {
		backlog = int(limit)
	}
	switch {
	case ctx.Err() != nil || !lastStart.IsZero() && !now.Add(expect).Before(lastStart):
		l.mu.Unlock()
		return Permit{}, l.refuse(CauseQueueTimeout, int(limit), place+1, 0, need, end, now, false)
	case waiting >= backlog:
		// The backlog is full: the call the queue would serve last leaves,
		// the newcomer (FIFO; or served last in the overloaded order), or
		// the waiting call the newcomer goes before. Never the first
		// served: evicting the oldest, under the overloaded order, refused
		// a call with most of its budget left for one that then timed out.
		last := l.orderLast()
		if backlog == 0 || !lifo || last == nil || place >= waiting {
			l.mu.Unlock()
			return Permit{}, l.refuse(CauseQueueFull, int(limit), place+1, 0, need, end, now, false)
		}
		last.at = waiting + 1 // behind the newcomer: beyond the backlog
		l.decide(last, CauseQueueFull)
	}
	w.ready = make(chan struct{})
	l.push(w, now)
	standingFrom := l.busySince.Add(LIFOAfter)
	l.fill(now) // a slot freed since the look above
	l.mu.Unlock()

	// It waits until it is given a slot or refused, its context ends, it
	// can no longer start in time (lastStart), or, in a queue ordered by
	// arrival, it has waited StandingWaitNeeds × max(need, the mean
	// latency) since the queue became standing, or since it came if that
	// is later (see
	// [StandingWaitNeeds]). The queue stays standing while w waits in
	// it: busySince moves only when the queue empties.
	timeout, standingEnd := lastStart, time.Time{}
	if l.arrival {
		standingEnd = now
		if s := standingFrom; s.After(now) {
			standingEnd = s
		}
		standingEnd = standingEnd.Add(standingWait(max(need, time.Duration(l.meanNS.Load()))))
		if timeout.IsZero() || standingEnd.Before(timeout) {
			timeout = standingEnd
		}
	}
	var expire <-chan time.Time
	if !timeout.IsZero() {
		timer := time.NewTimer(timeout.Sub(now))
		defer timer.Stop()
		expire = timer.C
	}
	select {
	case <-w.ready:
	case <-ctx.Done():
	case <-expire:
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	t := time.Now()
	waited := t.Sub(now)
	cause := CauseQueueTimeout
	if !standingEnd.IsZero() && !t.Before(standingEnd) && (lastStart.IsZero() || t.Before(lastStart)) {
		cause = CauseStandingQueue // it could still have finished
	}
	if !w.decided {
		l.remove(w)
		l.fill(t) // the order may have changed
		return Permit{}, l.refuse(cause, int(l.limit.Load()), place+1, waited, need, end, now, true)
	}
	if w.refusal == CauseNone && (ctx.Err() != nil || !lastStart.IsZero() && !t.Before(lastStart)) {
		// Given a slot as it was leaving: hand it on.
		l.inflight.Add(-1)
		l.fill(t)
		return Permit{}, l.refuse(CauseQueueTimeout, int(l.limit.Load()), place+1, waited, need, end, now, true)
	}
	if w.refusal != CauseNone {
		if w.at > 0 {
			place = w.at - 1 // where it stood when it was refused
		}
		return Permit{}, l.refuse(w.refusal, int(l.limit.Load()), place+1, waited, need, end, now, true)
	}
	return l.grant(Permit{l: l, route: route, start: t, Queued: true, Waited: waited}), nil
}

// routeStat is one route's latency, in log(nanoseconds): a moving average
// and the baseline (see [Limiter]).
type routeStat struct {
	avg, base float64
	dev       float64 // moving average of (x - avg)², its variance
	n         int
	// need is what the route needs nine times in ten with no queue, and
	// typical its baseline (about its median), in nanoseconds (0 until
	// warm): read without the lock.
	need, typical atomic.Int64
}

// warmSamples is how many samples a route's baseline rests on before it
// counts.
const warmSamples = 32

// baseMargin is how many standard errors above a route's moving average
// its baseline may come down to. The average of warmSamples samples is
// noisy, and its lowest value sinks with time as far as that noise
// reaches: over the few minutes of scenario 10 (log-latency σ 0.66, a
// standard error of 0.08) it sank 0.26 below the mean, beyond the
// tolerance's 0.22, and every window then looked queued with none (the
// propagated 10× cell's bad runs, TestLimiterBaselineDoesNotSink). Counted
// at the top of its noise, it ends within a standard error of the mean
// over such a run; a route of constant latency (no noise) is counted at
// its average, as before.
const baseMargin = 4

// needZ is the normal quantile of the share of a route's calls a waiting
// call must be as fast as to be sent: 1.28, nine in ten.
var needZ = 1.28

// maxRoutes bounds the routes a limiter keeps apart; more share one entry.
const maxRoutes = 256

// rebaseAfter is how long every window must have shown queueing before
// the limiter checks, by halving its limit for one window of the calls
// started at that limit, whether the latency is its own queue's or the
// downstream's new service time.
const rebaseAfter = 5 * time.Second

// route returns p's route's statistics, adding them. Under the lock.
func (l *Limiter) route(name string) *routeStat {
	if rs := l.routes[name]; rs != nil {
		return rs
	}
	if len(l.routes) >= maxRoutes {
		if rs := l.routes[""]; rs != nil {
			return rs
		}
		name = ""
	}
	rs := &routeStat{}
	l.routes[name] = rs
	// A copy for the lock-free reader (Limiter.Need): routes are few
	// and added once.
	view := make(map[string]*routeStat, len(l.routes))
	for k, v := range l.routes {
		view[k] = v
	}
	l.routeView.Store(&view)
	return rs
}

// Need returns what route's calls need nine times in ten when the
// downstream has no queue (from the latencies the limiter saw: 0 while
// unknown, and always on a fixed limit): the least need [Limiter.Acquire]
// assumes for the route while the downstream is under pressure, and for a
// call that waits. It takes no lock.
func (l *Limiter) Need(route string) time.Duration {
	if rs := l.routeStat(route); rs != nil {
		return time.Duration(rs.need.Load())
	}
	return 0
}

// NeedAt returns the least need [Limiter.Acquire] assumes at now for a
// call of route that finds a free slot: [Limiter.Need] while the downstream
// shows pressure (every slot taken, a call waiting, or an [OutcomeOverload]
// answer within the last second), else the route's typical latency with no
// queue (its baseline, about its median: a call that can finish in it is
// more likely to succeed than not, and on a downstream under no pressure it
// costs nobody else a slot). A queue downstream shows as pressure through
// the limit: windows above the tolerance shrink it to about the calls in
// flight. 0 while unknown, and always on a fixed limit. now is the caller's
// clock reading (as for [Limiter.TryAcquireAt]); it takes no lock.
func (l *Limiter) NeedAt(route string, now time.Time) time.Duration {
	rs := l.routeStat(route)
	if rs == nil {
		return 0
	}
	if l.pressed(now) {
		return time.Duration(rs.need.Load())
	}
	return time.Duration(rs.typical.Load())
}

// pressureHold is how long after an [OutcomeOverload] answer the
// downstream counts as under pressure for [Limiter.NeedAt]: ten limit
// windows of the default, so that an overload's scattered refusals keep
// the stricter need between them, while a downstream that has stopped
// refusing gets its likely calls back within a second.
const pressureHold = time.Second

// pressed reports whether the downstream shows pressure at now (see
// [Limiter.NeedAt]). It takes no lock.
func (l *Limiter) pressed(now time.Time) bool {
	if l.queued.Load() > 0 || l.inflight.Load() >= l.limit.Load() {
		return true
	}
	at := l.overloadAt.Load()
	return at != 0 && int64(now.Sub(l.origin))+1-at < int64(pressureHold)
}

// routeStat returns route's statistics without the lock, nil while it
// has none.
func (l *Limiter) routeStat(route string) *routeStat {
	v := l.routeView.Load()
	if v == nil {
		return nil
	}
	rs := (*v)[route]
	if rs == nil && len(*v) >= maxRoutes {
		rs = (*v)[""]
	}
	return rs
}

// learn records one call's outcome, and what its latency says. Under the
// lock.
func (l *Limiter) learn(p *Permit, o Outcome, now time.Time) {
	k := o.sample()
	if k == sampleNone || p.start.IsZero() {
		return
	}
	rtt := max(now.Sub(p.start)-p.excluded, 0)
	if n := l.inflight.Load() + 1; n > l.winMax {
		l.winMax = n
	}
	rs := l.route(p.route)
	x := math.Log(float64(max(rtt, time.Microsecond)))
	if k == sampleCensored {
		// At least rtt: queueing beyond the tolerance if rtt already is,
		// else nothing known. Never a latency: learned at the cut, a
		// route whose calls are all cut would show a latency no higher
		// than its deadline, and its baseline would follow it there.
		if rs.n >= warmSamples && x-rs.base > math.Log(l.tolerance) {
			l.sample(x-rs.base, p.start, now)
		}
		return
	}
	if l.mean == 0 {
		l.mean = float64(rtt)
	} else {
		l.mean += (float64(rtt) - l.mean) / 64
	}
	l.meanNS.Store(int64(l.mean))
	switch {
	case rs.n == 0:
		rs.avg, rs.base = x, x
	case rs.n < warmSamples:
		d := x - rs.avg
		rs.avg += d / float64(rs.n+1)
		rs.dev += (d*d - rs.dev) / float64(rs.n+1)
		rs.base = rs.avg
	default:
		d := x - rs.avg
		rs.avg += d / warmSamples
		rs.dev += (d*d - rs.dev) / (4 * warmSamples)
		// The lowest of the moving averages, each counted at the top
		// of its noise: see baseMargin.
		rs.base = min(rs.base, rs.avg+baseMargin*math.Sqrt(rs.dev/(2*warmSamples-1)))
	}
	rs.n++
	if rs.n < warmSamples {
		return // its baseline is not known yet
	}
	rs.need.Store(int64(math.Exp(rs.base + needZ*math.Sqrt(rs.dev))))
	rs.typical.Store(int64(math.Exp(rs.base)))
	l.sample(x-rs.base, p.start, now)
}

// sample adds one log(latency / baseline) of a call started at started to
// the window, and adjusts the limit when the window closes. Under the
// lock.
func (l *Limiter) sample(v float64, started, now time.Time) {
	if l.check && started.Before(l.checkSince) {
		return // a call started before the check: at the old limit
	}
	if len(l.samples) < cap(l.samples) {
		l.samples = append(l.samples, v)
	} else {
		l.samples[int(uint64(now.UnixNano())%uint64(len(l.samples)))] = v
	}
	if now.Sub(l.winStart) < l.window || len(l.samples) < l.minWindowSamples {
		return
	}
	slices.Sort(l.samples)
	median := l.samples[len(l.samples)/2] // log(median latency / baseline)
	tol := math.Log(l.tolerance)
	limit := l.limitFloat
	headroom := math.Sqrt(limit)
	switch {
	case l.check:
		// The calls started at half the limit. If their latency is still
		// above the tolerance and fell by less than √2 (a queue of ours
		// halves with what is in flight), the downstream's service time
		// rose: the baselines follow, and the limit goes back to where it
		// was. Else the queue was ours, and the limit is what it would
		// have been without the check.
		l.check = false
		limit, headroom = l.checkLimit, math.Sqrt(l.checkLimit)
		if median > tol && median > l.checkFrom-math.Ln2/2 {
			for _, r := range l.routes {
				r.base = min(r.base+median, max(r.avg, r.base))
			}
			break
		}
		limit = limit*max(math.Exp(tol-l.checkFrom), 0.5) + headroom
	case median > tol:
		if l.aboveSince.IsZero() {
			l.aboveSince, l.aboveWins, l.belowWins = l.winStart, 0, 0
		}
		l.aboveWins++
		if now.Sub(l.aboveSince) >= rebaseAfter {
			l.check, l.checkSince, l.checkFrom, l.checkLimit, l.aboveSince = true, now, median, limit, time.Time{}
			limit /= 2
			break
		}
		limit = limit*max(math.Exp(tol-median), 0.5) + headroom
	default:
		// One window below the tolerance does not end the evidence:
		// with a baseline too low (set by the first, fastest calls to
		// complete) the median sits about the tolerance, and a window
		// in two falls below it. Most windows above does.
		if l.belowWins++; l.belowWins >= l.aboveWins {
			l.aboveSince = time.Time{}
		}
		// Grow, but never far above what the callers use: twice the most
		// calls in flight in the window (Gradient2's rule for a limit the
		// caller, not the downstream, bounds). A burst may then double
		// what is in flight, not send the whole limit into the
		// downstream's queue before a window can say so.
		limit = min(limit+headroom, max(2*float64(l.winMax), limit*0.9))
	}
	l.limitFloat = min(max(limit, float64(l.minLimit)), float64(l.maxLimit))
	l.limit.Store(int64(l.limitFloat))
	l.samples, l.winMax, l.winStart = l.samples[:0], l.inflight.Load(), now
}

// fill gives free slots to waiting calls in the queue's order, refusing on
// the way those that can no longer start in time. Under the lock.
func (l *Limiter) fill(now time.Time) {
	for l.head != nil {
		w := l.head
		if l.lifo(now) {
			w = l.orderFirst()
		}
		if !w.lastStart.IsZero() && !now.Before(w.lastStart) {
			l.decide(w, CauseQueueTimeout)
			continue
		}
		if !l.take() {
			return
		}
		l.decide(w, CauseNone) // the slot passes to w
	}
}

// take takes a slot if the limit allows one.
func (l *Limiter) take() bool {
	for {
		n := l.inflight.Load()
		if n >= l.limit.Load() {
			return false
		}
		if l.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// lifo reports whether the queue serves by budget left: it has held
// waiting calls without a break for LIFOAfter.
func (l *Limiter) lifo(now time.Time) bool {
	return l.head != nil && now.Sub(l.busySince) >= LIFOAfter
}

// decide removes w from the queue and wakes it with r.
func (l *Limiter) decide(w *waiter, r Cause) {
	l.remove(w)
	w.decided, w.refusal = true, r
	close(w.ready)
}

func (l *Limiter) push(w *waiter, now time.Time) {
	if l.tail == nil {
		l.head, l.busySince = w, now
	} else {
		l.tail.next, w.prev = w, l.tail
	}
	l.tail = w
	l.orderInsert(w)
	l.queued.Add(1)
}

func (l *Limiter) remove(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.tail = w.prev
	}
	w.prev, w.next = nil, nil
	l.orderRemove(w)
	l.queued.Add(-1)
}

// priority is a waiting call's key in the overloaded order, the largest
// served first: its deadline less twice its need. For one route's calls
// (one need) it is the latest deadline first, the one most likely to
// finish; across routes a cheap call goes before a costly one with the same
// deadline, since a slot given to a call that needs less finishes more
// calls in time. A call without a deadline comes last among those with one.
func priority(end time.Time, need time.Duration) time.Time {
	if end.IsZero() {
		return end
	}
	return end.Add(-2 * need)
}

// refuse builds a refusal.
func (l *Limiter) refuse(c Cause, limit, place int, waited, need time.Duration, end, now time.Time, queued bool) *RefusedError {
	e := &RefusedError{Cause: c, Limit: limit, Position: place, Waited: waited, Need: need, Queued: queued}
	if !end.IsZero() {
		e.Remaining = end.Sub(now.Add(waited))
	}
	return e
}

// StandingWaitNeeds is how long a call may wait in a standing queue (one
// that has held waiting calls for [LIFOAfter] without a break) of a
// limiter ordered by arrival ([WithArrivalOrder]: a server's admission
// queue), in multiples of what it needs once started ([Limiter.Acquire]'s
// need) or of the limiter's mean latency if longer (an adaptive limit
// learns it; a fixed one does not); then it is refused with
// [CauseStandingQueue], with the rest of its budget for a retry elsewhere
// or for its caller. This is CoDel's target as Facebook's servers apply it
// under adaptive LIFO ("Fail at Scale", ACM Queue 2015: once the queue has
// not been empty for N ms, "the amount of time spent in the queue is
// limited to M ms"; their M is 5 ms), sized by the work rather than by a
// server-wide constant. Why a couple of service times: at its limit a
// queue's slots free at limit ÷ service time, so under overload the calls
// that arrived within the last service time or two already fill every slot
// that frees; a call kept longer is served only in a lull, after the whole
// queue, and such calls were the slowest good calls: in the overload
// scenario (docs/benchmarks.md) the requests that waited hundreds of
// milliseconds in the server's queue made a p99 of 690–820 ms, against
// 150–190 ms for client limiters that refuse at once. The mean latency
// keeps a cheap route's calls from being refused after a few milliseconds
// while the slots turn over at the pace of a costly one.
//
// A client's queue (ordered by its own deadlines) has no such bound: it
// serves the call with the most budget left first, and bounding its wait
// the same way was measured and moved neither the p99 nor the goodput the
// right way.
const StandingWaitNeeds = 2

// MinStandingWait is the least a call may wait in a standing queue, for a
// call whose need is unknown (0) or tiny: Facebook's M of 5 ms.
const MinStandingWait = 5 * time.Millisecond

// standingWait is how long a call that needs need may wait in a standing
// queue.
func standingWait(need time.Duration) time.Duration {
	return max(StandingWaitNeeds*need, MinStandingWait)
}

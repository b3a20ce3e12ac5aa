package overload

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/deadlinebudget/budget/deadline/internal/ring"
)

// The breaker's defaults ([WithBreaker]): it opens when half of at least 20
// calls in the last 10 s failed, stays open 5 s, and closes after 3
// successful probes.
const (
	DefaultFailureRatio  = 0.5
	DefaultMinCalls      = 20
	DefaultFailureWindow = 10 * time.Second
	DefaultOpenFor       = 5 * time.Second
	DefaultProbes        = 3
)

// Breaker opens on sustained failure, and then refuses every call at once
// with [ErrDownstreamOpen] ([CauseOpen]) until probes show the downstream
// healthy. A [Limiter] built [WithBreaker] holds one ([Limiter.Breaker]),
// asks it before every call and tells it how each ended.
//
// Closed, it counts, over a sliding window ([WithFailureWindow]; counts
// leave it a tenth of the window at a time, on the retry budget's
// lock-free ring of buckets), the calls that ended and those that failed
// ([OutcomeFailure], [OutcomeError], [OutcomeTimeout]), and opens once
// MinCalls have ended in the window and at least FailureRatio of them
// failed. Open, it refuses every call for OpenFor. Then it is half-open: at
// most Probes calls at once go out as probes ([Permit.Probe]); Probes
// successes close it (with its counts cleared), one failure opens it
// again. Every change of state is a [Transition], given to the callback of
// [WithOnTransition] and readable as [Breaker.State].
//
// # Probes any caller that can finish carries
//
// A probe runs under a ceiling ([Permit.Ceiling]): [WithProbeCeiling], or
// else what the call needs ([Limiter.Acquire]'s need, at least the route's
// learned service time and the limiter's mean latency; none while neither
// is known): what a healthy downstream takes. A call becomes a probe if its
// budget holds that ceiling, so a caller with about the service time
// carries one and the breaker closes once the downstream is healthy,
// whatever the callers' budgets (a probe once needed twice the ceiling, and
// a breaker whose callers had 1.5× the service time stayed half-open for
// good). It never spends a caller's last budget: the ceiling cuts a probe
// of a downstream still failing slowly at what a healthy one needs,
// deadline.Do grants it within the budget less the policy's Floor (the
// caller's reserve), and a call whose budget cannot hold the ceiling is
// refused as open at once, without spending anything.
//
// A call cut by its caller's deadline ([OutcomeCut]) is not a failure: the
// budget, not the downstream, was too small, and a breaker that counted it
// would open on a route whose callers send budgets below its service time,
// refusing the callers whose budgets fit. Overload answers
// ([OutcomeOverload]) are left to the limit and to throttling: they count
// neither way either.
//
// A Breaker is safe for concurrent use; a closed one counts without a
// lock. It runs on the clock of the limiter that holds it (a
// testing/synctest bubble's inside one).
type Breaker struct {
	state atomic.Uint32 // a State: the hot path reads it

	ratio        float64
	minCalls     int
	window       time.Duration
	openFor      time.Duration
	probes       int
	probeCeiling time.Duration
	onTransition func(Transition)

	clock    ring.Clock
	calls    ring.Counts
	failures ring.Counts

	mu        sync.Mutex
	openUntil time.Time
	inProbe   int // probes in flight, half-open
	probeWins int
}

// BreakerOption configures the [Breaker] of [WithBreaker].
type BreakerOption interface{ apply(*Breaker) error }

type breakerOption func(*Breaker) error

func (f breakerOption) apply(b *Breaker) error { return f(b) }

// WithFailureRatio sets the share of failed calls that opens the breaker,
// in (0, 1] (default [DefaultFailureRatio]), and the least number of calls
// ended in the window before it may open, >= 1 (default
// [DefaultMinCalls]). Anything else makes [NewLimiter] return an
// [*OptionError].
func WithFailureRatio(ratio float64, minCalls int) BreakerOption {
	return breakerOption(func(b *Breaker) error {
		switch {
		case math.IsNaN(ratio) || ratio <= 0 || ratio > 1:
			return &OptionError{"overload.WithFailureRatio ratio", ratio, "in (0, 1], e.g. 0.5"}
		case minCalls < 1:
			return &OptionError{"overload.WithFailureRatio minCalls", minCalls, ">= 1"}
		}
		b.ratio, b.minCalls = ratio, minCalls
		return nil
	})
}

// WithFailureWindow sets the sliding window failures are counted over (>
// 0, default [DefaultFailureWindow]). Anything else makes [NewLimiter]
// return an [*OptionError].
func WithFailureWindow(d time.Duration) BreakerOption {
	return breakerOption(func(b *Breaker) error {
		if d <= 0 {
			return &OptionError{"overload.WithFailureWindow", d, "> 0"}
		}
		b.window = d
		return nil
	})
}

// WithOpenFor sets how long the breaker stays open before probing (> 0,
// default [DefaultOpenFor]). Anything else makes [NewLimiter] return an
// [*OptionError].
func WithOpenFor(d time.Duration) BreakerOption {
	return breakerOption(func(b *Breaker) error {
		if d <= 0 {
			return &OptionError{"overload.WithOpenFor", d, "> 0"}
		}
		b.openFor = d
		return nil
	})
}

// WithProbes sets how many probes may be in flight at once while
// half-open, and how many must succeed to close the breaker (>= 1, default
// [DefaultProbes]), and, when ceiling > 0, the most a probe may run (0:
// what the call needs; < 0 is invalid). Anything else makes [NewLimiter]
// return an [*OptionError].
func WithProbes(n int, ceiling time.Duration) BreakerOption {
	return breakerOption(func(b *Breaker) error {
		switch {
		case n < 1:
			return &OptionError{"overload.WithProbes n", n, ">= 1"}
		case ceiling < 0:
			return &OptionError{"overload.WithProbes ceiling", ceiling, ">= 0 (0: what the call needs)"}
		}
		b.probes, b.probeCeiling = n, ceiling
		return nil
	})
}

// WithOnTransition sets a callback called once for every change of the
// breaker's state, on the goroutine of the call that caused it, after
// every lock is released (it may call the limiter and the breaker); calls
// from different goroutines may overlap. It must not block. A nil f
// removes it.
func WithOnTransition(f func(Transition)) BreakerOption {
	return breakerOption(func(b *Breaker) error {
		b.onTransition = f
		return nil
	})
}

// newBreaker returns a closed Breaker with the defaults changed by opts.
func newBreaker(opts []BreakerOption) (*Breaker, error) {
	b := &Breaker{
		ratio: DefaultFailureRatio, minCalls: DefaultMinCalls, window: DefaultFailureWindow,
		openFor: DefaultOpenFor, probes: DefaultProbes,
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(b); err != nil {
			return nil, err
		}
	}
	b.clock = ring.NewClock(b.window)
	return b, nil
}

// State returns the breaker's state now, read without a lock, for a gauge.
// An open breaker whose open time has passed reads Open until a call asks
// it (the call makes it half-open).
func (b *Breaker) State() State { return State(b.state.Load()) }

// Counts returns the calls that ended in the sliding window and how many
// of them failed, as the closed breaker counts them (0 while it is not
// closed, or just closed: the counts restart then).
func (b *Breaker) Counts() (calls, failures int) {
	e := b.clock.Epoch()
	return int(b.calls.Sum(e)), int(b.failures.Sum(e))
}

// closed reports whether the breaker lets calls through without asking.
func (b *Breaker) closed() bool { return b.state.Load() == uint32(Closed) }

// setState moves the breaker to s, returning the transition, if any, for
// notify. Under the lock.
func (b *Breaker) setState(s State, now time.Time, failures, calls int) (Transition, bool) {
	from := State(b.state.Load())
	if from == s {
		return Transition{}, false
	}
	b.state.Store(uint32(s))
	return Transition{From: from, To: s, At: now, Failures: failures, Calls: calls}, true
}

// notify hands a transition to OnTransition. Not under the lock.
func (b *Breaker) notify(t Transition, ok bool) {
	if ok && b.onTransition != nil {
		b.onTransition(t)
	}
}

// admit decides a call while the breaker is not closed (as read on the
// hot path): a probe with its ceiling, a refusal, or (decided false) the
// breaker closed meanwhile. need is what the call needs, mean the
// limiter's mean latency.
func (b *Breaker) admit(now, end time.Time, need, mean time.Duration) (probe bool, ceiling time.Duration, decided bool) {
	var t Transition
	var changed bool
	b.mu.Lock()
	defer func() {
		b.mu.Unlock()
		b.notify(t, changed)
	}()
	s := State(b.state.Load())
	if s == Open && !now.Before(b.openUntil) {
		s = HalfOpen
		t, changed = b.setState(s, now, 0, 0)
		b.inProbe, b.probeWins = 0, 0
	}
	if s == Closed {
		return false, 0, false
	}
	if s == Open || b.inProbe >= b.probes {
		return false, 0, true
	}
	ceiling = b.probeCeiling
	if ceiling == 0 {
		ceiling = max(need, mean)
	}
	// Nothing known of what a call needs (no need given, no latency seen):
	// the probe runs without a ceiling of its own. A call whose budget
	// cannot hold the ceiling could not finish even on a recovered
	// downstream: refused, it keeps its whole budget.
	if !end.IsZero() && ceiling > 0 && end.Sub(now) < ceiling {
		return false, 0, true
	}
	b.inProbe++
	return true, ceiling, true
}

// record counts one call's outcome, probe or not, and hands the
// transition it caused, if any, to OnTransition.
func (b *Breaker) record(probe bool, o Outcome, now time.Time) {
	if !probe {
		if !b.closed() {
			return
		}
		var fail bool
		switch o {
		case OutcomeSuccess, OutcomeAnswered:
		case OutcomeFailure, OutcomeError, OutcomeTimeout: // o.failed()
			fail = true
		default:
			return
		}
		// Counted without a lock; the lock only to open.
		e := b.clock.Epoch()
		b.calls.Add(e, 1)
		if !fail {
			return
		}
		b.failures.Add(e, 1)
		n, f := int(b.calls.Sum(e)), int(b.failures.Sum(e))
		if n < b.minCalls || float64(f) < b.ratio*float64(n) {
			return
		}
		b.mu.Lock()
		var t Transition
		var changed bool
		if b.closed() {
			b.openUntil = now.Add(b.openFor)
			t, changed = b.setState(Open, now, f, n)
		}
		b.mu.Unlock()
		b.notify(t, changed)
		return
	}
	b.mu.Lock()
	b.inProbe--
	var t Transition
	var changed bool
	if State(b.state.Load()) == HalfOpen {
		switch {
		case o == OutcomeSuccess || o == OutcomeAnswered:
			b.probeWins++
			if b.probeWins >= b.probes {
				b.calls.Reset()
				b.failures.Reset()
				t, changed = b.setState(Closed, now, 0, 0)
			}
		case o.failed():
			b.openUntil = now.Add(b.openFor)
			t, changed = b.setState(Open, now, 0, 0)
		}
	}
	b.mu.Unlock()
	b.notify(t, changed)
}

// WithBreaker gives the limiter a closed [Breaker] with the defaults
// ([DefaultFailureRatio], [DefaultMinCalls], [DefaultFailureWindow],
// [DefaultOpenFor], [DefaultProbes]) changed by opts: asked before every
// call, told how every call ended, read through [Limiter.Breaker]. An
// invalid option makes [NewLimiter] return an [*OptionError] naming it;
// nil options are ignored.
func WithBreaker(opts ...BreakerOption) Option {
	return option(func(c *config) error {
		b, err := newBreaker(opts)
		if err != nil {
			return err
		}
		c.breaker = b
		return nil
	})
}

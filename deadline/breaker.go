package deadline

import (
	"fmt"
	"math"
	"time"

	"github.com/deadlinebudget/budget/deadline/overload"
)

// LimitCause says why a [Limiter] or a throttling [RetryBudget] refused a
// call before it went out ([LimitError]). Its String form is the stable
// telemetry value.
type LimitCause uint8

const (
	// LimitNone: not refused.
	LimitNone LimitCause = iota
	// LimitQueueFull: every slot was taken and the backlog full: the
	// downstream is at its limit, whatever the budget ([ErrLimited]).
	LimitQueueFull
	// LimitQueueTimeout: the call could not finish from its place in the
	// queue, on arrival or while it waited: what was left of its budget no
	// longer covered the wait and what it needs ([ErrLimited]).
	LimitQueueTimeout
	// LimitOpen: the breaker is open, or half-open with no probe the
	// call's budget could afford ([ErrDownstreamOpen]).
	LimitOpen
	// LimitThrottled: client-side throttling dropped the call: the
	// downstream has been refusing many of the recent calls
	// ([RetryBudget]'s [WithThrottle], [ErrThrottled]).
	LimitThrottled
	// LimitStandingQueue: the queue was standing (it had held waiting
	// calls for [LIFOAfter] without a break) and the call waited in it as
	// long as such a queue lets a call wait ([Limiter], "Standing queue"),
	// with budget left: the downstream is at its limit ([ErrLimited]).
	LimitStandingQueue
)

var limitCauseNames = [...]string{
	LimitNone:          "none",
	LimitQueueFull:     "queue_full",
	LimitQueueTimeout:  "queue_timeout",
	LimitOpen:          "open",
	LimitThrottled:     "throttled",
	LimitStandingQueue: "standing_queue",
}

// String returns the stable name: "none", "queue_full", "queue_timeout",
// "open", "throttled" or "standing_queue".
func (c LimitCause) String() string {
	if int(c) < len(limitCauseNames) {
		return limitCauseNames[c]
	}
	return "unknown"
}

// Reason returns the stop reason of a call refused for c:
// [ReasonLimited], [ReasonOpen] or [ReasonThrottled] ([ReasonSuccess] for
// LimitNone).
func (c LimitCause) Reason() Reason {
	switch c {
	case LimitQueueFull, LimitQueueTimeout, LimitStandingQueue:
		return ReasonLimited
	case LimitOpen:
		return ReasonOpen
	case LimitThrottled:
		return ReasonThrottled
	}
	return ReasonSuccess
}

// LimitError is a call refused before it went out by a [Limiter] or by
// client-side throttling: nothing was sent. errors.Is matches the sentinel
// of its cause: [ErrLimited] (queue full, or could not finish from its place
// in the queue), [ErrDownstreamOpen] (the breaker) or [ErrThrottled]. None
// of them matches context.DeadlineExceeded: the downstream, not the
// caller's budget, refused it, and it is not "deadline too small".
type LimitError struct {
	Cause LimitCause
	// Limit is the limiter's limit when it decided (0 for throttling).
	Limit int
	// Position is the call's place in the queue (1 the next served) when
	// it arrived, or would have had; for a waiting call a full backlog
	// evicted, its place then (the last, beyond the backlog); 0 for the
	// breaker and throttling.
	Position int
	// Queued reports that it waited in the queue before it was refused.
	Queued bool
	// Waited is how long it waited in the queue.
	Waited time.Duration
	// Need is what the call needed to finish once started (its learned
	// service time, or the floor).
	Need time.Duration
	// Remaining is what was left of its budget when it was refused (0
	// without a deadline).
	Remaining time.Duration
}

// Error says why, e.g. "deadline: limited (queue_timeout): position 3 at
// limit 50, 20ms left, 40ms needed".
func (e *LimitError) Error() string {
	switch e.Cause {
	case LimitOpen:
		return fmt.Sprintf("deadline: downstream open (%s left)", readable(e.Remaining.Round(time.Millisecond/10)))
	case LimitThrottled:
		return "deadline: throttled on the client: the downstream refused too many recent calls"
	}
	return fmt.Sprintf("deadline: limited (%s): position %d at limit %d, %s left, %s needed", e.Cause, e.Position, e.Limit,
		readable(e.Remaining.Round(time.Millisecond/10)), readable(e.Need.Round(time.Millisecond/10)))
}

// Is matches the cause's sentinel.
func (e *LimitError) Is(target error) bool {
	return target != nil && target == e.Cause.Reason().Sentinel()
}

// ErrorType returns the cause's stable name, for error.type.
func (e *LimitError) ErrorType() string { return e.Cause.Reason().String() }

// Breaker opens a [Limiter] on sustained failure ([WithBreaker]): closed,
// it counts the calls that failed ([OutcomeFailure]: a retryable error, or
// an attempt that reached its own ceiling) among those that ended, and opens once
// MinCalls have ended within Window and at least FailureRatio of them
// failed. Open, it refuses every call at once with [ErrDownstreamOpen] for
// OpenFor. Then it is half-open: at most Probes calls at once go out as
// probes ([Permit.Probe]), and Probes successes close it, one failure opens
// it again.
//
// # Probes any caller that can finish carries
//
// A probe runs under a ceiling ([Permit.Ceiling]): ProbeCeiling, or else
// what the call needs ([Limiter.Acquire]'s need, at least the route's
// learned service time and the limiter's mean latency; none while neither
// is known): what a healthy downstream takes. A call becomes a probe if
// its budget holds that ceiling, so a caller with about the service time
// carries one and the breaker closes once the downstream is healthy,
// whatever the callers' budgets (a probe once needed twice the ceiling,
// and a breaker whose callers had 1.5× the service time stayed half-open
// for good). It never spends a caller's last budget: the ceiling cuts a
// probe of a downstream still failing slowly at what a healthy one needs,
// [Do] grants it within the budget less the policy's Floor (the caller's
// reserve), and a call whose budget cannot hold the ceiling is refused as
// open at once, without spending anything.
//
// A call cut by its caller's deadline ([OutcomeCut]) is not a failure: the
// budget, not the downstream, was too small, and a breaker that counted it
// would open on a route whose callers send budgets below its service time,
// refusing the callers whose budgets fit. Overload answers
// ([OutcomeOverload]) are left to the limit and to throttling: they count
// neither way either.
type Breaker struct {
	// FailureRatio is the share of failed calls that opens it, in (0, 1].
	FailureRatio float64
	// MinCalls is the least number of calls ended in the window before it
	// may open (>= 1).
	MinCalls int
	// Window is how long failures are counted before the counts restart
	// (> 0).
	Window time.Duration
	// OpenFor is how long it stays open before probing (> 0).
	OpenFor time.Duration
	// Probes is how many probes may be in flight at once while half-open,
	// and how many must succeed to close it (>= 1).
	Probes int
	// ProbeCeiling, when > 0, is the most a probe may run; 0: what the
	// call needs.
	ProbeCeiling time.Duration
	// OnTransition, when set, is called once for every change of state,
	// on the goroutine of the call that caused it, after the limiter's
	// lock is released (it may call the limiter); calls from different
	// goroutines may overlap. It must not block.
	OnTransition func(overload.Transition)
}

// DefaultBreaker returns a breaker that opens when half of at least 20
// calls in 10 s failed, stays open 5 s, and closes after 3 successful
// probes.
func DefaultBreaker() Breaker {
	return Breaker{FailureRatio: 0.5, MinCalls: 20, Window: 10 * time.Second, OpenFor: 5 * time.Second, Probes: 3}
}

func (b *Breaker) validate() error {
	switch {
	case math.IsNaN(b.FailureRatio) || b.FailureRatio <= 0 || b.FailureRatio > 1:
		return &PolicyError{"deadline.Breaker.FailureRatio", b.FailureRatio, "in (0, 1], e.g. 0.5"}
	case b.MinCalls < 1:
		return &PolicyError{"deadline.Breaker.MinCalls", b.MinCalls, ">= 1"}
	case b.Window <= 0:
		return &PolicyError{"deadline.Breaker.Window", b.Window, "> 0"}
	case b.OpenFor <= 0:
		return &PolicyError{"deadline.Breaker.OpenFor", b.OpenFor, "> 0"}
	case b.Probes < 1:
		return &PolicyError{"deadline.Breaker.Probes", b.Probes, ">= 1"}
	case b.ProbeCeiling < 0:
		return &PolicyError{"deadline.Breaker.ProbeCeiling", b.ProbeCeiling, ">= 0 (0: what the call needs)"}
	}
	return nil
}

// WithBreaker adds a [Breaker] to the limiter. An invalid one makes
// [NewLimiter] return a [*PolicyError] naming its field.
func WithBreaker(b Breaker) LimiterOption {
	return limiterOption(func(l *Limiter) error {
		l.breaker = &b
		return nil
	})
}

// The breaker's states, as the hot path reads them.
const (
	breakerClosed   = uint32(overload.Closed)
	breakerOpen     = uint32(overload.Open)
	breakerHalfOpen = uint32(overload.HalfOpen)
)

// BreakerState returns the breaker's state now ([overload.Closed] without
// a breaker), read without a lock, for a gauge; its String is "closed",
// "open" or "half_open".
func (l *Limiter) BreakerState() overload.State {
	return overload.State(l.state.Load())
}

// setState moves the breaker to s, returning the transition, if any, for
// notify. Under the lock.
func (l *Limiter) setState(s uint32, now time.Time, failures, calls int) (overload.Transition, bool) {
	from := l.state.Load()
	if from == s {
		return overload.Transition{}, false
	}
	l.state.Store(s)
	return overload.Transition{From: overload.State(from), To: overload.State(s), At: now, Failures: failures, Calls: calls}, true
}

// notify hands a transition to the breaker's OnTransition. Not under the
// lock.
func (l *Limiter) notify(t overload.Transition, ok bool) {
	if ok && l.breaker != nil && l.breaker.OnTransition != nil {
		l.breaker.OnTransition(t)
	}
}

// breakerAcquire decides a call while the breaker is not closed (as read
// on the hot path): a probe permit, a refusal, or (decided false) the
// breaker closed meanwhile.
func (l *Limiter) breakerAcquire(route string, now, end time.Time, need time.Duration) (Permit, error, bool) {
	var t overload.Transition
	var changed bool
	l.mu.Lock()
	defer func() {
		l.mu.Unlock()
		l.notify(t, changed)
	}()
	s := l.state.Load()
	if s == breakerOpen && !now.Before(l.openUntil) {
		s = breakerHalfOpen
		t, changed = l.setState(s, now, 0, 0)
		l.probes, l.probeWins = 0, 0
	}
	if s == breakerClosed {
		return Permit{}, nil, false
	}
	refuse := func() (Permit, error, bool) {
		e := &LimitError{Cause: LimitOpen, Limit: int(l.limit.Load()), Need: need}
		if !end.IsZero() {
			e.Remaining = end.Sub(now)
		}
		return Permit{}, e, true
	}
	if s == breakerOpen || l.probes >= l.breaker.Probes {
		return refuse()
	}
	ceiling := l.breaker.ProbeCeiling
	if ceiling == 0 {
		ceiling = max(need, time.Duration(l.meanNS.Load()))
	}
	// Nothing known of what a call needs (no need given, no latency seen):
	// the probe runs without a ceiling of its own. A call whose budget
	// cannot hold the ceiling could not finish even on a recovered
	// downstream: refused, it keeps its whole budget.
	if !end.IsZero() && ceiling > 0 && end.Sub(now) < ceiling {
		return refuse()
	}
	l.inflight.Add(1)
	l.probes++
	return l.grant(Permit{l: l, route: route, start: now, Probe: true, Ceiling: ceiling}), nil, true
}

// breakerLearn counts one call's outcome, returning the transition it
// caused, if any. Under the lock.
func (l *Limiter) breakerLearn(p *Permit, o Outcome, now time.Time) (overload.Transition, bool) {
	b := l.breaker
	if p.Probe {
		l.probes--
		if l.state.Load() != breakerHalfOpen {
			return overload.Transition{}, false
		}
		switch o {
		case OutcomeSuccess, OutcomeAnswered:
			l.probeWins++
			if l.probeWins >= b.Probes {
				l.failures, l.successes, l.countSince = 0, 0, now
				return l.setState(breakerClosed, now, 0, 0)
			}
		case OutcomeFailure:
			l.openUntil = now.Add(b.OpenFor)
			return l.setState(breakerOpen, now, 0, 0)
		}
		return overload.Transition{}, false
	}
	if l.state.Load() != breakerClosed {
		return overload.Transition{}, false
	}
	if now.Sub(l.countSince) >= b.Window {
		l.failures, l.successes, l.countSince = 0, 0, now
	}
	switch o {
	case OutcomeSuccess, OutcomeAnswered:
		l.successes++
	case OutcomeFailure:
		l.failures++
	default:
		return overload.Transition{}, false
	}
	if n := l.failures + l.successes; n >= b.MinCalls && float64(l.failures) >= b.FailureRatio*float64(n) {
		l.openUntil = now.Add(b.OpenFor)
		return l.setState(breakerOpen, now, l.failures, n)
	}
	return overload.Transition{}, false
}

package deadline

import (
	"fmt"
	"time"

	"github.com/deadlinebudget/budget/deadline/internal/readable"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// Policy configures [Do]: how many attempts, each attempt's ceiling, the floor
// kept in reserve, the backoff between attempts, and which errors are safe to
// retry.
//
// A Policy is a value. The zero Policy is invalid (MaxAttempts 0); start from
// [DefaultPolicy] or set MaxAttempts. Sharing one Policy between goroutines is
// safe unless Rand is set to a source that is not.
type Policy struct {
	// Name names the logical call in errors, logs and spans (e.g. "fetch").
	Name string

	// MaxAttempts is the number of attempts allowed, the first included.
	// Must be >= 1.
	MaxAttempts int

	// AttemptTimeout is each attempt's ceiling. The attempt is granted
	// min(AttemptTimeout, remaining - Floor). Zero means no ceiling: the
	// grant is remaining - Floor. Must be >= 0.
	AttemptTimeout time.Duration

	// Ceiling, when set, supplies a learned ceiling per attempt (package
	// deadline/learn provides one). It is consulted once before each
	// attempt, with the policy's Name; when it answers ok with a positive
	// ceiling, that ceiling replaces AttemptTimeout for the attempt
	// ([AttemptInfo.Ceiling], [AttemptInfo.CeilingQuantile]) and, when it
	// binds the grant, [AttemptInfo.LimitedBy] is [LimitLearnedCeiling].
	// Otherwise AttemptTimeout applies. Nil (the default): no learned
	// ceiling, and Do's cost is unchanged.
	Ceiling CeilingSource

	// LearnedFloor, when set, refuses an attempt, a hedge or a retry that
	// would very likely not complete within the lease it would get, as
	// estimated from the step's recorded attempts (see [LearnedFloor]):
	// the call stops with [ReasonRefusedLearned]. Nil (the default), or a
	// step its estimator knows too little about: the fixed Floor alone
	// decides, and Do's cost is unchanged.
	LearnedFloor *LearnedFloor

	// Floor is kept in reserve: no attempt starts with remaining <= Floor,
	// and no lease reaches into it, leaving time to record the outcome and
	// answer. Must be >= 0.
	Floor time.Duration

	// Backoff chooses the sleep between attempts. The zero Backoff retries
	// at once.
	Backoff Backoff

	// Retryable reports whether an attempt's error may be retried. Nil
	// means [IsRetryable]: only errors marked [Retryable], and attempts ended
	// by their own ceiling ([AttemptTimeoutError]), are retried.
	Retryable func(error) bool

	// RetryBudget, when set, is the budget of retries this policy shares
	// with every other policy that holds the same one, typically one per
	// downstream (see [RetryBudget]). The first attempt of every call is
	// counted as a deposit, and every retry asks it for a token: once the
	// retry is decided (the error is retryable, attempts remain and the
	// wait fits in what is left above the floor) and before any sleep. A
	// denied retry is not taken and the call stops at once with
	// [ReasonRetryBudget], keeping the last error. A retry canceled during
	// its wait keeps its token. Nil (the default): no retry budget, and
	// Do's cost is unchanged. A RetryBudget not built by [NewRetryBudget]
	// makes the policy invalid.
	RetryBudget *RetryBudget

	// Limiter, when set, bounds the attempts in flight to the downstream
	// this policy calls, shared with every policy that holds the same one
	// (see [overload.Limiter]): before each attempt, first, retry or
	// hedge, it takes a slot, waiting for one only while the call can
	// still finish (its learned need, with a LearnedFloor, else the floor,
	// at least the limiter's baseline latency); a refused attempt is not
	// sent and the call stops with [ReasonLimited] or, its breaker open,
	// [ReasonOpen] ([StopError.Refusal] says why, where and at which
	// limit). A hedge never waits: one with no free slot is not started.
	// The slot is freed when the attempt returns, and teaches the limit
	// its latency (see [overload.Outcome] for what each ending teaches).
	// A half-open breaker's probe runs under the probe's ceiling. Nil (the
	// default): no limit, and Do's cost is unchanged. A Limiter not built
	// by [overload.NewLimiter] makes the policy invalid.
	Limiter *overload.Limiter

	// Throttle, when set, is client-side throttling of the downstream this
	// policy calls, shared with every policy that holds the same one (see
	// [overload.Throttle]): after the Limiter, every attempt, first, retry
	// or hedge, asks it, and one it drops is not sent and the call stops
	// with [ReasonThrottled]; every attempt that went out is counted when
	// it ends, accepted by the downstream (it answered, with anything but
	// an overload answer, [ErrOverloaded], before the attempt was cut) or
	// not. Nil (the default): no throttling, and Do's cost is unchanged. A
	// Throttle not built by [overload.NewThrottle] makes the policy
	// invalid.
	Throttle *overload.Throttle

	// Answered, when set, says whether a value op returned without error
	// is an answer given without the work ([overload.OutcomeAnswered]: an
	// authentication failure, a route not found, a validation error): its
	// latency is then not taught to the Limiter, which would take the
	// downstream for fast. deadlinehttp's Transport sets it for 4xx
	// answers but 408 and 429 when the policy has none. Asked only with a
	// Limiter or a Throttle; v is op's value.
	Answered func(v any) bool

	// Hedge, when set with MaxHedges > 0, turns on hedged attempts: when
	// an attempt has run for the hedge delay without returning, another
	// one starts alongside it, and the first success wins (see [Hedge] and
	// [DoHedged], which runs such a policy; [Do] refuses it, so that its
	// op never escapes to the heap). Setting it declares op safe to repeat
	// concurrently. Nil (the default) or MaxHedges 0: no hedging.
	Hedge *Hedge

	// Rand draws the backoff jitter: it returns a uniform value in [0, n),
	// like (*rand.Rand).Int64N. Nil uses math/rand/v2's global source. Set a
	// seeded source for reproducible runs; it must be safe for concurrent
	// use if the Policy is shared.
	Rand func(n int64) int64

	// Hooks observe every call made with this policy, after any hooks carried
	// by the context ([WithHooks]). May be nil.
	Hooks *Hooks
}

// Hedge configures hedged attempts ([Policy.Hedge]): a second (third, …)
// attempt started while the earlier ones still run, to cut the latency tail
// of an operation that is sometimes slow. Hedging is only for an operation
// that is safe to repeat, and safe to run twice at once: setting
// [Policy.Hedge] declares it so (the deadlinehttp Transport hedges a
// request it may retry, and sends any other once).
//
// Each hedge is an attempt in every rule: it is granted its own lease,
// min(ceiling, remaining − floor), and none starts at or below the floor; it
// counts against [Policy.MaxAttempts]; with a [Policy.RetryBudget] it takes
// a token like a retry, and a denied hedge is simply not started.
type Hedge struct {
	// Delay is how long an attempt runs before the next hedge starts,
	// typically the operation's p95 latency. Must be > 0 when MaxHedges >
	// 0, and never < 0.
	Delay time.Duration

	// MaxHedges is how many hedges may run at once beside the attempt they
	// hedge: at most 1 + MaxHedges attempts are in flight. Must be >= 0; 0
	// turns hedging off.
	MaxHedges int

	// DelaySource, when set, supplies the delay per step, e.g. a learned
	// p95. It is asked once per round of attempts, with the policy's Name;
	// when it answers ok with a positive delay that delay replaces Delay.
	// It must be safe for concurrent use and cheap.
	DelaySource HedgeDelaySource

	// Discard, when set, is given the value of every attempt that
	// succeeded after another attempt had already won, before Do returns,
	// on the calling goroutine, so that what it holds (a response body, a
	// connection) is released. Nil: such values are dropped.
	Discard func(v any)
}

// HedgeDelaySource supplies a hedge delay per step ([Hedge.DelaySource]).
// It reports ok=false when it has none, and [Hedge.Delay] applies.
type HedgeDelaySource interface {
	HedgeDelay(step string) (time.Duration, bool)
}

// CeilingSource supplies per-attempt ceilings learned from past attempts
// ([Policy.Ceiling]). Ceiling is called on the calling goroutine before each
// attempt, so it must be safe for concurrent use and cheap: an atomic load,
// no lock, no allocation. It reports ok=false when it has no ceiling for
// step (too few samples, unknown step), and the policy's AttemptTimeout
// applies. A panic in Ceiling propagates like a panic in a hook.
type CeilingSource interface {
	Ceiling(step string) (LearnedCeiling, bool)
}

// LearnedCeiling is a ceiling supplied by a [CeilingSource].
type LearnedCeiling struct {
	// Ceiling is the per-attempt ceiling; a value <= 0 is ignored.
	Ceiling time.Duration
	// Quantile is the quantile of recorded durations it was derived from,
	// in (0, 1); reported in [AttemptInfo.CeilingQuantile].
	Quantile float64
}

// DefaultPolicy returns a policy of 3 attempts, no per-attempt ceiling, a
// 20ms floor and full-jitter backoff from 50ms to 400ms: the source
// article's settings.
func DefaultPolicy() Policy {
	return Policy{
		MaxAttempts: 3,
		Floor:       20 * time.Millisecond,
		Backoff:     Backoff{Base: 50 * time.Millisecond, Max: 400 * time.Millisecond},
	}
}

// Validate reports the first invalid field as a [*PolicyError] that names
// the field, the value and the allowed range, or nil.
func (p Policy) Validate() error { return p.validate() }

// validate is Validate without copying the Policy, for Do's hot path.
func (p *Policy) validate() error {
	switch {
	case p.MaxAttempts < 1:
		return &PolicyError{"Policy.MaxAttempts", p.MaxAttempts, ">= 1"}
	case p.AttemptTimeout < 0:
		return &PolicyError{"Policy.AttemptTimeout", p.AttemptTimeout, ">= 0 (0: no ceiling)"}
	case p.Floor < 0:
		return &PolicyError{"Policy.Floor", p.Floor, ">= 0"}
	case p.Backoff.Base < 0:
		return &PolicyError{"Policy.Backoff.Base", p.Backoff.Base, ">= 0"}
	case p.Backoff.Max < 0:
		return &PolicyError{"Policy.Backoff.Max", p.Backoff.Max, ">= 0"}
	case p.Backoff.Max == 0 && p.Backoff.Base > 0:
		// Max was forgotten, not Base set too high.
		return &PolicyError{"Policy.Backoff.Max", p.Backoff.Max, fmt.Sprintf(">= Policy.Backoff.Base (%s); set Max to cap the backoff", readable.Duration(p.Backoff.Base))}
	case p.Backoff.Base > p.Backoff.Max:
		return &PolicyError{"Policy.Backoff.Base", p.Backoff.Base, fmt.Sprintf("<= Policy.Backoff.Max (%s)", readable.Duration(p.Backoff.Max))}
	case p.Backoff.Max > 0 && p.Backoff.Base == 0:
		return &PolicyError{"Policy.Backoff.Base", p.Backoff.Base, fmt.Sprintf("> 0 when Policy.Backoff.Max is set (%s); set Base to the first backoff, or Max to 0 for none", readable.Duration(p.Backoff.Max))}
	case p.Backoff.Jitter > JitterNone:
		return &PolicyError{"Policy.Backoff.Jitter", p.Backoff.Jitter, "JitterFull, JitterEqual or JitterNone"}
	case p.RetryBudget != nil && !p.RetryBudget.clock.Valid():
		return &PolicyError{"Policy.RetryBudget", "RetryBudget{}", "nil or a budget from NewRetryBudget"}
	case p.Limiter != nil && p.Limiter.Limit() < 1:
		return &PolicyError{"Policy.Limiter", "Limiter{}", "nil or a limiter from overload.NewLimiter"}
	case p.Throttle != nil && p.Throttle.K() == 0:
		return &PolicyError{"Policy.Throttle", "Throttle{}", "nil or a throttle from overload.NewThrottle"}
	case p.Hedge != nil:
		if err := p.Hedge.validate(); err != nil {
			return err
		}
	}
	if p.LearnedFloor != nil {
		return p.LearnedFloor.validate()
	}
	return nil
}

// validate reports an invalid Hedge as a [*PolicyError].
func (h *Hedge) validate() error {
	switch {
	case h.MaxHedges < 0:
		return &PolicyError{"Policy.Hedge.MaxHedges", h.MaxHedges, ">= 0 (0: no hedging)"}
	case h.Delay < 0:
		return &PolicyError{"Policy.Hedge.Delay", h.Delay, "> 0"}
	case h.MaxHedges > 0 && h.Delay == 0:
		return &PolicyError{"Policy.Hedge.Delay", h.Delay, "> 0 when Policy.Hedge.MaxHedges > 0 (the wait before a hedge starts, e.g. the p95 latency)"}
	}
	return nil
}

package deadline

import (
	"context"
	"time"

	"github.com/deadlinebudget/budget/deadline/overload"
)

// Limit says which limit bounded an attempt's grant.
type Limit uint8

const (
	// LimitCeiling: the grant is the policy's AttemptTimeout.
	LimitCeiling Limit = iota + 1
	// LimitDeadline: the grant is what is left of the shared deadline less
	// the floor, smaller than the ceiling (or there is no ceiling).
	LimitDeadline
	// LimitLearnedCeiling: the grant is the ceiling the policy's
	// [CeilingSource] supplied for this attempt ([Policy.Ceiling]). It is a
	// ceiling in every rule: reaching it ends the attempt with
	// [EndedAttemptTimeout] and counts in [CallResult.CeilingTimeouts].
	LimitLearnedCeiling
)

// String returns "ceiling", "deadline" or "learned_ceiling".
func (l Limit) String() string {
	switch l {
	case LimitCeiling:
		return "ceiling"
	case LimitDeadline:
		return "deadline"
	case LimitLearnedCeiling:
		return "learned_ceiling"
	}
	return "none"
}

// EndedBy says what ended an attempt.
type EndedBy uint8

const (
	// EndedCompleted: the operation returned without error.
	EndedCompleted EndedBy = iota + 1
	// EndedError: the operation returned an error before the attempt's
	// limit (its start plus its grant) and before any cancellation.
	EndedError
	// EndedAttemptTimeout: the attempt's grant was its ceiling
	// ([LimitCeiling]) and the ceiling was reached before the operation
	// returned, or as it returned: the operation was slow.
	EndedAttemptTimeout
	// EndedDeadline: the attempt's grant was what was left of the shared
	// deadline less the floor ([LimitDeadline]), or the caller's context
	// deadline came earlier still, and that limit was reached before the
	// operation returned, or as it returned: the budget ran out.
	EndedDeadline
	// EndedCanceled: the caller canceled the context before the attempt's
	// limit was reached. (A cancellation at the very instant the limit is
	// reached is ordered by whichever reached the attempt's context first.)
	EndedCanceled
	// EndedPanic: the operation panicked (or, with hedging, another
	// attempt of the call panicked and this one was canceled).
	EndedPanic
	// EndedHedgeLost: another attempt of the same call succeeded first
	// ([Policy.Hedge]); this one was canceled with [ErrHedgeLost] and its
	// result discarded. It is neither slow nor cut by the deadline: it
	// counts in neither [CallResult.CeilingTimeouts] nor
	// [CallResult.DeadlineCuts].
	EndedHedgeLost
)

var endedNames = [...]string{
	EndedCompleted:      "completed",
	EndedError:          "error",
	EndedAttemptTimeout: "attempt_timeout",
	EndedDeadline:       "deadline",
	EndedCanceled:       "canceled",
	EndedPanic:          "panic",
	EndedHedgeLost:      "hedge_lost",
}

// String returns the stable snake_case name ("completed", "attempt_timeout", …).
func (e EndedBy) String() string {
	if e > 0 && int(e) < len(endedNames) {
		return endedNames[e]
	}
	return "unknown"
}

// BackoffSource says where a backoff delay came from.
type BackoffSource uint8

const (
	// SourcePolicy: the policy's Backoff chose the delay.
	SourcePolicy BackoffSource = iota + 1
	// SourceRetryAfter: the server's Retry-After chose it.
	SourceRetryAfter
)

// String returns "policy" or "retry_after".
func (s BackoffSource) String() string {
	switch s {
	case SourcePolicy:
		return "policy"
	case SourceRetryAfter:
		return "retry_after"
	}
	return "none"
}

// CallInfo describes a call as it starts.
type CallInfo struct {
	Name        string
	Start       time.Time
	Budget      time.Duration // the Deadline's budget
	Remaining   time.Duration // left at the start of the call
	MaxAttempts int
	Ceiling     time.Duration // Policy.AttemptTimeout; 0: none
	Floor       time.Duration
}

// AttemptInfo describes an attempt as it starts. The operation receives it
// too.
type AttemptInfo struct {
	Name      string
	Number    int           // 1 for the first attempt
	Start     time.Time     // when the attempt was granted
	Ceiling   time.Duration // the learned ceiling if one was supplied, else Policy.AttemptTimeout; 0: none
	Granted   time.Duration // min(Ceiling, Remaining - Floor)
	Remaining time.Duration // budget left at the start of the attempt
	LimitedBy Limit         // which limit set Granted
	// CeilingQuantile is the quantile of recorded attempt durations the
	// learned ceiling was derived from (e.g. 0.99), when Ceiling came from
	// the policy's [CeilingSource]; 0 otherwise.
	CeilingQuantile float64
	// Hedge is true when the attempt is a hedge ([Policy.Hedge]): it
	// started while an earlier attempt of the call was still running.
	Hedge bool
	// Probe is true when the policy's [LearnedFloor] would have refused
	// the attempt (Estimate.P below its Threshold) and it went out anyway,
	// as one of the ProbeShare that keep the estimate following the
	// provider.
	Probe bool
	// Estimate is the [LearnedFloor]'s estimate that the attempt completes
	// within Granted, when the policy has one and its estimator answered;
	// zero otherwise.
	Estimate Estimate
}

// AttemptResult describes how an attempt ended.
type AttemptResult struct {
	Duration  time.Duration
	Err       error // nil when EndedBy is EndedCompleted
	Retryable bool  // the classifier's answer for Err
	EndedBy   EndedBy
	// HedgeWinner is true when the attempt succeeded while other attempts
	// of the call were running or had run beside it ([Policy.Hedge]): its
	// value is the call's, and theirs end with [EndedHedgeLost].
	HedgeWinner bool
}

// BackoffInfo describes the wait chosen after a failed attempt.
type BackoffInfo struct {
	Name       string
	Attempt    int           // the attempt that failed
	Delay      time.Duration // the sleep chosen
	Source     BackoffSource // policy or Retry-After
	RetryAfter time.Duration // the delay the server asked for; 0 if none
	Remaining  time.Duration // budget left when it was chosen
	Fits       bool          // false: it does not fit and the call stops now
	// RetryBudget is true when the policy's [RetryBudget] was asked for
	// the retry: it has one and the wait fits (a wait that does not fit
	// stops the call without asking, so no token is spent for nothing).
	RetryBudget bool
	// RetryDenied is true when the retry budget denied the retry: the call
	// stops now with [ReasonRetryBudget], without sleeping. The retry
	// follows only when Fits is true and RetryDenied is false.
	RetryDenied bool
	// RetryBalance is the retry budget's balance after its decision: the
	// retries it would still allow (0 or less when it denied this one);
	// 0 when RetryBudget is false.
	RetryBalance int
	// Lease and Estimate: with a [LearnedFloor] that answered for a wait
	// that fits, the lease the retry would be granted after the wait and
	// the estimated chance it completes within it; else zero.
	Lease    time.Duration
	Estimate Estimate
	// RefusedLearned is true when the [LearnedFloor] refused the retry:
	// the call stops now with [ReasonRefusedLearned], without sleeping
	// and without asking the retry budget.
	RefusedLearned bool
}

// CallResult describes how a call ended.
type CallResult struct {
	Name      string
	Reason    Reason
	Attempts  int           // attempts started
	Err       error         // what Do returns; nil on success or panic
	Duration  time.Duration // since the call started
	Remaining time.Duration // budget left at the end
	// CeilingTimeouts counts the attempts that ended with
	// [EndedAttemptTimeout]: the ceiling bound the grant and was reached
	// first, so each ran its whole configured ceiling.
	CeilingTimeouts int
	// DeadlineCuts counts the attempts that ended with [EndedDeadline]: the
	// shared deadline (less the floor) bound the grant, below the ceiling or
	// with no ceiling, and was reached first. At most one per call, the
	// last, since the deadline is not retried (with hedging, the attempts
	// that were running together when it was reached).
	DeadlineCuts int
	// Hedges counts the attempts started as hedges ([AttemptInfo.Hedge]);
	// they are included in Attempts.
	Hedges int
	// Lease and Estimate, when Reason is [ReasonRefusedLearned]: the
	// lease the refused attempt would have been granted and the estimated
	// chance it completes within it; zero otherwise.
	Lease    time.Duration
	Estimate Estimate
	// Refusal, for [ReasonLimited], [ReasonOpen] and [ReasonThrottled]:
	// the limiter's or the throttle's refusal, with its cause, the limit
	// and the call's place in the queue; else nil.
	Refusal *overload.RefusedError
}

// Hooks is a set of optional callbacks that observe a call made by [Do],
// modelled on net/http/httptrace.ClientTrace. Any field may be nil. Hooks
// run synchronously on the calling goroutine, in this order: CallStart, then
// for each attempt AttemptStart and AttemptEnd, with Backoff between
// attempts, then CallEnd.
//
// With hedging ([Policy.Hedge]) attempts overlap, and so do their hooks:
// a hedge's AttemptStart comes after the earlier attempt's AttemptStart and
// before its AttemptEnd, and the AttemptEnds come in the order the attempts
// ended. Every hook is still called on the calling goroutine, one at a
// time (the operations run on goroutines of their own), so a hook never
// runs concurrently with another hook of the same call; a hook that keeps
// per-attempt state must key it by attempt (the context AttemptStart
// returns, or [AttemptInfo.Number]), not keep one "current attempt".
//
// Every hook that began is closed, also on a panic in the operation or in a
// hook, which then goes on unchanged: once CallStart has returned, CallEnd
// is called exactly once, with [ReasonPanic] after a panic; once
// AttemptStart has returned, AttemptEnd is called exactly once, with
// [EndedPanic] when the operation panicked. A CallStart or AttemptStart that
// panics has not begun: its own end is not called ([Compose] closes the
// hooks composed before it), but the attempt's context is released.
//
// Hooks must not retain the contexts they are given after CallEnd.
type Hooks struct {
	// CallStart is called once before the first attempt. The context it
	// returns (nil: unchanged) becomes the parent of every attempt, and is
	// passed to Backoff and CallEnd.
	CallStart func(ctx context.Context, c CallInfo) context.Context

	// AttemptStart is called before each attempt. The context it returns
	// (nil: unchanged) is the one the operation runs in, and the one
	// AttemptEnd receives.
	AttemptStart func(ctx context.Context, a AttemptInfo) context.Context

	// AttemptEnd is called when the operation returns (or panics).
	AttemptEnd func(ctx context.Context, a AttemptInfo, r AttemptResult)

	// Backoff is called after a failed attempt that will be retried if the
	// wait fits and the retry budget, if any, allows it, with the wait
	// chosen, whether it fits and the retry budget's answer.
	Backoff func(ctx context.Context, b BackoffInfo)

	// CallEnd is called once when the call ends, also on a panic.
	CallEnd func(ctx context.Context, r CallResult)
}

// Compose returns Hooks that call each of hs in order (nil entries are
// skipped), and the closing hooks (AttemptEnd, CallEnd) in reverse order.
// Contexts returned by CallStart and AttemptStart are threaded through: each
// hook receives the context the previous one returned. It returns nil when
// no hooks remain and the only one when there is one.
//
// A panic in one of the hooks goes on unchanged, after the hooks it leaves
// open are closed: when a CallStart (AttemptStart) panics, the ones that
// returned before it get CallEnd with [ReasonPanic] (AttemptEnd with
// [EndedPanic]); when an AttemptEnd or CallEnd panics, the remaining ones
// are still called.
func Compose(hs ...*Hooks) *Hooks {
	var live []*Hooks
	for _, h := range hs {
		if h != nil {
			live = append(live, h)
		}
	}
	switch len(live) {
	case 0:
		return nil
	case 1:
		return live[0]
	}
	return &Hooks{
		CallStart: func(ctx context.Context, c CallInfo) context.Context {
			began := 0
			defer func() {
				// A CallStart panicked: end the calls of those that began.
				if began < len(live) {
					end := CallResult{Name: c.Name, Reason: ReasonPanic, Duration: time.Since(c.Start)}
					end.Remaining = c.Remaining - end.Duration
					endAll(began-1, func(i int) {
						if h := live[i]; h.CallEnd != nil {
							h.CallEnd(ctx, end)
						}
					})
				}
			}()
			for _, h := range live {
				if h.CallStart != nil {
					if n := h.CallStart(ctx, c); n != nil {
						ctx = n
					}
				}
				began++
			}
			return ctx
		},
		AttemptStart: func(ctx context.Context, a AttemptInfo) context.Context {
			began := 0
			defer func() {
				// An AttemptStart panicked: end the attempts of those that
				// began.
				if began < len(live) {
					end := AttemptResult{Duration: time.Since(a.Start), EndedBy: EndedPanic}
					endAll(began-1, func(i int) {
						if h := live[i]; h.AttemptEnd != nil {
							h.AttemptEnd(ctx, a, end)
						}
					})
				}
			}()
			for _, h := range live {
				if h.AttemptStart != nil {
					if n := h.AttemptStart(ctx, a); n != nil {
						ctx = n
					}
				}
				began++
			}
			return ctx
		},
		AttemptEnd: func(ctx context.Context, a AttemptInfo, r AttemptResult) {
			endAll(len(live)-1, func(i int) {
				if h := live[i]; h.AttemptEnd != nil {
					h.AttemptEnd(ctx, a, r)
				}
			})
		},
		Backoff: func(ctx context.Context, b BackoffInfo) {
			for _, h := range live {
				if h.Backoff != nil {
					h.Backoff(ctx, b)
				}
			}
		},
		CallEnd: func(ctx context.Context, r CallResult) {
			endAll(len(live)-1, func(i int) {
				if h := live[i]; h.CallEnd != nil {
					h.CallEnd(ctx, r)
				}
			})
		},
	}
}

// endAll calls end(i) for i from last down to 0. Every call is made even if
// an earlier one panics (the rest run while the panic unwinds, and it then
// goes on unchanged), so that one observer's bug does not leave another's
// spans open.
func endAll(last int, end func(i int)) {
	if last < 0 {
		return
	}
	defer endAll(last-1, end)
	end(last)
}

type hooksKey struct{}

// WithHooks returns a copy of ctx carrying h, composed after any hooks ctx
// already carries, so that every [Do] under ctx (an HTTP transport's
// included) reports to them. A nil h returns ctx unchanged.
func WithHooks(ctx context.Context, h *Hooks) context.Context {
	if h == nil {
		return ctx
	}
	return context.WithValue(ctx, hooksKey{}, Compose(ContextHooks(ctx), h))
}

// ContextHooks returns the hooks carried by ctx, or nil.
func ContextHooks(ctx context.Context) *Hooks {
	h, _ := ctx.Value(hooksKey{}).(*Hooks)
	return h
}

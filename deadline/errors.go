package deadline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/deadlinebudget/budget/deadline/internal/readable"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// timeoutError is a sentinel that also matches context.DeadlineExceeded, so
// that callers who only know the standard library still see a timeout.
//
// typ is its semantic-conventions error.type: the sentinels are context
// causes, so net/http hands them back as the error of a request whose
// attempt ran out, and instrumentation that derives error.type from the
// error (otelhttp does, through semconv.ErrorType) must find a documented,
// low-cardinality value rather than this unexported type's name.
type timeoutError struct{ msg, typ string }

func (e *timeoutError) Error() string        { return e.msg }
func (e *timeoutError) Timeout() bool        { return true }
func (e *timeoutError) Is(target error) bool { return target == context.DeadlineExceeded }
func (e *timeoutError) ErrorType() string    { return e.typ }

// learnedRefusalError is the sentinel ErrRefusedLearned: a refusal, so it
// matches ErrRefused and context.DeadlineExceeded too.
type learnedRefusalError struct{ timeoutError }

func (e *learnedRefusalError) Is(target error) bool {
	return target == context.DeadlineExceeded || target == ErrRefused
}

// hedgeLostError is the sentinel ErrHedgeLost: it matches context.Canceled.
type hedgeLostError struct{}

func (*hedgeLostError) Error() string        { return "deadline: another attempt won the hedge" }
func (*hedgeLostError) Is(target error) bool { return target == context.Canceled }
func (*hedgeLostError) ErrorType() string    { return "hedge_lost" }

// reasonError is a sentinel with an error.type of its own.
type reasonError struct{ msg, typ string }

func (e *reasonError) Error() string     { return e.msg }
func (e *reasonError) ErrorType() string { return e.typ }

// canceledError is a sentinel that also matches context.Canceled.
type canceledError struct{ msg string }

func (e *canceledError) Error() string        { return e.msg }
func (e *canceledError) Is(target error) bool { return target == context.Canceled }
func (e *canceledError) ErrorType() string    { return "canceled" }

var (
	// ErrDeadlineReached is the context cause when the run's shared deadline
	// (less the policy's floor, inside [Do]) ended a context, and the sentinel
	// of [ReasonDeadline]. It matches context.DeadlineExceeded.
	ErrDeadlineReached error = &timeoutError{"deadline: the shared deadline was reached", "deadline_exceeded"}

	// ErrCeilingReached is the context cause when an attempt's own ceiling
	// ([Policy.AttemptTimeout], or the limit of [Deadline.ScopeLimit]) ended
	// it: the operation was slow, the budget was not yet spent. It matches
	// context.DeadlineExceeded.
	ErrCeilingReached error = &timeoutError{"deadline: the attempt's ceiling was reached", "attempt_timeout"}

	// ErrRefused is the sentinel of [ReasonRefused]: no attempt was started
	// because what was left of the budget was at or below the floor. It
	// matches context.DeadlineExceeded.
	ErrRefused error = &timeoutError{"deadline: refused below the floor", "refused"}

	// ErrRefusedLearned is the sentinel of [ReasonRefusedLearned]: no
	// attempt was started because the one the budget still allowed would
	// very likely not have completed within its lease, as the policy's
	// [LearnedFloor] estimated from the step's recorded attempts. It
	// matches [ErrRefused] and context.DeadlineExceeded, as the fixed
	// floor's refusal does. Its ErrorType is "refused_learned".
	ErrRefusedLearned error = &learnedRefusalError{timeoutError{"deadline: refused, the lease left would very likely not suffice", "refused_learned"}}

	// ErrBackoffExceedsBudget is the sentinel of [ReasonBackoffTooLong]: the
	// chosen backoff sleep would not leave time for another attempt. It
	// matches context.DeadlineExceeded.
	ErrBackoffExceedsBudget error = &timeoutError{"deadline: backoff would outlast the deadline", "backoff_exceeds_budget"}

	// ErrRetryAfterExceedsBudget is the sentinel of [ReasonRetryAfterTooLong]:
	// a server asked to wait longer than what was left. It matches
	// context.DeadlineExceeded.
	ErrRetryAfterExceedsBudget error = &timeoutError{"deadline: Retry-After would outlast the deadline", "retry_after_exceeds_budget"}

	// ErrHedgeLost is the context cause of an attempt canceled because
	// another attempt of the same call succeeded first ([Policy.Hedge],
	// [EndedHedgeLost]). It matches context.Canceled. Do never returns it.
	ErrHedgeLost error = &hedgeLostError{}

	// ErrCanceled is the sentinel of [ReasonCanceled]: the caller's context
	// was canceled. It matches context.Canceled.
	ErrCanceled error = &canceledError{"deadline: canceled by the caller"}

	// ErrNotRetryable is the sentinel of [ReasonNotRetryable]: the classifier
	// declined to retry the attempt's error.
	ErrNotRetryable = errors.New("deadline: error is not retryable")

	// ErrAttemptsExhausted is the sentinel of [ReasonExhausted]: every attempt
	// the policy allows failed with a retryable error.
	ErrAttemptsExhausted = errors.New("deadline: attempts exhausted")

	// ErrRetryBudgetExhausted is the sentinel of [ReasonRetryBudget]: the
	// policy's shared [RetryBudget] denied the retry. It does not match
	// context.DeadlineExceeded: the time budget was not spent. Its
	// ErrorType is "retry_budget_exhausted".
	ErrRetryBudgetExhausted error = &reasonError{"deadline: retry budget exhausted", "retry_budget_exhausted"}

	// ErrLimited is the sentinel of [ReasonLimited]: the policy's
	// [overload.Limiter] refused the attempt before it went out, its queue
	// full or the call unable to finish from its place in it
	// ([overload.RefusedError]). It does not match
	// context.DeadlineExceeded: the downstream's capacity, not the budget,
	// refused it. Its ErrorType is "limited". It is [overload.ErrLimited]:
	// the refusal itself matches it too.
	ErrLimited = overload.ErrLimited

	// ErrDownstreamOpen is the sentinel of [ReasonOpen]: the limiter's
	// [overload.Breaker] is open (or half-open, with no probe the call's
	// budget could afford): nothing was sent. It does not match
	// context.DeadlineExceeded. Its ErrorType is "downstream_open". It is
	// [overload.ErrDownstreamOpen].
	ErrDownstreamOpen = overload.ErrDownstreamOpen

	// ErrThrottled is the sentinel of [ReasonThrottled]: client-side
	// throttling ([Policy.Throttle]) dropped the attempt before it went
	// out. It does not match context.DeadlineExceeded. Its ErrorType is
	// "throttled". It is [overload.ErrThrottled].
	ErrThrottled = overload.ErrThrottled

	// ErrOverloaded marks an attempt's error as the downstream's overload
	// answer (an HTTP 429 or 503, gRPC RESOURCE_EXHAUSTED): wrap it with
	// [Overloaded]. [Do] counts such an attempt as
	// [overload.OutcomeOverload]: not accepted by the downstream for
	// client-side throttling ([Policy.Throttle]), nothing learned by the
	// [Policy.Limiter].
	ErrOverloaded error = &reasonError{"deadline: the downstream is overloaded", "overloaded"}

	// ErrInvalidPolicy is matched by every [PolicyError].
	ErrInvalidPolicy = errors.New("deadline: invalid policy")
)

// Reason says why a call stopped. Its String form is the value used in logs
// and telemetry ("success", "refused", …).
type Reason uint8

// The stop reasons. Every reason but ReasonSuccess and ReasonPanic is
// returned as a [StopError]; a panic propagates and is only reported to hooks.
const (
	ReasonSuccess           Reason = iota // the operation returned a result
	ReasonNotRetryable                    // an error the classifier would not retry
	ReasonExhausted                       // every allowed attempt failed retryably
	ReasonRefused                         // remaining <= floor before an attempt
	ReasonBackoffTooLong                  // the backoff sleep would not fit in the budget
	ReasonRetryAfterTooLong               // the server's Retry-After would not fit in the budget
	ReasonDeadline                        // the shared deadline ended an attempt
	ReasonCanceled                        // the caller's context was canceled
	ReasonPanic                           // the operation panicked (hooks only)
	ReasonRetryBudget                     // the shared retry budget denied the retry
	ReasonRefusedLearned                  // the learned floor: the lease left would very likely not suffice
	ReasonLimited                         // the Limiter refused: queue full, or could not finish from its place
	ReasonOpen                            // the Limiter's breaker is open
	ReasonThrottled                       // client-side throttling dropped the attempt
)

var reasonNames = [...]string{
	ReasonSuccess:           "success",
	ReasonNotRetryable:      "not_retryable",
	ReasonExhausted:         "attempts_exhausted",
	ReasonRefused:           "refused",
	ReasonBackoffTooLong:    "backoff_exceeds_budget",
	ReasonRetryAfterTooLong: "retry_after_exceeds_budget",
	ReasonDeadline:          "deadline_exceeded",
	ReasonCanceled:          "canceled",
	ReasonPanic:             "panic",
	ReasonRetryBudget:       "retry_budget_exhausted",
	ReasonRefusedLearned:    "refused_learned",
	ReasonLimited:           "limited",
	ReasonOpen:              "downstream_open",
	ReasonThrottled:         "throttled",
}

// String returns the reason's stable snake_case name.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Budget reports whether the reason means the time budget, not the
// operation, ended the call (refused, by the fixed or the learned floor,
// backoff or Retry-After too long, deadline). [ReasonRetryBudget] is not one: the shared retry budget, not
// the deadline, stopped the retries, with time left.
func (r Reason) Budget() bool {
	switch r {
	case ReasonRefused, ReasonRefusedLearned, ReasonBackoffTooLong, ReasonRetryAfterTooLong, ReasonDeadline:
		return true
	}
	return false
}

// Sentinel returns the error that errors.Is matches for r, or nil for
// ReasonSuccess and ReasonPanic.
func (r Reason) Sentinel() error {
	switch r {
	case ReasonNotRetryable:
		return ErrNotRetryable
	case ReasonExhausted:
		return ErrAttemptsExhausted
	case ReasonRefused:
		return ErrRefused
	case ReasonBackoffTooLong:
		return ErrBackoffExceedsBudget
	case ReasonRetryAfterTooLong:
		return ErrRetryAfterExceedsBudget
	case ReasonDeadline:
		return ErrDeadlineReached
	case ReasonCanceled:
		return ErrCanceled
	case ReasonRetryBudget:
		return ErrRetryBudgetExhausted
	case ReasonRefusedLearned:
		return ErrRefusedLearned
	case ReasonLimited:
		return ErrLimited
	case ReasonOpen:
		return ErrDownstreamOpen
	case ReasonThrottled:
		return ErrThrottled
	}
	return nil
}

// StopError is the error [Do] returns when a call ends without a result.
//
// errors.Is matches the reason's sentinel ([Reason.Sentinel]) and the last
// attempt's error; budget reasons also match context.DeadlineExceeded and
// ReasonCanceled matches context.Canceled. errors.As reaches the last
// attempt's error too.
type StopError struct {
	Name      string        // the policy's name, may be empty
	Reason    Reason        // why the call stopped
	Attempts  int           // attempts started
	Last      error         // the last attempt's error; nil when none ran
	Remaining time.Duration // budget left when the call stopped
	Floor     time.Duration // the policy's floor
	Wait      time.Duration // the sleep that did not fit (backoff or Retry-After), else 0
	// Balance is the retry budget's balance when it denied the retry
	// ([ReasonRetryBudget]; 0 or less), else 0.
	Balance int
	// Lease and Estimate, for [ReasonRefusedLearned]: the lease the
	// refused attempt would have been granted and the [LearnedFloor]'s
	// estimate of its chance to complete within it (else zero).
	Lease    time.Duration
	Estimate Estimate
	// Refusal, for [ReasonLimited], [ReasonOpen] and [ReasonThrottled]:
	// the limiter's or the throttle's refusal (its cause, limit and queue
	// position); else nil.
	Refusal *overload.RefusedError
}

// Error says what stopped the call, what was asked and what was left, then
// the last attempt's error, e.g.
// "fetch: Retry-After 3s exceeds the 870ms left above the 20ms floor (after 1 attempt): 503 Service Unavailable".
// The last error is left out when its text only repeats the reason (it is,
// or only wraps, the reason's own sentinel); errors.Is still finds it.
// Durations longer than two days are written in days or years, and a
// saturated one (a Retry-After too large for a time.Duration) as a bound.
func (e *StopError) Error() string {
	var s string
	left := e.Remaining.Round(time.Millisecond / 10)
	switch e.Reason {
	case ReasonRefused:
		s = fmt.Sprintf("refused before attempt %d: %s left, floor %s", e.Attempts+1, readable.Duration(left), readable.Duration(e.Floor))
	case ReasonBackoffTooLong:
		s = fmt.Sprintf("backoff %s exceeds the %s left above the %s floor", readable.Duration(e.Wait), readable.Duration(left-e.Floor), readable.Duration(e.Floor))
	case ReasonRetryAfterTooLong:
		s = fmt.Sprintf("Retry-After %s exceeds the %s left above the %s floor", readable.Duration(e.Wait), readable.Duration(left-e.Floor), readable.Duration(e.Floor))
	case ReasonDeadline:
		s = "the shared deadline was reached"
	case ReasonCanceled:
		s = "canceled by the caller"
	case ReasonExhausted:
		s = "attempts exhausted"
	case ReasonNotRetryable:
		s = "not retryable"
	case ReasonRetryBudget:
		s = fmt.Sprintf("retry budget exhausted (balance %d)", e.Balance)
	case ReasonRefusedLearned:
		s = fmt.Sprintf("refused before attempt %d: a %s lease completes %.1f%% of the time (%d recent samples)",
			e.Attempts+1, readable.Duration(e.Lease.Round(time.Millisecond/10)), 100*e.Estimate.P, e.Estimate.Samples)
	case ReasonLimited, ReasonOpen, ReasonThrottled:
		s = fmt.Sprintf("%s before attempt %d", e.Reason, e.Attempts+1)
		if r := e.Refusal; r != nil && r.Cause != overload.CauseThrottled {
			if r.Cause == overload.CauseOpen {
				s += fmt.Sprintf(": %s left", readable.Duration(left))
			} else {
				s += fmt.Sprintf(" (%s): position %d at limit %d, %s left, %s needed", r.Cause, r.Position, r.Limit,
					readable.Duration(left), readable.Duration(r.Need.Round(time.Millisecond/10)))
			}
		}
	default:
		s = e.Reason.String()
	}
	phrase := s
	if e.Name != "" {
		s = e.Name + ": " + s
	} else {
		s = "deadline: " + s
	}
	if !e.Reason.beforeAttempt() || e.Attempts > 0 {
		s += fmt.Sprintf(" (after %d attempt%s)", e.Attempts, plural(e.Attempts))
	}
	if e.Last != nil {
		if last := e.Last.Error(); !repeats(last, e.Reason.Sentinel(), phrase) {
			s += ": " + last
		}
	}
	return s
}

// beforeAttempt reports whether r stops a call before an attempt, whose
// message already says which.
func (r Reason) beforeAttempt() bool {
	switch r {
	case ReasonRefused, ReasonRefusedLearned, ReasonLimited, ReasonOpen, ReasonThrottled:
		return true
	}
	return false
}

// repeats reports whether msg, an error's text, says nothing more than
// sentinel or phrase already do.
func repeats(msg string, sentinel error, phrase string) bool {
	return msg == phrase || sentinel != nil && msg == sentinel.Error()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Unwrap returns the reason's sentinel and the last attempt's error.
func (e *StopError) Unwrap() []error {
	s := e.Reason.Sentinel()
	switch {
	case s == nil && e.Last == nil:
		return nil
	case s == nil:
		return []error{e.Last}
	case e.Last == nil:
		return []error{s}
	}
	return []error{s, e.Last}
}

// Timeout reports whether the budget, not the operation, stopped the call
// (the net.Error convention).
func (e *StopError) Timeout() bool { return e.Reason.Budget() }

// ErrorType returns the stop reason, for the semantic-conventions attribute
// error.type.
func (e *StopError) ErrorType() string { return e.Reason.String() }

// PolicyError reports an invalid [Policy] field or argument: which one, the
// value given, and what is allowed. It matches [ErrInvalidPolicy].
type PolicyError struct {
	Field   string // e.g. "Policy.MaxAttempts"
	Value   any    // the value given
	Allowed string // e.g. ">= 1"
}

// Error says which field or argument was wrong, its value and what is
// allowed, e.g. "deadline: invalid Policy.MaxAttempts 0: must be >= 1".
func (e *PolicyError) Error() string {
	v := e.Value
	if d, ok := v.(time.Duration); ok {
		v = readable.Duration(d)
	}
	return fmt.Sprintf("deadline: invalid %s %v: must be %s", e.Field, v, e.Allowed)
}

// errNilContext is what Do and Call return for a nil context.
func errNilContext() error {
	return &PolicyError{"ctx", "nil", "a non-nil context.Context (use context.Background())"}
}

// errZeroDeadline is what Do and Call return for the zero Deadline.
func errZeroDeadline() error {
	return &PolicyError{"Deadline", "Deadline{}", "a Deadline from New, At or FromContext (the zero Deadline has no end)"}
}

// Is matches [ErrInvalidPolicy].
func (e *PolicyError) Is(target error) bool { return target == ErrInvalidPolicy }

// ErrorType returns "invalid_policy".
func (e *PolicyError) ErrorType() string { return "invalid_policy" }

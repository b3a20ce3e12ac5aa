package deadline

import (
	"errors"
	"fmt"
	"time"

	"github.com/deadlinebudget/budget/deadline/internal/readable"
)

// retryableError marks an error as safe to retry without changing what
// errors.Is and errors.As find.
type retryableError struct{ err error }

func (e *retryableError) Error() string   { return e.err.Error() }
func (e *retryableError) Unwrap() error   { return e.err }
func (e *retryableError) Retryable() bool { return true }

// Retryable marks err as safe to retry. errors.Is and errors.As still find
// the original error, and the message is unchanged. Retryable(nil) is nil.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &retryableError{err}
}

// IsRetryable reports whether err, or any error it wraps, is marked
// retryable: by [Retryable], or by implementing Retryable() bool and
// returning true (an [AttemptTimeoutError] does).
func IsRetryable(err error) bool {
	for err != nil {
		if r, ok := err.(interface{ Retryable() bool }); ok && r.Retryable() {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if IsRetryable(e) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// RetryAfterError annotates an error with the delay a server asked for before
// the next attempt (HTTP Retry-After). Create one with [RetryAfter].
type RetryAfterError struct {
	Err   error
	Delay time.Duration // >= 0
}

// Error returns the wrapped error's message and the delay asked, e.g.
// "503 Service Unavailable (server asked to retry after 3s)". A delay too
// large for a time.Duration (saturated) reads "more than 292 years".
func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("%v (server asked to retry after %s)", e.Err, readable.Duration(e.Delay))
}

// Unwrap returns the wrapped error.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter annotates err with a server-requested delay. In [Do] the delay
// replaces the policy's backoff and is never shortened; when it is longer
// than what is left above the floor the call stops at once with
// [ReasonRetryAfterTooLong]. RetryAfter does not make err retryable: mark it
// with [Retryable] as well. A negative delay is treated as zero;
// RetryAfter(nil, d) is nil.
func RetryAfter(err error, delay time.Duration) error {
	if err == nil {
		return nil
	}
	return &RetryAfterError{Err: err, Delay: max(delay, 0)}
}

// RetryAfterOf returns the delay carried by the first [RetryAfterError] in
// err's chain.
func RetryAfterOf(err error) (time.Duration, bool) {
	if ra, ok := errors.AsType[*RetryAfterError](err); ok {
		return ra.Delay, true
	}
	return 0, false
}

// AttemptTimeoutError is the error [Do] records for an attempt that its own
// ceiling ended: the operation was slower than [Policy.AttemptTimeout]. It is
// retryable, wraps the operation's own error, and matches
// [ErrCeilingReached] and context.DeadlineExceeded.
type AttemptTimeoutError struct {
	Attempt int
	Ceiling time.Duration
	Err     error // what the operation returned
}

// Error says which attempt ran out of its ceiling, then the operation's
// error unless it only repeats that the ceiling was reached, e.g.
// "attempt 2 exceeded its 100ms ceiling: context deadline exceeded".
func (e *AttemptTimeoutError) Error() string {
	s := fmt.Sprintf("attempt %d exceeded its %s ceiling", e.Attempt, readable.Duration(e.Ceiling))
	if e.Err != nil && !repeats(e.Err.Error(), ErrCeilingReached, "") {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns [ErrCeilingReached] and the operation's error.
func (e *AttemptTimeoutError) Unwrap() []error { return []error{ErrCeilingReached, e.Err} }

// Retryable reports true: a slow attempt may be retried if attempts and
// budget allow and the classifier agrees.
func (e *AttemptTimeoutError) Retryable() bool { return true }

// Timeout reports true.
func (e *AttemptTimeoutError) Timeout() bool { return true }

// ErrorType returns "attempt_timeout".
func (e *AttemptTimeoutError) ErrorType() string { return "attempt_timeout" }

// overloadedError marks an error as the downstream's overload answer.
type overloadedError struct{ err error }

func (e *overloadedError) Error() string        { return e.err.Error() }
func (e *overloadedError) Unwrap() error        { return e.err }
func (e *overloadedError) Is(target error) bool { return target == ErrOverloaded }

// shedError marks an overload answer as a shed from a standing queue.
type shedError struct{ err error }

func (e *shedError) Error() string        { return e.err.Error() }
func (e *shedError) Unwrap() error        { return e.err }
func (e *shedError) Is(target error) bool { return target == ErrOverloaded }

// Shed marks err as the downstream's overload answer to a call it shed
// from a standing queue after the call waited there as long as such a
// queue lets a call wait (this project's server admission: HTTP 503 with
// "reason=standing_queue" in Deadline-Refused): "shed now, come back",
// the server's own admission at work, not a downstream failing.
// errors.Is(err, [ErrOverloaded]) holds, and [Do] counts the attempt as
// [OutcomeOverload] for a [Limiter] as [Overloaded] does, but client-side
// throttling ([WithThrottle]) does not count it at all: counted as
// refused, such answers made the throttle drop calls at random, not by the
// budget they had left, and keep dropping them for its window after the
// overload ended (docs/benchmarks.md, scenario 10). Shed(nil) is nil.
func Shed(err error) error {
	if err == nil {
		return nil
	}
	return &shedError{err}
}

// isShed reports whether err carries [Shed]'s mark.
func isShed(err error) bool {
	_, ok := errors.AsType[*shedError](err)
	return ok
}

// Overloaded marks err as the downstream's overload answer (an HTTP 429 or
// 503, gRPC RESOURCE_EXHAUSTED), so that errors.Is(err, [ErrOverloaded])
// holds: [Do] then counts the attempt as refused for client-side throttling
// ([Policy.Throttle]) and as [overload.OutcomeOverload] for a [Policy.Limiter]. errors.Is and
// errors.As still find the original error, whose message is unchanged;
// [IsRetryable] still sees its marks. Overloaded(nil) is nil.
func Overloaded(err error) error {
	if err == nil {
		return nil
	}
	return &overloadedError{err}
}

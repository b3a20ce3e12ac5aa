package peers

import (
	"context"
	"errors"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/failsafe-go/failsafe-go/timeout"
)

// Failsafe is github.com/failsafe-go/failsafe-go, composed as its Timeout
// page recommends: a Timeout outside the RetryPolicy limits the whole
// execution, a Timeout inside it limits each attempt:
//
//	rp := retrypolicy.NewBuilder[any]().
//		HandleIf(func(_ any, err error) bool { return Retryable(err) || errors.Is(err, timeout.ErrExceeded) }).
//		WithMaxAttempts(c.MaxAttempts).
//		WithMaxDuration(c.Budget).
//		WithBackoff(c.BackoffBase, c.BackoffMax).
//		WithJitterFactor(0.25).
//		WithDelayFunc(Retry-After of the last error, else -1 for the backoff).
//		ReturnLastFailure().
//		Build()
//	failsafe.With[any](timeout.New[any](c.Budget), rp, timeout.New[any](c.AttemptTimeout)).
//		WithContext(ctx).GetWithExecution(func(e failsafe.Execution[any]) (any, error) { return nil, op(e.Context()) })
type Failsafe struct{}

// Name returns "failsafe-go".
func (Failsafe) Name() string { return "failsafe-go v0.9.8" }

// Config describes the composition built from a Call.
func (Failsafe) Config() string {
	return "failsafe.With(timeout(Budget), retrypolicy{MaxAttempts, MaxDuration(Budget), Backoff(Base, Max), JitterFactor 0.25, " +
		"DelayFunc = Retry-After, ReturnLastFailure}, timeout(AttemptTimeout)).WithContext(ctx)"
}

// Do runs op through the composed executor.
func (Failsafe) Do(ctx context.Context, c Call, op Op) error {
	if err := c.Validate(); err != nil {
		return err
	}
	rp := retrypolicy.NewBuilder[any]().
		HandleIf(func(_ any, err error) bool { return Retryable(err) || errors.Is(err, timeout.ErrExceeded) }).
		WithMaxAttempts(c.MaxAttempts).
		WithMaxDuration(c.Budget).
		WithBackoff(c.BackoffBase, c.BackoffMax).
		WithJitterFactor(0.25).
		WithDelayFunc(func(e failsafe.ExecutionAttempt[any]) time.Duration {
			if ra, ok := RetryAfterOf(e.LastError()); ok {
				return ra
			}
			return -1
		}).
		ReturnLastFailure().
		Build()
	_, err := failsafe.With[any](timeout.New[any](c.Budget), rp, timeout.New[any](c.AttemptTimeout)).
		WithContext(ctx).
		GetWithExecution(func(e failsafe.Execution[any]) (any, error) { return nil, op(e.Context()) })
	return err
}

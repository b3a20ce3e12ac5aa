package peers

import (
	"context"

	retry "github.com/sethvargo/go-retry"
)

// Sethvargo is github.com/sethvargo/go-retry. Its overall limit is the
// WithMaxDuration middleware (it shortens the last sleep to what is left);
// the per-attempt timeout is the caller's; retryable errors are wrapped. Its
// Backoff sees no error, so a server's Retry-After cannot reach it:
//
//	b := retry.NewExponential(c.BackoffBase)
//	b = retry.WithCappedDuration(c.BackoffMax, b)
//	b = retry.WithFullJitter(b)
//	b = retry.WithMaxRetries(uint64(c.MaxAttempts-1), b)
//	b = retry.WithMaxDuration(c.Budget, b)
//	retry.Do(ctx, b, func(ctx context.Context) error {
//		actx, cancel := context.WithTimeout(ctx, c.AttemptTimeout)
//		defer cancel()
//		if err := op(actx); Retryable(err) { return retry.RetryableError(err) } else { return err }
//	})
type Sethvargo struct{}

// Name returns "sethvargo/go-retry".
func (Sethvargo) Name() string { return "sethvargo/go-retry v0.5.0" }

// Config describes the backoff chain built from a Call.
func (Sethvargo) Config() string {
	return "retry.Do(ctx, WithMaxDuration(Budget, WithMaxRetries(MaxAttempts-1, WithFullJitter(WithCappedDuration(Max, NewExponential(Base))))), " +
		"op with context.WithTimeout(ctx, AttemptTimeout) and RetryableError); no Retry-After support"
}

// Do runs op under retry.Do with a fresh (stateful) backoff.
func (Sethvargo) Do(ctx context.Context, c Call, op Op) error {
	if err := c.Validate(); err != nil {
		return err
	}
	b := retry.NewExponential(c.BackoffBase)
	b = retry.WithCappedDuration(c.BackoffMax, b)
	b = retry.WithFullJitter(b)
	b = retry.WithMaxRetries(uint64(c.MaxAttempts-1), b)
	b = retry.WithMaxDuration(c.Budget, b)
	return retry.Do(ctx, b, func(ctx context.Context) error {
		actx, cancel := context.WithTimeout(ctx, c.AttemptTimeout)
		defer cancel()
		err := op(actx)
		if err != nil && Retryable(err) {
			return retry.RetryableError(err)
		}
		return err
	})
}

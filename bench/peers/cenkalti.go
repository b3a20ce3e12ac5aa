package peers

import (
	"context"
	"errors"

	"github.com/cenkalti/backoff/v5"
)

// Cenkalti is github.com/cenkalti/backoff/v5. It has an overall limit
// (WithMaxElapsedTime, checked against the next sleep) and honours a
// RetryAfterError; the per-attempt timeout is the caller's, as its examples
// show:
//
//	b := &backoff.ExponentialBackOff{InitialInterval: c.BackoffBase, RandomizationFactor: 0.5,
//		Multiplier: 2, MaxInterval: c.BackoffMax}
//	backoff.Retry(ctx, func() (struct{}, error) {
//		actx, cancel := context.WithTimeout(ctx, c.AttemptTimeout)
//		defer cancel()
//		err := op(actx)
//		// not Retryable(err): backoff.Permanent(err); Retry-After: &backoff.RetryAfterError{Duration: ra}
//	}, backoff.WithBackOff(b), backoff.WithMaxTries(uint(c.MaxAttempts)), backoff.WithMaxElapsedTime(c.Budget))
type Cenkalti struct{}

// Name returns "cenkalti/backoff".
func (Cenkalti) Name() string { return "cenkalti/backoff v5.0.3" }

// Config describes the retry built from a Call.
func (Cenkalti) Config() string {
	return "backoff.Retry(ctx, op with context.WithTimeout(ctx, AttemptTimeout), WithBackOff(Exponential{Initial Base, Randomization 0.5, " +
		"Multiplier 2, MaxInterval Max}), WithMaxTries, WithMaxElapsedTime(Budget)); Retry-After as *backoff.RetryAfterError"
}

// Do runs op under backoff.Retry.
func (Cenkalti) Do(ctx context.Context, c Call, op Op) error {
	if err := c.Validate(); err != nil {
		return err
	}
	b := &backoff.ExponentialBackOff{
		InitialInterval: c.BackoffBase, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: c.BackoffMax,
	}
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		actx, cancel := context.WithTimeout(ctx, c.AttemptTimeout)
		defer cancel()
		err := op(actx)
		switch {
		case err == nil:
			return struct{}{}, nil
		case !Retryable(err):
			return struct{}{}, backoff.Permanent(err)
		}
		if ra, ok := RetryAfterOf(err); ok {
			// The library's own type carries no cause: keep it in a join so
			// that the final error still says what failed.
			return struct{}{}, errors.Join(&backoff.RetryAfterError{Duration: ra}, err)
		}
		return struct{}{}, err
	}, backoff.WithBackOff(b), backoff.WithMaxTries(uint(c.MaxAttempts)), backoff.WithMaxElapsedTime(c.Budget))
	return err
}

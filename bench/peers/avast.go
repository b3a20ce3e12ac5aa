package peers

import (
	"context"
	"time"

	retry "github.com/avast/retry-go/v4"
)

// Avast is github.com/avast/retry-go/v4. It has no overall time limit of its
// own: its one limit is the Context option, so that is where the budget goes
// (both modes); the per-attempt timeout is the caller's. Retry-After follows
// the library's "custom retry function" example, a DelayType that reads the
// error:
//
//	lctx, cancel := context.WithTimeout(ctx, c.Budget)
//	retry.Do(func() error {
//		actx, cancel := context.WithTimeout(lctx, c.AttemptTimeout)
//		defer cancel()
//		return op(actx)
//	}, retry.Context(lctx), retry.Attempts(uint(c.MaxAttempts)),
//		retry.Delay(c.BackoffBase), retry.MaxDelay(c.BackoffMax),
//		retry.DelayType(Retry-After of the error, else retry.FullJitterBackoffDelay),
//		retry.RetryIf(Retryable), retry.LastErrorOnly(true))
//
// Note that retry-go caps every delay at MaxDelay, Retry-After included.
type Avast struct{}

// Name returns "avast/retry-go".
func (Avast) Name() string { return "avast/retry-go v4.7.0" }

// Config describes the retry built from a Call.
func (Avast) Config() string {
	return "retry.Do(op with context.WithTimeout(lctx, AttemptTimeout), Context(lctx = context.WithTimeout(ctx, Budget)), Attempts, " +
		"Delay(Base), MaxDelay(Max), DelayType(Retry-After else FullJitterBackoffDelay), RetryIf, LastErrorOnly)"
}

// Do runs op under retry.Do.
func (Avast) Do(ctx context.Context, c Call, op Op) error {
	if err := c.Validate(); err != nil {
		return err
	}
	lctx, cancel := context.WithTimeout(ctx, c.Budget)
	defer cancel()
	return retry.Do(func() error {
		actx, cancel := context.WithTimeout(lctx, c.AttemptTimeout)
		defer cancel()
		return op(actx)
	},
		retry.Context(lctx),
		retry.Attempts(uint(c.MaxAttempts)),
		retry.Delay(c.BackoffBase),
		retry.MaxDelay(c.BackoffMax),
		retry.DelayType(func(n uint, err error, cfg *retry.Config) time.Duration {
			if ra, ok := RetryAfterOf(err); ok {
				return ra
			}
			return retry.FullJitterBackoffDelay(n, err, cfg)
		}),
		retry.RetryIf(Retryable),
		retry.LastErrorOnly(true),
	)
}

package peers

import (
	"context"
	"math/rand/v2"
	"time"
)

// Baseline is the loop people write by hand: a fixed per-attempt
// context.WithTimeout, exponential backoff with full jitter, a server's
// Retry-After obeyed, and an elapsed-time check before each sleep as the
// overall limit:
//
//	for n := 1; ; n++ {
//		actx, cancel := context.WithTimeout(ctx, c.AttemptTimeout)
//		err := op(actx); cancel()
//		if err == nil || !Retryable(err) || n == c.MaxAttempts { return err }
//		wait := rand.N(min(c.BackoffBase<<(n-1), c.BackoffMax) + 1) // or the Retry-After
//		if time.Since(start)+wait > c.Budget { return err }
//		select { case <-time.After(wait): case <-ctx.Done(): return err }
//	}
type Baseline struct{}

// Name returns "baseline loop".
func (Baseline) Name() string { return "hand-written loop" }

// Config describes the loop built from a Call.
func (Baseline) Config() string {
	return "for loop: context.WithTimeout(ctx, AttemptTimeout) per attempt, full-jitter exponential backoff (Base, Max) or Retry-After, " +
		"stop when elapsed + next sleep > Budget, sleep ends early if ctx ends"
}

// Do runs the loop.
func (Baseline) Do(ctx context.Context, c Call, op Op) error {
	if err := c.Validate(); err != nil {
		return err
	}
	start := time.Now()
	for n := 1; ; n++ {
		actx, cancel := context.WithTimeout(ctx, c.AttemptTimeout)
		err := op(actx)
		cancel()
		if err == nil || !Retryable(err) || n >= c.MaxAttempts {
			return err
		}
		wait := rand.N(min(c.BackoffBase<<(n-1), c.BackoffMax) + 1)
		if ra, ok := RetryAfterOf(err); ok {
			wait = ra
		}
		if time.Since(start)+wait > c.Budget {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}

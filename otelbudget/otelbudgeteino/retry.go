package otelbudgeteino

import (
	"context"
	"errors"
	"time"

	"github.com/cloudwego/eino/adk"

	"github.com/deadlinebudget/budget/deadline"
)

// ModelRetryConfig returns an adk.ModelRetryConfig (for
// ChatModelAgentConfig.ModelRetryConfig) that allows at most maxRetries
// retries of a model call and consults the run's budget before each:
//
//   - an error of a context (canceled, deadline exceeded, an attempt's
//     ceiling) or the context of the call being done is never retried, nor
//     is a [*deadline.StopError] of [Budget.Model] but one that says the
//     model policy's attempts were spent (ReasonExhausted) on an error it
//     could retry: set Config.Model.MaxAttempts to 1 to let Eino's retry
//     make the retries, else Budget.Model has made them already;
//   - any other error is retried only when deadline.IsRetryable says so
//     (a provider's answer marked by [Budget.Transport]) and the wait fits:
//     the provider's retry-after if it gave one, else the model policy's
//     backoff, must be shorter than what is left above the floor (and the
//     reserve). A wait that does not fit is not slept: IsRetryAble says no,
//     and the run records the stop (ReasonRetryAfterTooLong or
//     ReasonBackoffTooLong) so that [Run.End] returns it.
//
// BackoffFunc returns the wait IsRetryAble granted. Eino sleeps it with
// time.Sleep, which no context interrupts: only a wait that fits is ever
// returned. Outside a run the config behaves as deadline.IsRetryable and the
// model policy's backoff. A maxRetries below 0 counts as 0.
func (b *Budget) ModelRetryConfig(maxRetries int) *adk.ModelRetryConfig {
	if maxRetries < 0 {
		maxRetries = 0
	}
	return &adk.ModelRetryConfig{
		MaxRetries: maxRetries,
		IsRetryAble: func(ctx context.Context, err error) bool {
			if stop, ok := errors.AsType[*deadline.StopError](err); ok {
				if stop.Reason != deadline.ReasonExhausted || stop.Last == nil {
					return false // the budget's stop, or an error Do would not retry
				}
				err = stop.Last // the model policy's attempts are spent: Eino's retry may go on
			}
			if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return false
			}
			if !deadline.IsRetryable(err) {
				return false
			}
			r := runFrom(ctx)
			if r == nil {
				return true
			}
			return r.grantRetry(err)
		},
		BackoffFunc: func(ctx context.Context, attempt int) time.Duration {
			if r := runFrom(ctx); r != nil {
				return r.grantedWait()
			}
			return b.model.Backoff.Delay(attempt, b.model.Rand)
		},
	}
}

func (r *Run) resetRetries() {
	r.retryMu.Lock()
	r.retryN, r.retryWait = 0, 0
	r.retryMu.Unlock()
}

// grantRetry decides whether Eino's retry of the current model call fits
// in the budget, and keeps the wait for BackoffFunc.
func (r *Run) grantRetry(err error) bool {
	b := r.b
	r.retryMu.Lock()
	defer r.retryMu.Unlock()
	r.retryN++
	floor := r.ar.ModelFloor(b.model.Floor, r.ar.Final())
	wait, asked := deadline.RetryAfterOf(err)
	if !asked {
		wait = b.model.Backoff.Delay(r.retryN, b.model.Rand)
	}
	left := r.d.Remaining()
	if wait >= left-floor {
		reason := deadline.ReasonBackoffTooLong
		if asked {
			reason = deadline.ReasonRetryAfterTooLong
		}
		r.endsRun(&deadline.StopError{Name: b.modelStep, Reason: reason, Attempts: r.retryN, Last: err, Remaining: left, Floor: floor, Wait: wait})
		return false
	}
	r.retryWait = wait
	return true
}

func (r *Run) grantedWait() time.Duration {
	r.retryMu.Lock()
	defer r.retryMu.Unlock()
	return r.retryWait
}

package deadline

import "context"

// Call runs op until it succeeds, runs out of retries, or runs out of time:
// one first attempt and at most retries more.
//
// Before each attempt, if d has expired, Call returns a [*StopError] with
// [ReasonRefused] (it matches context.DeadlineExceeded and [ErrRefused], and
// wraps the previous attempt's error) without calling op. Each attempt runs
// op inside a fresh [Deadline.Scope] of ctx, released when op returns. An
// error marked [Retryable] is retried at once, without a pause; when no
// retries are left that last error is returned as it is. Every other error,
// context.DeadlineExceeded and context.Canceled included, is returned at once
// without a retry, so an op slower than the whole budget runs exactly once.
//
// A nil ctx, the zero Deadline, retries < 0 or a nil op returns a
// [*PolicyError] (the same as [Do] returns for the first two) and op is never
// called. For leases, a floor, backoff and hooks use [Do].
func Call[T any](ctx context.Context, d Deadline, op func(context.Context) (T, error), retries int) (T, error) {
	var zero T
	if ctx == nil {
		return zero, errNilContext()
	}
	if d.IsZero() {
		return zero, errZeroDeadline()
	}
	if retries < 0 {
		return zero, &PolicyError{"retries", retries, ">= 0"}
	}
	if op == nil {
		return zero, &PolicyError{"op", "nil", "a non-nil function"}
	}
	var last error
	for n := 0; n <= retries; n++ {
		if d.Expired() {
			return zero, &StopError{Reason: ReasonRefused, Attempts: n, Last: last, Remaining: d.Remaining()}
		}
		v, err := callOnce(ctx, d, op)
		if err == nil {
			return v, nil
		}
		if !IsRetryable(err) {
			return zero, err
		}
		last = err
	}
	return zero, last
}

func callOnce[T any](ctx context.Context, d Deadline, op func(context.Context) (T, error)) (T, error) {
	sctx, cancel := d.Scope(ctx)
	defer cancel()
	return op(sctx)
}

package peers

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
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
	// The delay func reads the op's last error from here rather than from
	// ExecutionAttempt.LastError: in v0.9.8 that method reads, without a
	// lock, the field the outer Timeout's Cancel writes under one, and the
	// race detector reports it. The value is the same.
	var last atomic.Pointer[error]
	rp := retrypolicy.NewBuilder[any]().
		HandleIf(func(_ any, err error) bool { return Retryable(err) || errors.Is(err, timeout.ErrExceeded) }).
		WithMaxAttempts(c.MaxAttempts).
		WithMaxDuration(c.Budget).
		WithBackoff(c.BackoffBase, c.BackoffMax).
		WithJitterFactor(0.25).
		WithDelayFunc(func(failsafe.ExecutionAttempt[any]) time.Duration {
			if p := last.Load(); p != nil {
				if ra, ok := RetryAfterOf(*p); ok {
					return ra
				}
			}
			return -1
		}).
		ReturnLastFailure().
		Build()
	_, err := failsafe.With[any](timeout.New[any](c.Budget), rp, timeout.New[any](c.AttemptTimeout)).
		WithContext(ctx).
		GetWithExecution(func(e failsafe.Execution[any]) (any, error) {
			err := op(e.Context())
			last.Store(&err)
			return nil, err
		})
	return err
}

// FailsafeHTTP is failsafe-go's failsafehttp round tripper with the policy
// its NewRetryPolicyBuilder recommends for HTTP (retries 429, 5xx but 501,
// and transport errors; Retry-After of a 429 or 503 as the delay), composed
// with the same outer and inner Timeouts as [Failsafe]:
//
//	rp := failsafehttp.NewRetryPolicyBuilder().
//		WithMaxAttempts(c.MaxAttempts).WithMaxDuration(c.Budget).
//		WithBackoff(c.BackoffBase, c.BackoffMax).WithJitterFactor(0.25).
//		ReturnLastFailure().Build()
//	client := &http.Client{Transport: failsafehttp.NewRoundTripper(base,
//		timeout.New[*http.Response](c.Budget), rp, timeout.New[*http.Response](c.AttemptTimeout))}
type FailsafeHTTP struct{}

// Name returns "failsafe-go".
func (FailsafeHTTP) Name() string { return Failsafe{}.Name() }

// Config describes the round tripper built from a Call.
func (FailsafeHTTP) Config() string {
	return "failsafehttp.NewRoundTripper(base, timeout(Budget), failsafehttp.NewRetryPolicyBuilder(){MaxAttempts, MaxDuration(Budget), " +
		"Backoff(Base, Max), JitterFactor 0.25, ReturnLastFailure}, timeout(AttemptTimeout))"
}

// Send sends the request through the failsafehttp round tripper.
func (FailsafeHTTP) Send(ctx context.Context, c Call, base http.RoundTripper, method, url string, body []byte) (int, error) {
	if err := c.Validate(); err != nil {
		return 0, err
	}
	rp := failsafehttp.NewRetryPolicyBuilder().
		WithMaxAttempts(c.MaxAttempts).
		WithMaxDuration(c.Budget).
		WithBackoff(c.BackoffBase, c.BackoffMax).
		WithJitterFactor(0.25).
		ReturnLastFailure().
		Build()
	client := &http.Client{Transport: failsafehttp.NewRoundTripper(base,
		timeout.New[*http.Response](c.Budget), rp, timeout.New[*http.Response](c.AttemptTimeout))}
	req, err := http.NewRequestWithContext(ctx, method, url, bodyOf(body))
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	return drain(resp), err
}

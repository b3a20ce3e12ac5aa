package peers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/failsafe-go/failsafe-go/timeout"
)

// Failsafe is github.com/failsafe-go/failsafe-go, composed as its Timeout
// page recommends: a Timeout outside the RetryPolicy limits the whole
// execution, a Timeout inside it limits each attempt. The policies and the
// executor are built once per Call and reused for every execution, as its
// docs recommend (policies are safe to share; each execution only binds its
// context with WithContext):
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
//	exec := failsafe.With[any](timeout.New[any](c.Budget), rp, timeout.New[any](c.AttemptTimeout))  // once
//	exec.WithContext(ctx).GetWithExecution(func(e failsafe.Execution[any]) (any, error) { return nil, op(e.Context()) })
//
// PerCall rebuilds the policies and the executor on every call instead, the
// form the comparison first measured; scenario 7 reports both.
type Failsafe struct {
	// PerCall builds the policies and the executor inside Do, every call.
	PerCall bool
}

// Name returns "failsafe-go" and its version, marked when PerCall.
func (f Failsafe) Name() string {
	if f.PerCall {
		return "failsafe-go v0.9.8, policies rebuilt per call"
	}
	return "failsafe-go v0.9.8"
}

// Config describes the composition built from a Call.
func (f Failsafe) Config() string {
	s := "failsafe.With(timeout(Budget), retrypolicy{MaxAttempts, MaxDuration(Budget), Backoff(Base, Max), JitterFactor 0.25, " +
		"DelayFunc = Retry-After, ReturnLastFailure}, timeout(AttemptTimeout))"
	if f.PerCall {
		return s + " built in every call, then .WithContext(ctx)"
	}
	return s + " built once per Call and reused, then .WithContext(ctx) per call"
}

// failsafeBuilt is an executor and the Call it was built from.
type failsafeBuilt struct {
	c    Call
	exec failsafe.Executor[any]
}

// failsafeShared holds the executor of the last Call seen: every scenario
// runs one Call many times, so a single entry is the whole cache. A Do with
// another Call builds its own and replaces it; executors are immutable once
// built, so a replaced one in use elsewhere stays valid.
var failsafeShared atomic.Pointer[failsafeBuilt]

// lastErrKey finds the call's [lastErr] in an execution's context.
type lastErrKey struct{}

// lastErr is a call's context carrying the op's last error for the delay
// function: one allocation for both. The delay function reads the error from
// here rather than from ExecutionAttempt.LastError: in v0.9.8 that method
// reads, without a lock, the field the outer Timeout's Cancel writes under
// one, and the race detector reports it. The value is the same.
type lastErr struct {
	context.Context
	mu  sync.Mutex
	err error
}

// Value returns l itself for lastErrKey.
func (l *lastErr) Value(key any) any {
	if key == (lastErrKey{}) {
		return l
	}
	return l.Context.Value(key)
}

func (l *lastErr) store(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

func (l *lastErr) load() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// buildFailsafe builds the executor for c.
func buildFailsafe(c Call) failsafe.Executor[any] { return buildFailsafeWith(c, nil) }

// buildFailsafeWith builds the executor for c, letting more configure the
// retry policy before it is built.
func buildFailsafeWith(c Call, more func(retrypolicy.Builder[any])) failsafe.Executor[any] {
	rp := retrypolicy.NewBuilder[any]().
		HandleIf(func(_ any, err error) bool { return Retryable(err) || errors.Is(err, timeout.ErrExceeded) }).
		WithMaxAttempts(c.MaxAttempts).
		WithMaxDuration(c.Budget).
		WithBackoff(c.BackoffBase, c.BackoffMax).
		WithJitterFactor(0.25).
		WithDelayFunc(func(e failsafe.ExecutionAttempt[any]) time.Duration {
			if l, ok := e.Context().Value(lastErrKey{}).(*lastErr); ok {
				if ra, ok := RetryAfterOf(l.load()); ok {
					return ra
				}
			}
			return -1
		}).
		ReturnLastFailure()
	if more != nil {
		more(rp)
	}
	return failsafe.With[any](timeout.New[any](c.Budget), rp.Build(), timeout.New[any](c.AttemptTimeout))
}

// executor returns the executor for c: the shared one, or a fresh one.
func (f Failsafe) executor(c Call) failsafe.Executor[any] {
	if f.PerCall {
		return buildFailsafe(c)
	}
	if b := failsafeShared.Load(); b != nil && b.c == c {
		return b.exec
	}
	b := &failsafeBuilt{c: c, exec: buildFailsafe(c)}
	failsafeShared.Store(b)
	return b.exec
}

// Do runs op through the composed executor.
func (f Failsafe) Do(ctx context.Context, c Call, op Op) error {
	if err := c.Validate(); err != nil {
		return err
	}
	return runFailsafe(ctx, f.executor(c), op)
}

// runFailsafe runs op through exec under ctx.
func runFailsafe(ctx context.Context, exec failsafe.Executor[any], op Op) error {
	l := &lastErr{Context: ctx}
	_, err := exec.
		WithContext(l).
		GetWithExecution(func(e failsafe.Execution[any]) (any, error) {
			err := op(e.Context())
			l.store(err)
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

// FailsafeBudget is [Failsafe] with a retry budget shared by every call that
// goes through it, as failsafe-go's budget package recommends for limiting
// retries across a system: the same composition, its retry policy built
// WithBudget(budget.NewBuilder().WithMaxRate(MaxRate).WithMinConcurrency(MinConcurrency).Build()).
// The budget is the state that makes it work, so one FailsafeBudget is built
// once, with [NewFailsafeBudget], and shared by all the clients it limits.
type FailsafeBudget struct {
	c              Call
	maxRate        float64
	minConcurrency uint
	exec           failsafe.Executor[any]
}

// NewFailsafeBudget builds the executor for c with a budget allowing at most
// maxRate of the executions in flight to be retries, and at least
// minConcurrency retries at once (failsafe-go's defaults: 0.2 and 3).
func NewFailsafeBudget(c Call, maxRate float64, minConcurrency uint) (*FailsafeBudget, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if !(maxRate >= 0 && maxRate <= 1) {
		return nil, fmt.Errorf("peers: failsafe-go budget max rate is %v, want 0 <= rate <= 1", maxRate)
	}
	b := budget.NewBuilder().WithMaxRate(maxRate).WithMinConcurrency(minConcurrency).Build()
	return &FailsafeBudget{c: c, maxRate: maxRate, minConcurrency: minConcurrency,
		exec: buildFailsafeWith(c, func(rp retrypolicy.Builder[any]) { rp.WithBudget(b) })}, nil
}

// Name returns failsafe-go's name with its budget.
func (f *FailsafeBudget) Name() string {
	return fmt.Sprintf("failsafe-go v0.9.8 + budget (max rate %g, min %d)", f.maxRate, f.minConcurrency)
}

// Config describes the composition.
func (f *FailsafeBudget) Config() string {
	return Failsafe{}.Config() + fmt.Sprintf("; retry policy WithBudget(budget max rate %g, min concurrency %d), one budget shared by every call",
		f.maxRate, f.minConcurrency)
}

// Do runs op through the shared executor. c must be the Call the executor
// was built for.
func (f *FailsafeBudget) Do(ctx context.Context, c Call, op Op) error {
	if c != f.c {
		return fmt.Errorf("peers: FailsafeBudget built for %+v, called with %+v", f.c, c)
	}
	return runFailsafe(ctx, f.exec, op)
}

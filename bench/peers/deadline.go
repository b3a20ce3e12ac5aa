package peers

import (
	"context"
	"net/http"
	"sync"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
)

// Deadline is this project, package deadline:
//
//	d := deadline.New(c.Budget)  // or deadline.FromContext(ctx) when ctx has a deadline
//	deadline.Do(ctx, d, deadline.Policy{
//		MaxAttempts: c.MaxAttempts, AttemptTimeout: c.AttemptTimeout, Floor: c.Floor,
//		Backoff: deadline.Backoff{Base: c.BackoffBase, Max: c.BackoffMax}, // full jitter
//	}, op)
//
// Retryable failures are marked with deadline.Retryable and a server's delay
// with deadline.RetryAfter; attempts ended by their own ceiling are retryable
// by default.
type Deadline struct{}

// Name returns "deadline (this)".
func (Deadline) Name() string { return "deadline (this)" }

// Config describes the policy built from a Call.
func (Deadline) Config() string {
	return "deadline.Do with Policy{MaxAttempts, AttemptTimeout (a ceiling: lease = min(ceiling, remaining-floor)), Floor 20ms, " +
		"Backoff{Base, Max} full jitter}; Deadline = deadline.FromContext(ctx) or deadline.New(Budget); Retry-After via deadline.RetryAfter"
}

// Policy returns the deadline.Policy built from c.
func (Deadline) Policy(c Call) deadline.Policy {
	return deadline.Policy{
		Name: "bench", MaxAttempts: c.MaxAttempts, AttemptTimeout: c.AttemptTimeout, Floor: c.Floor,
		Backoff: deadline.Backoff{Base: c.BackoffBase, Max: c.BackoffMax, Jitter: deadline.JitterFull},
	}
}

// Do runs op under deadline.Do.
func (a Deadline) Do(ctx context.Context, c Call, op Op) error {
	if err := c.Validate(); err != nil {
		return err
	}
	d, ok := deadline.FromContext(ctx)
	if !ok || d.Remaining() > c.Budget {
		d = deadline.New(c.Budget)
	}
	_, err := deadline.Do(ctx, d, a.Policy(c), func(ctx context.Context, _ deadline.AttemptInfo) (struct{}, error) {
		return struct{}{}, markDeadline(op(ctx))
	})
	return err
}

// markDeadline translates the harness's classification into the project's
// idiom.
func markDeadline(err error) error {
	if err == nil {
		return nil
	}
	if ra, ok := RetryAfterOf(err); ok {
		err = deadline.RetryAfter(err, ra)
	}
	if Retryable(err) {
		err = deadline.Retryable(err)
	}
	return err
}

// DeadlineHTTP is this project's HTTP client, package deadlinehttp: a
// Transport that runs each request under deadline.Do with the same Policy as
// [Deadline], finds the run's deadline in the request's context (mode ctx)
// or gives the request the library's own budget (mode lib), honours
// Retry-After and retries only idempotent requests:
//
//	client := &http.Client{Transport: deadlinehttp.NewTransport(base,
//		deadlinehttp.WithPolicy(policy), deadlinehttp.WithDefaultBudget(c.Budget))}
type DeadlineHTTP struct{}

// Name returns the project's name.
func (DeadlineHTTP) Name() string { return Deadline{}.Name() }

// Config describes the transport built from a Call.
func (DeadlineHTTP) Config() string {
	return "deadlinehttp.NewTransport(base, WithPolicy(the Policy above), WithDefaultBudget(Budget)); the deadline from the request's context"
}

// Send sends the request through a deadlinehttp.Transport.
func (DeadlineHTTP) Send(ctx context.Context, c Call, base http.RoundTripper, method, url string, body []byte) (int, error) {
	if err := c.Validate(); err != nil {
		return 0, err
	}
	tr := deadlinehttp.NewTransport(base, deadlinehttp.WithPolicy(Deadline{}.Policy(c)), deadlinehttp.WithDefaultBudget(c.Budget))
	req, err := http.NewRequestWithContext(ctx, method, url, bodyOf(body))
	if err != nil {
		return 0, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	return drain(resp), err
}

// DeadlineBudget is [Deadline] with one shared deadline.RetryBudget (the
// library's defaults: retries ≤ 20% of first attempts in a 10s window plus
// 10 retries/s), as a service would hold one per downstream: every call of
// every client draws on it. The budget is made on the first call, so that
// it reads the clock of the run (a synctest bubble) that uses it; use a new
// DeadlineBudget per run.
type DeadlineBudget struct {
	once   sync.Once
	budget *deadline.RetryBudget
	err    error
}

// Name returns the project's name with its retry budget.
func (*DeadlineBudget) Name() string { return Deadline{}.Name() + " + retry budget" }

// Config describes the composition.
func (*DeadlineBudget) Config() string {
	return Deadline{}.Config() + "; Policy.RetryBudget = deadline.NewRetryBudget() (20% of first attempts in 10s + 10 retries/s), one budget shared by every call"
}

// Do runs op under deadline.Do with the shared budget.
func (b *DeadlineBudget) Do(ctx context.Context, c Call, op Op) error {
	b.once.Do(func() { b.budget, b.err = deadline.NewRetryBudget() })
	if b.err != nil {
		return b.err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	d, ok := deadline.FromContext(ctx)
	if !ok || d.Remaining() > c.Budget {
		d = deadline.New(c.Budget)
	}
	p := Deadline{}.Policy(c)
	p.RetryBudget = b.budget
	_, err := deadline.Do(ctx, d, p, func(ctx context.Context, _ deadline.AttemptInfo) (struct{}, error) {
		return struct{}{}, markDeadline(op(ctx))
	})
	return err
}

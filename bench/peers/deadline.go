package peers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

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
	d := callDeadline(ctx, c)
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
	d := callDeadline(ctx, c)
	p := Deadline{}.Policy(c)
	p.RetryBudget = b.budget
	_, err := deadline.Do(ctx, d, p, func(ctx context.Context, _ deadline.AttemptInfo) (struct{}, error) {
		return struct{}{}, markDeadline(op(ctx))
	})
	return err
}

// DeadlineOverload is [DeadlineBudget] as a user of this project's HTTP
// transport has it, with the server's overload signal honoured: one
// deadlinehttp.Transport per downstream, its retry budget shared by every
// call, and every 429 or 503 without Retry-After charging that budget n
// more tokens, so that every caller backs off at once:
//
//	b, _ := deadline.NewRetryBudget() // 20% of first attempts in 10s + 10 retries/s
//	tr := deadlinehttp.NewTransport(base, deadlinehttp.WithPolicy(policy),
//		deadlinehttp.WithDefaultBudget(c.Budget),
//		deadlinehttp.WithRetryBudget(b), deadlinehttp.WithOverloadCharge(n))
//
// The base RoundTripper is in memory: it runs the call's [Op] with the
// attempt's context and answers a [Failure] with its status (and its
// Retry-After, in seconds), a success with 200, and any other error as a
// transport error; so it runs in a testing/synctest bubble, where a socket
// would not let the clock advance. The budget and the transport are made on
// the first call, so that the budget reads the clock of the run that uses
// it; build one DeadlineOverload per run with [NewDeadlineOverload].
type DeadlineOverload struct {
	c      Call
	charge int

	once sync.Once
	tr   *deadlinehttp.Transport
	err  error
}

// NewDeadlineOverload returns the adapter for calls c, charging n tokens
// per overload answer; n = 0 charges nothing (the shared budget alone, over
// HTTP). An invalid c or n < 0 is an error.
func NewDeadlineOverload(c Call, n int) (*DeadlineOverload, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fmt.Errorf("peers: overload charge is %d, want >= 0 tokens per overload answer", n)
	}
	return &DeadlineOverload{c: c, charge: n}, nil
}

// OverloadName is the start of every [DeadlineOverload]'s name; the tables
// find this project's overload-charge row by it.
const OverloadName = "deadline (this) + retry budget + overload charge"

// Name returns the project's name with its retry budget and the charge.
func (o *DeadlineOverload) Name() string { return fmt.Sprintf("%s %d", OverloadName, o.charge) }

// Charge returns the tokens charged per overload answer.
func (o *DeadlineOverload) Charge() int { return o.charge }

// Config describes the composition.
func (o *DeadlineOverload) Config() string {
	return fmt.Sprintf("deadlinehttp.NewTransport(in-memory base, WithPolicy(the Policy of deadline (this)), WithDefaultBudget(Budget), "+
		"WithRetryBudget(deadline.NewRetryBudget()), WithOverloadCharge(%d)): one transport and one budget (20%% of first attempts in 10s + 10 retries/s) "+
		"shared by every call; a 503 or 429 without Retry-After charges the budget %d tokens", o.charge, o.charge)
}

// opKey carries a call's Op to the in-memory base RoundTripper.
type opKey struct{}

// opTransport is an http.RoundTripper that runs the Op its request's
// context carries.
type opTransport struct{}

// RoundTrip runs the request's Op: nil is a 200, a [Failure] with a status
// is that status (with its Retry-After and its Header), any other error is
// returned as a transport error.
func (opTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_ = r.Body.Close()
	}
	op, ok := r.Context().Value(opKey{}).(Op)
	if !ok {
		return nil, errors.New("peers: the request's context carries no Op")
	}
	status, h := http.StatusOK, http.Header{}
	if err := op(r.Context()); err != nil {
		f, ok := errors.AsType[*Failure](err)
		if !ok || f.Status == 0 {
			return nil, err
		}
		status = f.Status
		for k, v := range f.Header {
			h[k] = v
		}
		if f.RetryAfter > 0 {
			h.Set("Retry-After", strconv.Itoa(int((f.RetryAfter+time.Second-1)/time.Second)))
		}
	}
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: http.NoBody, ContentLength: 0, Request: r}, nil
}

// Do sends one GET through the shared transport, whose base runs op. c
// must be the Call the adapter was built for. A final status other than 200
// is returned as a [Failure].
func (o *DeadlineOverload) Do(ctx context.Context, c Call, op Op) error {
	if c != o.c {
		return fmt.Errorf("peers: DeadlineOverload built for %+v, called with %+v", o.c, c)
	}
	o.once.Do(func() {
		var b *deadline.RetryBudget
		if b, o.err = deadline.NewRetryBudget(); o.err != nil {
			return
		}
		o.tr = deadlinehttp.NewTransport(opTransport{}, deadlinehttp.WithPolicy(Deadline{}.Policy(c)),
			deadlinehttp.WithDefaultBudget(c.Budget), deadlinehttp.WithRetryBudget(b), deadlinehttp.WithOverloadCharge(o.charge))
	})
	if o.err != nil {
		return o.err
	}
	req, err := http.NewRequestWithContext(context.WithValue(ctx, opKey{}, op), http.MethodGet, "http://downstream.invalid/", nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: o.tr}).Do(req)
	if err != nil {
		return err
	}
	if status := drain(resp); status != http.StatusOK {
		return &Failure{Status: status}
	}
	return nil
}

// callDeadline is the deadline a call runs under: the caller's, when ctx
// carries one that ends no later than c.Budget from now, else a new one of
// c.Budget.
func callDeadline(ctx context.Context, c Call) deadline.Deadline {
	if d, ok := deadline.FromContext(ctx); ok && d.Remaining() <= c.Budget {
		return d
	}
	return deadline.New(c.Budget)
}

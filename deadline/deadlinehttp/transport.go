package deadlinehttp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// Transport is an [http.RoundTripper] that runs every request under
// [deadline.Do]: one shared deadline, a lease per attempt, refusal below the
// floor, budget-checked backoff, Retry-After, and retries only for requests
// that are safe to repeat. Create one with [NewTransport]; it is safe for
// concurrent use, and its configuration is fixed once created.
//
// # The deadline
//
// A request runs under the [deadline.Deadline] found in its context by
// [deadline.FromContext] (one stored by [deadline.NewContext], or the
// context's own deadline, whichever ends first), so every call made while
// handling one request or one agent run spends the same budget. A context
// with neither gets a new Deadline of [DefaultBudget] ([WithDefaultBudget]).
//
// # The policy
//
// Each request chooses the [deadline.Policy] it runs under (its name,
// attempts, ceiling, floor, backoff, classifier), so that one Transport,
// and one http.Client, can serve a whole service. The first that applies
// wins:
//
//  1. the policy its context carries ([WithRequestPolicy]);
//  2. the policy [WithPolicyFunc]'s function returns for it;
//  3. the Transport's policy ([WithPolicy], default
//     [deadline.DefaultPolicy]).
//
// Whichever is chosen, an empty Name becomes "HTTP <method>", and the
// classifier never retries what is not safe to repeat (below). An invalid
// policy makes RoundTrip return its [*deadline.PolicyError] without
// sending anything. The hooks that observe the call are, in order: those
// of the request's context ([deadline.WithHooks]), those of the chosen
// policy (the hooks of WithPolicy's policy observe only the calls that run
// under it), then [WithHooks]', which observe every call.
//
// # Each attempt
//
// Attempt n is a clone of the request in the attempt's context, with the
// budget header ([DefaultHeader], [WithHeader]) set to the attempt's granted
// lease ([FormatBudget]), and the body from the request for the first
// attempt and from GetBody for the others. It is sent with the base
// transport in that context, so an instrumented base (otelhttp) makes one
// CLIENT span per physical attempt, a child of the attempt's context.
//
// The attempt's lease also bounds reading the response body: the body
// returned to the caller stays under the attempt's deadline and the
// caller's cancellation, and its resources are freed when it is read to EOF
// or closed. As with any RoundTripper, the caller must close it.
//
// It bounds reading the request body too, when that body is a stream (no
// GetBody: a pipe, a file, or the body of an inbound request a proxy
// forwards), whose producer can stall: a read blocked on it ends when the
// lease does, with an error wrapping the lease's cause, and the stream is
// closed, so that RoundTrip returns on time rather than when the producer
// resumes. (net/http's server request body cannot be interrupted that way:
// the transport still returns on time, and the read it leaves pending ends
// when the inbound connection does.) A body with GetBody, as
// http.NewRequest makes from a bytes.Reader, bytes.Buffer or
// strings.Reader, is in memory and sent as it is.
//
// # What is retried
//
// A request is retried only if it is idempotent ([IsIdempotent]: GET, HEAD,
// OPTIONS, TRACE, PUT, DELETE, or an Idempotency-Key) and its body can be
// replayed (no body, or GetBody set). Every other request, such as a POST
// without an Idempotency-Key, is sent once, unless the server answers
// that it did not act on it ([ShouldRetryHeader] "true"): a request whose
// body can be replayed may then be retried, whatever its method. A server
// that answers "false" is never asked again, whatever the request.
//
// An attempt fails on a response with a retryable status
// ([WithRetryStatuses]; default 408, 429, 500, 502, 503, 504, 529), except
// a 504 that carries [RefusedHeader]: the attempt's error is a
// [*StatusError]. For a request that may be retried, an attempt fails
// retryably on:
//
//   - such a response, unless it carries [ShouldRetryHeader] "false". On
//     an overload answer (429, 503, [StatusOverloaded]) the delay the
//     server asks for replaces the backoff ([deadline.RetryAfter]) and is
//     never shortened; when it exceeds what is left above the floor the
//     call stops at once with [deadline.ReasonRetryAfterTooLong]. The delay
//     is the first valid one of [RetryAfterMsHeader],
//     [AzureRetryAfterMsHeader] ([ParseRetryAfterMs]) and Retry-After
//     ([ParseRetryAfter]). A malformed or negative value, or a millisecond
//     header sent more than once, is ignored (the next header, else the
//     backoff, applies); a well-formed one too large for the parser
//     ([MaxRetryAfter]) is kept, so it stops the call rather than letting
//     the backoff retry sooner than the server asked.
//   - a transport error that says the request can be repeated: connection
//     refused, reset or aborted (with each operating system's codes), a
//     broken pipe, or EOF before a response.
//   - an attempt ended by its own ceiling ([deadline.Policy.AttemptTimeout]),
//     which the engine marks retryable.
//
// The policy's classifier ([deadline.Policy.Retryable]) then decides as
// usual. A response with any other status is a success, returned as it is.
//
// # Hedging
//
// With a policy that hedges ([deadline.Policy.Hedge]), a request that may
// be retried (above) is also hedged: when an attempt has had no answer for
// the hedge delay, the same request is sent again beside it, with a body
// from GetBody, under the engine's rules (its own lease, none below the
// floor, counted against MaxAttempts and the retry budget). The first
// success is returned; the other requests are canceled, and a response one
// of them got anyway is closed. Of retryable answers only the latest stays
// open, to be returned if no retry follows; the others are drained and
// closed. A request that may not be retried (a POST without an
// Idempotency-Key, a body that cannot be replayed) is simply not hedged: it
// is sent once, as without hedging.
//
// With a retry budget ([WithRetryBudget], or the policy's own
// [deadline.Policy.RetryBudget]), every request's first attempt counts as a
// deposit and each retry asks the budget, before its wait, for a token: a
// denied retry is not sent and the call stops with
// [deadline.ReasonRetryBudget]. With [WithOverloadCharge], a 429, 503 or
// 529 without a valid delay header also charges the budget, so that every
// caller sharing it backs off at once.
//
// # What RoundTrip returns
//
// As the [http.RoundTripper] contract requires, RoundTrip returns a
// response with a nil error whenever the call ended on one, whatever its
// status. When the call stopped on a retryable answer (attempts exhausted,
// a backoff or Retry-After that does not fit, a retry the retry budget
// denied, not retryable, for example a POST without an Idempotency-Key or
// an answer with [ShouldRetryHeader] "false", or the deadline or the floor
// reached after it), that last answer is the response, whole and unread, its body
// still under its attempt's lease; [StopOf] returns the
// [*deadline.StopError] that says why no retry followed (the hooks' CallEnd
// reports the same reason). Check resp.StatusCode as with any client, then
// StopOf when the reason matters.
//
// RoundTrip returns a nil response and an error only when no answer
// remains to return: the call was invalid or refused before any attempt,
// the last attempt failed without a response (a transport error, the
// deadline before the headers), or the caller canceled. The error is then
// the [*deadline.StopError] (inside the *url.Error an http.Client adds), or
// a [*deadline.PolicyError] for an invalid call: errors.As finds the
// StopError, with its typed [deadline.Reason], its attempts and the last
// attempt's error.
//
// # Discarded answers
//
// A retryable answer is kept unread until the engine has decided to retry:
// when the wait it chose fits in the budget and leaves the next attempt
// more than the floor, the answer is drained (at most [MaxDrain] bytes) and
// closed before the wait, so its connection can be reused and none leaks,
// and the [*StatusError] the hooks saw keeps what was drained. At most one
// answer is open at a time. In the rare case where the retry then does not
// start (the caller cancels during the wait), RoundTrip returns the
// StopError, whose last error is that drained StatusError.
//
// # Panics
//
// A panic in a hook, in the base transport, in GetBody or in the policy
// function goes on unchanged, after the Transport has freed what it held:
// the lease of the attempt in progress is released, a response it obtained
// (a 200 whose AttemptEnd hook panicked, or an answer kept for a possible
// retry) is closed with its connection, and the request's body is closed.
type Transport struct {
	base http.RoundTripper
	cfg  config
}

// NewTransport returns a Transport that sends attempts with base (nil:
// [http.DefaultTransport], looked up on each request). Invalid options do
// not panic: every RoundTrip then returns a [*deadline.PolicyError] that
// names the option, without sending anything.
func NewTransport(base http.RoundTripper, opts ...Option) *Transport {
	return &Transport{base: base, cfg: newConfig(opts)}
}

// RoundTrip sends req under its deadline and the policy it runs under
// (its context's, the policy function's, or the Transport's), retrying
// what is safe to retry; see [Transport]. It does not modify req, and it
// closes req's body, also on an error or a panic.
//
// It returns a response with a nil error whenever it obtained one, as the
// [http.RoundTripper] contract requires: also when it stopped retrying on a
// retryable status, in which case [StopOf] tells why. It returns a nil
// response and an error only when no response remains: the call was refused
// or invalid, the last attempt failed without an answer, or the caller
// canceled.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.cfg.err != nil {
		closeBody(req)
		return nil, t.cfg.err
	}
	c := &call{Context: req.Context(), t: t, req: req}
	returned := false
	defer func() {
		if !returned { // a panic (in a hook, the base, the policy function) goes on
			c.abandon()
		}
	}()
	d, ok := deadline.FromContext(c.Context)
	if !ok {
		d = deadline.New(t.cfg.defaultBudget)
	}
	p := t.policyFor(req)
	if p.Name == "" {
		method := req.Method
		if method == "" {
			method = http.MethodGet
		}
		p.Name = "HTTP " + method
	}
	hedging := false
	switch {
	case !replayable(req):
		// Sent once: neither retried nor hedged.
		p.Retryable, p.Hedge = never, nil
	case !IsIdempotent(req):
		// Retried only when an answer says it was not acted on
		// (x-should-retry: true); never hedged.
		p.Retryable, p.Hedge = classifier(p.Retryable, false), nil
	default:
		p.Retryable = classifier(p.Retryable, true)
		if p.Hedge != nil && p.Hedge.MaxHedges > 0 {
			h := *p.Hedge // the caller's stays as it is
			h.Discard = discardResponse
			p.Hedge, hedging = &h, true
		}
	}
	if p.Answered == nil {
		p.Answered = answeredWithoutWork
	}
	c.floor, c.budget, c.throttle = p.Floor, p.RetryBudget, p.Throttle

	// Two calls, so that the unhedged one's op does not escape: only
	// DoHedged runs attempts on goroutines of their own.
	var resp *http.Response
	var err error
	if hedging {
		resp, err = deadline.DoHedged(c, d, p, c.hedgeAttempt)
	} else {
		resp, err = deadline.Do(c, d, p, c.attempt)
	}
	returned = true
	if !c.sent {
		closeBody(req)
	}
	if err == nil {
		if c.open != resp {
			// A hedge that lost kept a retryable answer open.
			c.discard(MaxDrainTime)
		}
		c.open = nil
		return resp, nil
	}
	if c.open == nil {
		return nil, err
	}
	// The call stopped on the last attempt's answer, still unread: it is
	// the response, and the stop says why no retry followed.
	resp, c.open = c.open, nil
	if stop, ok := err.(*deadline.StopError); ok {
		if l := leaseOf(resp); l != nil {
			l.stop = stop
		}
	}
	return resp, nil
}

// answeredWithoutWork is the transport's [deadline.Policy.Answered]: a 4xx
// answer but 408 and 429 (a timeout, an overload) is the server's refusal
// of the request itself (authentication, routing, validation), answered
// before the work: its latency says nothing of the route's service time,
// and learned it would make the Limiter take the downstream for fast.
func answeredWithoutWork(v any) bool {
	resp, _ := v.(*http.Response)
	if resp == nil {
		return false
	}
	c := resp.StatusCode
	return c >= 400 && c < 500 && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests
}

// never is the classifier of a request that is not safe to repeat.
func never(error) bool { return false }

// call is one RoundTrip in progress. It is also the context the call runs
// in: the request's own, in which the transport's Backoff hook finds the
// call (see backoffHook), at no extra allocation.
type call struct {
	context.Context // the request's context
	t               *Transport
	req             *http.Request
	floor           time.Duration         // the policy's
	budget          *deadline.RetryBudget // the policy's; nil: none
	throttle        *overload.Throttle    // the policy's; nil: none
	sent            bool                  // an attempt took the request's body

	// open is the latest attempt's response while the transport still owns
	// it, and status its StatusError when it is a retryable answer. A
	// retryable answer stays unread until the engine has decided on a
	// retry: it is then drained (discard), or else returned. At most one
	// response is open.
	open   *http.Response
	status *StatusError

	// mu guards sent, open and status while hedged attempts
	// (hedgeAttempt) run at once; the engine's hooks and RoundTrip run
	// when none does.
	mu sync.Mutex
}

type callKey struct{}

// Value returns the call for callKey, and the request context's values.
func (c *call) Value(key any) any {
	if key == (callKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// backoffHook runs after every other Backoff hook, when the engine has
// chosen the wait before a retry. If the retry will follow (the wait fits,
// the retry budget allowed it and the wait leaves the next attempt more
// than the floor), the retryable answer
// still open is drained and closed now, while its lease still holds its
// connection, rather than after the wait; otherwise it stays open, to be
// returned.
func backoffHook(ctx context.Context, b deadline.BackoffInfo) {
	c, ok := ctx.Value(callKey{}).(*call)
	if !ok || c.open == nil {
		return
	}
	if next := b.Remaining - b.Delay - c.floor; b.Fits && !b.RetryDenied && next > 0 {
		// Half of what the next attempt would get at most, so that the
		// drain cannot turn the retry just decided into a refusal.
		c.discard(min(MaxDrainTime, next/2))
	}
}

// discard drains the open response, if any, for at most limit and never
// past its lease, then closes it. It keeps the drained bytes in its
// StatusError.
func (c *call) discard(limit time.Duration) {
	resp, se := c.open, c.status
	switch {
	case resp == nil:
	case se != nil:
		end := time.Now().Add(limit)
		if l := leaseOf(resp); l != nil {
			if le, ok := l.Deadline(); ok && le.Before(end) {
				end = le
			}
		}
		se.Truncated, resp.Body = drain(resp.Body, end)
	default:
		resp.Body.Close()
	}
	c.open, c.status = nil, nil // after: should draining panic, abandon closes it
}

// abandon frees what a panicking call holds before the panic goes on: the
// open response (which releases its lease and connection), and the
// request's body if no attempt took it.
func (c *call) abandon() {
	if c.open != nil {
		c.open.Body.Close()
		c.open, c.status = nil, nil
	}
	if !c.sent {
		closeBody(c.req)
	}
}

// attempt sends one physical attempt of the request in a lease detached
// from actx (see lease), and turns a retryable answer into an error that
// keeps the answer open.
func (c *call) attempt(actx context.Context, a deadline.AttemptInfo) (*http.Response, error) {
	c.discard(MaxDrainTime) // only if no Backoff hook could: never two open responses
	c.sent = true
	resp, se, err := c.send(actx, a, false)
	if resp != nil {
		c.open, c.status = resp, se
	}
	return resp, err
}

// hedgeAttempt is attempt for a hedged call, whose attempts run at once:
// it keeps only a retryable answer open, the latest, and drains and closes
// the one it replaces; a success is the engine's to return or, when
// another attempt won, to discard (discardResponse).
func (c *call) hedgeAttempt(actx context.Context, a deadline.AttemptInfo) (*http.Response, error) {
	c.mu.Lock()
	c.sent = true
	c.mu.Unlock()
	resp, se, err := c.send(actx, a, true)
	if se != nil {
		c.mu.Lock()
		old := &call{open: c.open, status: c.status}
		c.open, c.status = resp, se
		c.mu.Unlock()
		old.discard(MaxDrainTime)
		return nil, err
	}
	return resp, err
}

// discardResponse releases the response of a hedged attempt that
// succeeded after another had won ([deadline.Hedge.Discard]).
func discardResponse(v any) {
	if resp, ok := v.(*http.Response); ok && resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
}

// send sends attempt a and returns its response: with a nil error on a
// success, with its StatusError when it is a retryable answer (the error
// then wraps it, and the response is open), or nil and the error. A hedged
// attempt's lease also ends when the attempt loses ([deadline.ErrHedgeLost]):
// the request is canceled, and so is the reading of an answer it got.
func (c *call) send(actx context.Context, a deadline.AttemptInfo, hedged bool) (*http.Response, *StatusError, error) {
	req := c.req
	cause := deadline.ErrDeadlineReached
	if a.LimitedBy == deadline.LimitCeiling {
		cause = deadline.ErrCeilingReached
	}
	l := newLease(c.Context, actx, cause)
	if hedged {
		// Runs once, when the engine ends actx: at the latest as the
		// attempt ends.
		context.AfterFunc(actx, func() {
			if context.Cause(actx) == deadline.ErrHedgeLost {
				l.cancelCause(deadline.ErrHedgeLost)
			}
		})
	}
	r := req.Clone(l)
	if a.Number > 1 && req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil { // the classifier never retries such a request
			l.release()
			return nil, nil, fmt.Errorf("deadlinehttp: attempt %d of %s %s: the body cannot be replayed (no GetBody)", a.Number, req.Method, req.URL.Redacted())
		}
		body, err := getBody(req, l)
		if err != nil {
			l.release()
			return nil, nil, fmt.Errorf("deadlinehttp: attempt %d: GetBody: %w", a.Number, err)
		}
		r.Body = body
	} else if req.GetBody == nil && req.Body != nil && req.Body != http.NoBody {
		r.Body = newStreamBody(req.Body, l)
	}
	if h := c.t.cfg.header; h != "" {
		if r.Header == nil {
			r.Header = make(http.Header)
		}
		r.Header.Set(h, FormatBudget(a.Granted))
	}
	resp, err := roundTrip(c.t.baseTransport(), r, l)
	if err == nil && resp == nil {
		err = fmt.Errorf("deadlinehttp: the base RoundTripper (%T) returned a nil response and a nil error", c.t.baseTransport())
	}
	if err != nil {
		settle(actx, l)
		l.release()
		if repeatable(err) {
			err = deadline.Retryable(err)
		}
		return nil, nil, err
	}
	if resp.Request == nil {
		resp.Request = r
	}
	retry := c.t.cfg.retryStatus[resp.StatusCode] && !(resp.StatusCode == http.StatusGatewayTimeout && resp.Header.Get(RefusedHeader) != "")
	if retry {
		settle(actx, l)
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		l.release()
	} else {
		resp.Body = wrapBody(resp.Body, l)
	}
	if !retry {
		return resp, nil, nil
	}
	se := &StatusError{Response: resp, Attempt: a.Number, advice: shouldRetry(resp.Header)}
	var serr error = se
	if overloadAnswer(resp.StatusCode) {
		wait, asked := serverDelay(resp.Header, time.Now())
		if asked {
			serr = deadline.RetryAfter(serr, wait)
		}
		shed := resp.StatusCode == http.StatusServiceUnavailable && shedAnswer(resp.Header)
		if n := c.t.cfg.overload; n > 0 && !asked && !shed {
			if c.budget != nil {
				c.budget.Charge(n) // an overload signal: every caller backs off
			}
			if c.throttle != nil {
				c.throttle.Charge(n)
			}
		}
		if shed {
			serr = deadline.Shed(serr) // the server's admission at work: not throttled
		} else {
			serr = deadline.Overloaded(serr) // for the limiter and throttling
		}
	}
	if se.advice == adviceNoRetry {
		return resp, se, serr // the server said a retry cannot succeed
	}
	return resp, se, deadline.Retryable(serr)
}

// roundTrip is base.RoundTrip(r) that, should base panic, releases the lease and
// closes r's body before the panic goes on.
func roundTrip(base http.RoundTripper, r *http.Request, l *lease) (*http.Response, error) {
	panicked := true
	defer func() {
		if panicked {
			l.release()
			closeBody(r)
		}
	}()
	resp, err := base.RoundTrip(r)
	panicked = false
	return resp, err
}

// getBody is req.GetBody() that, should it panic, releases the lease
// before the panic goes on.
func getBody(req *http.Request, l *lease) (io.ReadCloser, error) {
	panicked := true
	defer func() {
		if panicked {
			l.release()
		}
	}()
	body, err := req.GetBody()
	panicked = false
	return body, err
}

// settle waits, when the lease l has ended, for the attempt context actx to
// end too before the attempt fails. The lease's deadline is actx's, and the
// caller's cancellation reaches both: they end at the same instant, but
// their timers may fire in either order. Waiting lets deadline.Do tell an
// attempt timeout, the shared deadline and a cancellation apart.
func settle(actx context.Context, l *lease) {
	if _, bounded := actx.Deadline(); bounded && l.Err() != nil {
		<-actx.Done()
	}
}

func (t *Transport) baseTransport() http.RoundTripper {
	if t.base == nil {
		return http.DefaultTransport
	}
	return t.base
}

// drain reads at most MaxDrain bytes of body until end, closes it, and
// returns a body that reads what was drained, and whether that was not the
// whole body (too long, still arriving at end, or a read error). At end the
// body is closed under the read, which makes it return (net/http allows
// Close concurrent with Read); the timer's goroutine has ended when drain
// returns.
func drain(body io.ReadCloser, end time.Time) (truncated bool, kept io.ReadCloser) {
	if body == nil || body == http.NoBody {
		return false, http.NoBody
	}
	var once sync.Once
	closeBody := func() { once.Do(func() { body.Close() }) }
	fired := make(chan struct{})
	timer := time.AfterFunc(time.Until(end), func() {
		defer close(fired)
		closeBody()
	})
	b, err := io.ReadAll(io.LimitReader(body, MaxDrain+1))
	if !timer.Stop() {
		<-fired
	}
	closeBody()
	truncated = err != nil
	if len(b) > MaxDrain {
		b, truncated = b[:MaxDrain], true
	}
	return truncated, io.NopCloser(bytes.NewReader(b))
}

// StopOf returns the [*deadline.StopError] that says why the Transport
// stopped retrying and returned resp instead: its Reason (attempts
// exhausted, a backoff or Retry-After that did not fit, not retryable, a
// refusal below the floor, ...), its attempts, and its Last error, a
// [*StatusError] whose Response is resp. It reports false for a response
// that needed no retry (a success, or a status outside
// [WithRetryStatuses]), for a nil resp, and for a response that did not
// come from a Transport.
//
// The stop travels with resp's body and its Request's context, neither of
// which it alters: it is found through an http.Client, also one with a
// Timeout, and after the body is closed.
func StopOf(resp *http.Response) (*deadline.StopError, bool) {
	if resp == nil {
		return nil, false
	}
	if l := leaseOf(resp); l != nil && l.stop != nil {
		return l.stop, true
	}
	return nil, false
}

// CloseIdleConnections closes the idle connections of the base transport,
// if it has such a method; http.Client.CloseIdleConnections calls it.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.baseTransport().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

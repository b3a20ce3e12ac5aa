package deadlinehttp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/deadlinebudget/budget/deadline"
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
// # What is retried
//
// A request is retried only if it is idempotent ([IsIdempotent]: GET, HEAD,
// OPTIONS, TRACE, PUT, DELETE, or an Idempotency-Key) and its body can be
// replayed (no body, or GetBody set). Every other request, such as a POST
// without an Idempotency-Key, is sent once whatever happens.
//
// For a request that may be retried, an attempt fails retryably on:
//
//   - a response with a retryable status ([WithRetryStatuses]; default 408,
//     429, 500, 502, 503, 504), except a 504 that carries [RefusedHeader]:
//     the error is a [*StatusError]. On 429 and 503 a valid Retry-After
//     replaces the backoff ([deadline.RetryAfter]) and is never shortened;
//     when it exceeds what is left above the floor the call stops at once
//     with [deadline.ReasonRetryAfterTooLong]. A malformed or negative
//     Retry-After is ignored; a well-formed one too large for the parser
//     ([MaxRetryAfter]) is kept, so it stops the call rather than letting the
//     backoff retry sooner than the server asked.
//   - a transport error that says the request can be repeated: connection
//     refused, reset or aborted, a broken pipe, or EOF before a response.
//   - an attempt ended by its own ceiling ([deadline.Policy.AttemptTimeout]),
//     which the engine marks retryable.
//
// The policy's classifier ([deadline.Policy.Retryable]) then decides as
// usual. A response that is not retried (any other status, or any status on
// a request that is not retried) is returned to the caller with a nil error.
//
// # When retries run out
//
// Every response that is not returned to the caller is drained (at most
// [MaxDrain] bytes) and closed, so its connection can be reused and none
// leaks. When the call stops without a response RoundTrip returns a nil
// response and the [*deadline.StopError] (inside the *url.Error an
// http.Client adds): errors.As finds the StopError, with its typed
// [deadline.Reason] and attempts, and the last attempt's error: a
// [*StatusError] whose Response keeps the status, header and the drained
// body of the last answer, or the transport error.
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

// RoundTrip sends req under the request's deadline and the transport's
// policy, retrying what is safe to retry; see [Transport]. It does not
// modify req, and it closes req's body, also on an error.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.cfg.err != nil {
		closeBody(req)
		return nil, t.cfg.err
	}
	ctx := req.Context()
	d, ok := deadline.FromContext(ctx)
	if !ok {
		d = deadline.New(t.cfg.defaultBudget)
	}
	p := t.cfg.policy
	if p.Name == "" {
		method := req.Method
		if method == "" {
			method = http.MethodGet
		}
		p.Name = "HTTP " + method
	}
	safe := retrySafe(req)
	classify := p.Retryable
	if classify == nil {
		classify = deadline.IsRetryable
	}
	p.Retryable = func(err error) bool { return safe && classify(err) }

	sent := false
	resp, err := deadline.Do(ctx, d, p, func(actx context.Context, a deadline.AttemptInfo) (*http.Response, error) {
		sent = true
		return t.attempt(ctx, actx, req, a, p.Retryable)
	})
	if !sent {
		closeBody(req)
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// attempt sends one physical attempt of req in a lease detached from actx
// (see lease), and turns a retryable answer into an error.
func (t *Transport) attempt(caller, actx context.Context, req *http.Request, a deadline.AttemptInfo, retryable func(error) bool) (*http.Response, error) {
	cause := deadline.ErrDeadlineReached
	if a.LimitedBy == deadline.LimitCeiling {
		cause = deadline.ErrCeilingReached
	}
	l := newLease(caller, actx, cause)
	r := req.Clone(l.ctx)
	if a.Number > 1 && req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil { // the classifier never retries such a request
			l.release()
			return nil, fmt.Errorf("deadlinehttp: attempt %d of %s %s: the body cannot be replayed (no GetBody)", a.Number, req.Method, req.URL.Redacted())
		}
		body, err := req.GetBody()
		if err != nil {
			l.release()
			return nil, fmt.Errorf("deadlinehttp: attempt %d: GetBody: %w", a.Number, err)
		}
		r.Body = body
	}
	if t.cfg.header != "" {
		if r.Header == nil {
			r.Header = make(http.Header)
		}
		r.Header.Set(t.cfg.header, FormatBudget(a.Granted))
	}
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(r)
	if err != nil {
		if _, bounded := actx.Deadline(); bounded && l.ctx.Err() != nil {
			// The lease ended the attempt. Its deadline is the attempt
			// context's, and the caller's cancellation reaches both: wait
			// for actx to see it too (it is done at the same instant), so
			// that deadline.Do tells an attempt timeout, the shared deadline
			// and a cancellation apart.
			<-actx.Done()
		}
		l.release()
		if repeatable(err) {
			err = deadline.Retryable(err)
		}
		return nil, err
	}
	if t.cfg.retryStatus[resp.StatusCode] && !(resp.StatusCode == http.StatusGatewayTimeout && resp.Header.Get(RefusedHeader) != "") {
		se := &StatusError{Response: resp, Attempt: a.Number}
		var serr error = se
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			if v := resp.Header.Get("Retry-After"); v != "" {
				if wait, ok := parseRetryAfter(v, time.Now()); ok {
					serr = deadline.RetryAfter(serr, wait)
				}
			}
		}
		serr = deadline.Retryable(serr)
		if retryable(serr) {
			se.Truncated, resp.Body = drain(resp.Body)
			l.release()
			return nil, serr
		}
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		l.release()
	} else {
		resp.Body = wrapBody(resp.Body, l.release)
	}
	return resp, nil
}

// drain reads at most MaxDrain bytes of body, closes it, and returns a body
// that reads what was drained.
func drain(body io.ReadCloser) (truncated bool, kept io.ReadCloser) {
	if body == nil {
		return false, http.NoBody
	}
	b, _ := io.ReadAll(io.LimitReader(body, MaxDrain+1))
	body.Close()
	if len(b) > MaxDrain {
		b, truncated = b[:MaxDrain], true
	}
	return truncated, io.NopCloser(bytes.NewReader(b))
}

// CloseIdleConnections closes the idle connections of the base transport,
// if it has such a method; http.Client.CloseIdleConnections calls it.
func (t *Transport) CloseIdleConnections() {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	if c, ok := base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

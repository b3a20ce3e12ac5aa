package deadlinehttp_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// recovered runs f and returns what it panicked with (nil if it did not).
func recovered(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// leaseSpy sends through base and keeps the context of each request it
// sends: the attempt's lease.
type leaseSpy struct {
	base  http.RoundTripper
	ctxs  []context.Context
	panic bool
}

func (s *leaseSpy) RoundTrip(r *http.Request) (*http.Response, error) {
	s.ctxs = append(s.ctxs, r.Context())
	if s.panic {
		panic("base boom")
	}
	return s.base.RoundTrip(r)
}

// released reports whether every lease the spy saw has ended.
func (s *leaseSpy) released() bool {
	for _, ctx := range s.ctxs {
		if ctx.Err() == nil {
			return false
		}
	}
	return len(s.ctxs) > 0
}

// TestPanicInHookAfterResponse: an AttemptEnd or CallEnd hook that panics
// after a 200 no longer loses the response: it is closed, its lease
// released, and its connection with its two net/http goroutines goes
// before the panic does on, not when the lease would have ended.
func TestPanicInHookAfterResponse(t *testing.T) {
	for _, which := range []string{"AttemptEnd", "CallEnd"} {
		t.Run(which, func(t *testing.T) {
			s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, strings.Repeat("ok", 1<<10))
			})
			hooks := &deadline.Hooks{}
			if which == "AttemptEnd" {
				hooks.AttemptEnd = func(context.Context, deadline.AttemptInfo, deadline.AttemptResult) { panic("hook boom") }
			} else {
				hooks.CallEnd = func(context.Context, deadline.CallResult) { panic("hook boom") }
			}
			spy := &leaseSpy{base: s.Client().Transport}
			tr := deadlinehttp.NewTransport(spy, deadlinehttp.WithHooks(hooks))
			req, err := http.NewRequestWithContext(budgetCtx(time.Minute), http.MethodGet, s.URL, nil)
			require.NoError(t, err)

			v := recovered(func() { tr.RoundTrip(req) })
			assert.Equal(t, "hook boom", v, "the panic goes on unchanged")
			assert.True(t, spy.released(), "the lease is released")
			tr.CloseIdleConnections()
			s.Close()
			goleak.VerifyNone(t)
		})
	}
}

// TestPanicInBase: a base RoundTripper that panics releases the attempt's
// lease and closes the attempt's body before the panic goes on.
func TestPanicInBase(t *testing.T) {
	spy := &leaseSpy{panic: true}
	tr := deadlinehttp.NewTransport(spy)
	body := &closeRecorder{Reader: strings.NewReader("payload")}
	req, err := http.NewRequestWithContext(budgetCtx(time.Minute), http.MethodPut, "http://svc.test/x", body)
	require.NoError(t, err)
	v := recovered(func() { tr.RoundTrip(req) })
	assert.Equal(t, "base boom", v)
	assert.True(t, spy.released(), "the lease is released")
	assert.True(t, body.closed, "the body is closed")
	goleak.VerifyNone(t)
}

// TestPanicBeforeSending: a panic before any attempt took the request (in
// the policy function, or in an AttemptStart hook) closes the request's
// body before it goes on.
//
// An AttemptStart hook that panics also skips the cancel of the attempt's
// context inside deadline.Do, which the transport cannot reach: a timer
// stays until the attempt's deadline (reported to the engine's owner).
func TestPanicBeforeSending(t *testing.T) {
	cases := map[string]deadlinehttp.Option{
		"policy function": deadlinehttp.WithPolicyFunc(func(*http.Request) (deadline.Policy, bool) { panic("boom") }),
		"AttemptStart": deadlinehttp.WithHooks(&deadline.Hooks{
			AttemptStart: func(context.Context, deadline.AttemptInfo) context.Context { panic("boom") },
		}),
	}
	for name, opt := range cases {
		t.Run(name, func(t *testing.T) {
			spy := &leaseSpy{}
			tr := deadlinehttp.NewTransport(spy, opt)
			body := &closeRecorder{Reader: strings.NewReader("payload")}
			req, err := http.NewRequestWithContext(budgetCtx(time.Minute), http.MethodPost, "http://svc.test/x", body)
			require.NoError(t, err)
			v := recovered(func() { tr.RoundTrip(req) })
			assert.Equal(t, "boom", v)
			assert.True(t, body.closed, "the body is closed")
			assert.Empty(t, spy.ctxs, "nothing was sent")
		})
	}
}

// TestPanicInBackoffHookWithRetainedAnswer: a Backoff hook that panics
// while the transport holds a retryable answer (not yet drained) closes
// that answer and releases its lease before the panic goes on.
func TestPanicInBackoffHookWithRetainedAnswer(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "busy")
	})
	spy := &leaseSpy{base: s.Client().Transport}
	tr := deadlinehttp.NewTransport(spy, deadlinehttp.WithPolicy(fastPolicy(3)), deadlinehttp.WithHooks(&deadline.Hooks{
		Backoff: func(context.Context, deadline.BackoffInfo) { panic("backoff boom") },
	}))
	req, err := http.NewRequestWithContext(budgetCtx(time.Minute), http.MethodGet, s.URL, nil)
	require.NoError(t, err)
	v := recovered(func() { tr.RoundTrip(req) })
	assert.Equal(t, "backoff boom", v)
	require.Len(t, spy.ctxs, 1)
	assert.True(t, spy.released(), "the retained answer's lease is released")
	tr.CloseIdleConnections()
	s.Close()
	goleak.VerifyNone(t)
}

// TestBaseNilResponse: a base that breaks the RoundTripper contract by
// returning neither a response nor an error makes an error, not a panic.
func TestBaseNilResponse(t *testing.T) {
	tr := deadlinehttp.NewTransport(roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil }))
	req, err := http.NewRequestWithContext(budgetCtx(time.Minute), http.MethodGet, "http://svc.test/x", nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	assert.Nil(t, resp)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "returned a nil response and a nil error")
}

package deadlinehttp_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func client(s *server, opts ...deadlinehttp.Option) *http.Client {
	return &http.Client{Transport: deadlinehttp.NewTransport(s.Client().Transport, opts...)}
}

// TestNonIdempotentSentOnce: a POST without Idempotency-Key reaches the
// server once whether it answers 503 or resets the connection; the same
// server receives a GET three times, so the method is what stopped it.
func TestNonIdempotentSentOnce(t *testing.T) {
	for _, failure := range []string{"503", "reset"} {
		t.Run(failure, func(t *testing.T) {
			s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if failure == "reset" {
					hijackReset(t, w)
					return
				}
				http.Error(w, "busy", http.StatusServiceUnavailable)
			})
			c := client(s, deadlinehttp.WithPolicy(fastPolicy(3)))

			req, err := http.NewRequestWithContext(budgetCtx(5*time.Second), http.MethodPost, s.URL, strings.NewReader("order=1"))
			require.NoError(t, err)
			resp, err := c.Do(req)
			require.Len(t, s.all(), 1, "POST without Idempotency-Key must be sent exactly once")
			var stop *deadline.StopError
			if failure == "503" {
				// Not retried, so the 503 comes back as a response, and
				// StopOf says why it was not retried.
				require.NoError(t, err)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
				assert.Equal(t, "busy\n", string(body))
				var ok bool
				stop, ok = deadlinehttp.StopOf(resp)
				require.True(t, ok)
			} else {
				require.Error(t, err)
				var ok bool
				stop, ok = errors.AsType[*deadline.StopError](err)
				require.True(t, ok, "%v", err)
			}
			assert.Equal(t, deadline.ReasonNotRetryable, stop.Reason)
			assert.Equal(t, 1, stop.Attempts)

			get, err := http.NewRequestWithContext(budgetCtx(5*time.Second), http.MethodGet, s.URL, nil)
			require.NoError(t, err)
			resp, err = c.Do(get)
			assert.Len(t, s.all(), 4, "the GET is retried: 1 POST + 3 GETs")
			if failure == "503" {
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
				var ok bool
				stop, ok = deadlinehttp.StopOf(resp)
				require.True(t, ok)
			} else {
				require.Error(t, err)
				var ok bool
				stop, ok = errors.AsType[*deadline.StopError](err)
				require.True(t, ok, "%v", err)
				assert.True(t, errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF), "%v", err)
			}
			assert.Equal(t, deadline.ReasonExhausted, stop.Reason)
			assert.True(t, deadline.IsRetryable(stop.Last), "last error %v", stop.Last)
		})
	}
}

// TestIdempotencyKeyRetriedWithSameKeyAndBody: with a key, a POST is
// retried after a 503 and after a reset, and every attempt carries the same
// key and byte-identical body.
func TestIdempotencyKeyRetriedWithSameKeyAndBody(t *testing.T) {
	for _, failure := range []string{"503", "reset"} {
		t.Run(failure, func(t *testing.T) {
			s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
				switch {
				case n < 3 && failure == "reset":
					hijackReset(t, w)
				case n < 3:
					w.WriteHeader(http.StatusServiceUnavailable)
				default:
					io.WriteString(w, "created")
				}
			})
			payload := []byte(`{"job":"render","pages":[1,2,3]}`)
			req, err := http.NewRequestWithContext(budgetCtx(5*time.Second), http.MethodPost, s.URL, bytes.NewReader(payload))
			require.NoError(t, err)
			req.Header.Set("Idempotency-Key", "k-7f3a")

			resp, err := client(s, deadlinehttp.WithPolicy(fastPolicy(3))).Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, "created", string(body))

			got := s.all()
			require.Len(t, got, 3)
			for i, r := range got {
				assert.Equal(t, http.MethodPost, r.Method, "attempt %d", i+1)
				assert.Equal(t, "k-7f3a", r.Key, "attempt %d", i+1)
				assert.Equal(t, payload, r.Body, "attempt %d", i+1)
			}
		})
	}
}

// TestPUTBodyReplayedByteIdentical: a PUT's body is sent again from GetBody
// on each attempt, byte for byte; a PUT whose body cannot be replayed is
// sent once.
func TestPUTBodyReplayedByteIdentical(t *testing.T) {
	payload := make([]byte, 100<<10)
	rand.Read(payload)
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n < 3 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	c := client(s, deadlinehttp.WithPolicy(fastPolicy(3)))

	req, err := http.NewRequestWithContext(budgetCtx(5*time.Second), http.MethodPut, s.URL, bytes.NewReader(payload))
	require.NoError(t, err)
	require.NotNil(t, req.GetBody)
	resp, err := c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	got := s.all()
	require.Len(t, got, 3)
	for i, r := range got {
		assert.True(t, bytes.Equal(payload, r.Body), "attempt %d body differs (%d bytes)", i+1, len(r.Body))
	}

	// The same PUT with a body that has no GetBody: sent once, the 502 is
	// returned as it is.
	s2 := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	req, err = http.NewRequestWithContext(budgetCtx(5*time.Second), http.MethodPut, s2.URL, io.NopCloser(bytes.NewReader(payload)))
	require.NoError(t, err)
	require.Nil(t, req.GetBody)
	resp, err = client(s2, deadlinehttp.WithPolicy(fastPolicy(3))).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	require.Len(t, s2.all(), 1)
	assert.True(t, bytes.Equal(payload, s2.all()[0].Body))
}

// TestExhaustedOnStatusReturnsLastResponse: when retries run out on a
// retryable status the caller gets the last answer as a response with a nil
// error, as the http.RoundTripper contract requires: status, header and the
// whole body, unread. StopOf says why the transport stopped: the reason,
// the attempts, and a StatusError holding that same response.
func TestExhaustedOnStatusReturnsLastResponse(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Attempt", strconv.Itoa(n))
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "overloaded #"+strconv.Itoa(n))
	})
	req, err := http.NewRequestWithContext(budgetCtx(5*time.Second), http.MethodGet, s.URL, nil)
	require.NoError(t, err)
	c := client(s, deadlinehttp.WithPolicy(fastPolicy(3)))
	resp, err := c.Do(req)
	require.NoError(t, err)
	require.NotNil(t, resp)
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	assert.Equal(t, "3", resp.Header.Get("X-Attempt"))
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, "overloaded #3", string(body))

	stop, ok := deadlinehttp.StopOf(resp)
	require.True(t, ok)
	assert.Equal(t, deadline.ReasonExhausted, stop.Reason)
	assert.Equal(t, 3, stop.Attempts)
	assert.ErrorIs(t, stop, deadline.ErrAttemptsExhausted)
	se, ok := errors.AsType[*deadlinehttp.StatusError](stop)
	require.True(t, ok)
	assert.Same(t, resp, se.Response, "the StatusError holds the returned response")
	assert.Equal(t, 500, se.StatusCode())
	assert.Equal(t, "500", se.ErrorType())
	assert.Equal(t, 3, se.Attempt)
	assert.False(t, se.Truncated)
	assert.Contains(t, stop.Error(), "HTTP 500 Internal Server Error")
	opened, _ := s.conns()
	assert.Equal(t, 1, opened, "every attempt reused the connection")
	c.CloseIdleConnections()
	s.waitAllClosed(t)
}

// TestStopOfFalse: a response that needed no retry, one that succeeded
// after retries, and a response from another RoundTripper carry no stop.
func TestStopOfFalse(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/404":
			w.WriteHeader(http.StatusNotFound)
		case "/flaky":
			if n == 2 {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}
	})
	c := client(s, deadlinehttp.WithPolicy(fastPolicy(3)))
	for _, path := range []string{"/ok", "/flaky", "/404"} {
		req, err := http.NewRequestWithContext(budgetCtx(5*time.Second), http.MethodGet, s.URL+path, nil)
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		_, ok := deadlinehttp.StopOf(resp)
		assert.False(t, ok, path)
	}
	assert.Len(t, s.all(), 4, "/flaky was retried once")
	resp, err := s.Client().Get(s.URL)
	require.NoError(t, err)
	resp.Body.Close()
	_, ok := deadlinehttp.StopOf(resp)
	assert.False(t, ok, "a plain http.Client's response")
	_, ok = deadlinehttp.StopOf(nil)
	assert.False(t, ok)
}

// TestStopOfThroughClientTimeout: an http.Client with a Timeout wraps the
// body it returns; StopOf still finds the stop, through the response's
// Request, also for a response without a body.
func TestStopOfThroughClientTimeout(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	c := client(s, deadlinehttp.WithPolicy(fastPolicy(2)))
	c.Timeout = time.Minute
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		req, err := http.NewRequestWithContext(budgetCtx(5*time.Second), method, s.URL, nil)
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		stop, ok := deadlinehttp.StopOf(resp)
		require.True(t, ok, method)
		assert.Equal(t, deadline.ReasonExhausted, stop.Reason, method)
		assert.Equal(t, 2, stop.Attempts, method)
	}
}

// TestStatusesNotRetried: a status outside the retryable set, and a 504
// that refused the budget, come back as responses after one request.
func TestStatusesNotRetried(t *testing.T) {
	cases := []struct {
		name   string
		status int
		header string
		opts   []deadlinehttp.Option
	}{
		{"404", http.StatusNotFound, "", nil},
		{"500 outside a custom set", http.StatusInternalServerError, "", []deadlinehttp.Option{deadlinehttp.WithRetryStatuses(503)}},
		{"504 refused by the budget floor", http.StatusGatewayTimeout, "budget-ms=5, floor-ms=20", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if tc.header != "" {
					w.Header().Set(deadlinehttp.RefusedHeader, tc.header)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, "answer")
			})
			opts := append([]deadlinehttp.Option{deadlinehttp.WithPolicy(fastPolicy(3))}, tc.opts...)
			req, err := http.NewRequestWithContext(budgetCtx(5*time.Second), http.MethodGet, s.URL, nil)
			require.NoError(t, err)
			resp, err := client(s, opts...).Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, tc.status, resp.StatusCode)
			assert.Equal(t, "answer", string(body))
			assert.Len(t, s.all(), 1)
		})
	}
}

// TestDiscardedBodiesDrainedAndClosed: retried responses are drained and
// closed, so all attempts reuse one connection, and none is left open once
// the idle ones are closed. A body longer than MaxDrain is closed unread
// past it: its connection is closed, not leaked.
func TestDiscardedBodiesDrainedAndClosed(t *testing.T) {
	cases := []struct {
		name       string
		bodyLen    int
		wantOpened int
	}{
		{"short bodies reuse one connection", 4 << 10, 1},
		// Far over MaxDrain: from Go 1.27 net/http itself drains up to
		// 256 KiB of a closed body (in 50ms) to reuse its connection.
		{"bodies over MaxDrain close theirs", deadlinehttp.MaxDrain + 1<<20, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			filler := strings.Repeat("x", tc.bodyLen)
			s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if n < 3 {
					w.WriteHeader(http.StatusServiceUnavailable)
					io.WriteString(w, filler)
					return
				}
				io.WriteString(w, "ok")
			})
			tr := deadlinehttp.NewTransport(s.Client().Transport, deadlinehttp.WithPolicy(fastPolicy(3)))
			req, err := http.NewRequestWithContext(budgetCtx(5*time.Second), http.MethodGet, s.URL, nil)
			require.NoError(t, err)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, "ok", string(body))
			require.Len(t, s.all(), 3)

			opened, _ := s.conns()
			assert.Equal(t, tc.wantOpened, opened, "connections accepted for 3 attempts")
			tr.CloseIdleConnections()
			s.waitAllClosed(t)
		})
	}
}

// TestTruncatedStatusBody: a long body discarded for a retry is drained up
// to MaxDrain: its StatusError (as the hooks saw it) keeps the first
// MaxDrain bytes and says it was truncated. The last answer, returned, is
// whole.
func TestTruncatedStatusBody(t *testing.T) {
	long := strings.Repeat("y", deadlinehttp.MaxDrain+100)
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, long)
	})
	var rec recorder
	req, err := http.NewRequestWithContext(budgetCtx(5*time.Second), http.MethodGet, s.URL, nil)
	require.NoError(t, err)
	c := client(s, deadlinehttp.WithPolicy(fastPolicy(2)), deadlinehttp.WithHooks(rec.hooks()))
	resp, err := c.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, long, string(b), "the returned answer is whole")

	require.Len(t, rec.results, 2)
	se, ok := errors.AsType[*deadlinehttp.StatusError](rec.results[0].Err)
	require.True(t, ok, "%v", rec.results[0].Err)
	assert.True(t, se.Truncated)
	b, _ = io.ReadAll(se.Response.Body)
	assert.Equal(t, long[:deadlinehttp.MaxDrain], string(b))
	c.CloseIdleConnections()
	s.waitAllClosed(t)
}

// TestResponseBodyOutlivesAttempt: the body returned to the caller is read
// after deadline.Do has released the attempt, and still arrives whole.
func TestResponseBodyOutlivesAttempt(t *testing.T) {
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 4<<10) // 64 KiB
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		for range 16 {
			w.Write(chunk)
			http.NewResponseController(w).Flush()
		}
	})
	req, err := http.NewRequestWithContext(budgetCtx(10*time.Second), http.MethodGet, s.URL, nil)
	require.NoError(t, err)
	resp, err := client(s).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, bytes.Repeat(chunk, 16), got)
}

// TestBodyReadEndsWithCallerOrLease: reading a returned body still obeys the
// caller's cancellation and the attempt's lease.
func TestBodyReadEndsWithCallerOrLease(t *testing.T) {
	stalled := func(n int, w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "head")
		http.NewResponseController(w).Flush()
		<-r.Context().Done() // until the client goes away
	}
	t.Run("caller cancels", func(t *testing.T) {
		s := newServer(t, stalled)
		ctx, cancel := context.WithCancel(budgetCtx(time.Minute))
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
		require.NoError(t, err)
		resp, err := client(s).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		buf := make([]byte, 4)
		_, err = io.ReadFull(resp.Body, buf)
		require.NoError(t, err)
		cancel()
		_, err = io.ReadAll(resp.Body)
		assert.ErrorIs(t, err, context.Canceled)
	})
	t.Run("lease ends", func(t *testing.T) {
		s := newServer(t, stalled)
		req, err := http.NewRequestWithContext(budgetCtx(300*time.Millisecond), http.MethodGet, s.URL, nil)
		require.NoError(t, err)
		resp, err := client(s).Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorIs(t, err, deadline.ErrDeadlineReached, "the cause says the shared deadline ended it")
	})
}

// TestRetryAfterTooLongOneRequest: on loopback, a Retry-After longer than
// the budget stops the call after the server's one request; the 429 is
// returned, and StopOf says the wait did not fit.
func TestRetryAfterTooLongOneRequest(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	require.NoError(t, err)
	resp, err := client(s).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	stop, ok := deadlinehttp.StopOf(resp)
	require.True(t, ok)
	assert.Equal(t, deadline.ReasonRetryAfterTooLong, stop.Reason)
	assert.Equal(t, 3*time.Second, stop.Wait)
	assert.ErrorIs(t, stop, context.DeadlineExceeded)
	assert.Len(t, s.all(), 1)
}

// TestBudgetHeaderOnEachAttempt: on loopback every attempt carries the
// header, each no larger than the budget and smaller than the one before.
func TestBudgetHeaderOnEachAttempt(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	req, err := http.NewRequestWithContext(budgetCtx(3*time.Second), http.MethodGet, s.URL, nil)
	require.NoError(t, err)
	resp, err := client(s, deadlinehttp.WithPolicy(fastPolicy(3))).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	got := s.all()
	require.Len(t, got, 3)
	prev := 3 * time.Second
	for i, r := range got {
		d, ok := deadlinehttp.ParseBudget(r.Budget)
		require.True(t, ok, "attempt %d header %q", i+1, r.Budget)
		assert.Less(t, d, prev, "attempt %d", i+1)
		prev = d
	}
}

// TestHeaderName: WithHeader renames the header or, with "", stops sending
// it.
func TestHeaderName(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Got-Default", r.Header.Get(deadlinehttp.DefaultHeader))
		w.Header().Set("Got-Custom", r.Header.Get("X-Budget"))
	})
	get := func(opts ...deadlinehttp.Option) http.Header {
		req, err := http.NewRequestWithContext(budgetCtx(5*time.Second), http.MethodGet, s.URL, nil)
		require.NoError(t, err)
		resp, err := client(s, opts...).Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.Header
	}
	h := get()
	assert.NotEmpty(t, h.Get("Got-Default"))
	h = get(deadlinehttp.WithHeader("X-Budget"))
	assert.Empty(t, h.Get("Got-Default"))
	assert.NotEmpty(t, h.Get("Got-Custom"))
	h = get(deadlinehttp.WithHeader(""))
	assert.Empty(t, h.Get("Got-Default"))
	assert.Empty(t, h.Get("Got-Custom"))
}

// closeRecorder is a request body that records Close.
type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

// TestInvalidOptions: an invalid option makes RoundTrip return a
// PolicyError naming it, sends nothing, and closes the request body.
func TestInvalidOptions(t *testing.T) {
	cases := []struct {
		name  string
		opt   deadlinehttp.Option
		field string
	}{
		{"default budget", deadlinehttp.WithDefaultBudget(-time.Second), "deadlinehttp.WithDefaultBudget"},
		{"header", deadlinehttp.WithHeader("Bad Header"), "deadlinehttp.WithHeader"},
		{"status", deadlinehttp.WithRetryStatuses(503, 42), "deadlinehttp.WithRetryStatuses"},
		{"policy", deadlinehttp.WithPolicy(deadline.Policy{}), "Policy.MaxAttempts"},
		{"overload charge", deadlinehttp.WithOverloadCharge(-1), "deadlinehttp.WithOverloadCharge"},
		{"retry budget", deadlinehttp.WithRetryBudget(&deadline.RetryBudget{}), "Policy.RetryBudget"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {})
			body := &closeRecorder{Reader: strings.NewReader("x")}
			req, err := http.NewRequestWithContext(budgetCtx(time.Second), http.MethodPost, s.URL, body)
			require.NoError(t, err)
			resp, err := deadlinehttp.NewTransport(s.Client().Transport, tc.opt).RoundTrip(req)
			assert.Nil(t, resp)
			require.ErrorIs(t, err, deadline.ErrInvalidPolicy)
			pe, ok := errors.AsType[*deadline.PolicyError](err)
			require.True(t, ok)
			assert.Equal(t, tc.field, pe.Field)
			assert.True(t, body.closed, "the request body is closed")
			assert.Empty(t, s.all())
		})
	}
}

// TestRefusedBeforeSending: a request whose deadline is already at the
// floor is refused without dialing, and its body is closed.
func TestRefusedBeforeSending(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {})
	body := &closeRecorder{Reader: strings.NewReader("x")}
	req, err := http.NewRequestWithContext(budgetCtx(10*time.Millisecond), http.MethodPut, s.URL, body)
	require.NoError(t, err)
	_, err = deadlinehttp.NewTransport(s.Client().Transport).RoundTrip(req)
	assert.ErrorIs(t, err, deadline.ErrRefused)
	assert.True(t, body.closed)
	assert.Empty(t, s.all())
	opened, _ := s.conns()
	assert.Zero(t, opened, "no connection was dialed")
}

// TestConnectionRefusedRetried: a GET to a loopback port nobody listens on
// is refused by the operating system, which the transport recognises as
// repeatable on every OS (Windows returns WSAECONNREFUSED, not
// syscall.ECONNREFUSED): every allowed attempt is made.
func TestConnectionRefusedRetried(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	var rec recorder
	tr := deadlinehttp.NewTransport(&http.Transport{}, deadlinehttp.WithPolicy(fastPolicy(3)), deadlinehttp.WithHooks(rec.hooks()))
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(budgetCtx(5*time.Second), http.MethodGet, "http://"+addr+"/", nil)
	require.NoError(t, err)
	_, err = tr.RoundTrip(req)
	stop, ok := errors.AsType[*deadline.StopError](err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, deadline.ReasonExhausted, stop.Reason, "%v", err)
	assert.Equal(t, 3, stop.Attempts)
	require.Len(t, rec.results, 3)
	for i, r := range rec.results {
		assert.True(t, r.Retryable, "attempt %d: %v", i+1, r.Err)
	}
}

package peers_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/bench/peers"
)

// These tests run each HTTP adapter inside a synctest bubble against an
// in-memory transport that calls the handler directly: real network I/O
// would not let the bubble's clock advance, and the point here is the
// library's timing (Retry-After, per-attempt timeouts), which virtual time
// makes exact. The real-loopback runs are the scenarios themselves.

// memTransport serves requests with h in memory. A handler that sets the
// header "X-Reset" has executed the request and then lost the connection:
// the client sees ECONNRESET instead of the response.
type memTransport struct{ h http.Handler }

func (m memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	m.h.ServeHTTP(rec, req)
	if req.Body != nil {
		_ = req.Body.Close()
	}
	if rec.Header().Get("X-Reset") != "" {
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// server counts arrivals and the bodies it executed.
type server struct {
	mu       sync.Mutex
	start    time.Time
	arrivals []time.Duration
	bodies   []string
	reply    func(n int, w http.ResponseWriter, r *http.Request)
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var b []byte
	if r.Body != nil {
		b, _ = io.ReadAll(r.Body)
	}
	s.mu.Lock()
	s.arrivals = append(s.arrivals, time.Since(s.start))
	s.bodies = append(s.bodies, string(b))
	n := len(s.arrivals)
	s.mu.Unlock()
	s.reply(n, w, r)
}

func (s *server) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.arrivals)
}

func eachHTTP(t *testing.T, f func(t *testing.T, h peers.HTTPClient)) {
	for _, h := range peers.AllHTTP() {
		t.Run(h.Name(), func(t *testing.T) { f(t, h) })
	}
}

func fastCall() peers.Call {
	c := generous()
	c.BackoffBase, c.BackoffMax = time.Millisecond, 2*time.Millisecond
	return c
}

func failThen(failures, status int, retryAfter string) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		if n <= failures {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			w.WriteHeader(status)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}
}

func TestHTTPRetriesUntilSuccess(t *testing.T) {
	eachHTTP(t, func(t *testing.T, h peers.HTTPClient) {
		synctest.Test(t, func(t *testing.T) {
			s := &server{start: time.Now(), reply: failThen(2, 503, "")}
			status, err := h.Send(t.Context(), fastCall(), memTransport{s}, http.MethodGet, "http://peer.test/", nil)
			require.NoError(t, err)
			assert.Equal(t, 200, status)
			assert.Equal(t, 3, s.count())
		})
	})
}

func TestHTTPHonoursMaxAttempts(t *testing.T) {
	eachHTTP(t, func(t *testing.T, h peers.HTTPClient) {
		synctest.Test(t, func(t *testing.T) {
			s := &server{start: time.Now(), reply: failThen(1000, 502, "")}
			status, err := h.Send(t.Context(), fastCall(), memTransport{s}, http.MethodGet, "http://peer.test/", nil)
			assert.Equal(t, 5, s.count())
			// Libraries differ in how they end: an error, or the last 502
			// handed back (failsafe-go's ReturnLastFailure).
			assert.True(t, err != nil || status == 502, "status %d err %v", status, err)
		})
	})
}

func TestHTTPHonoursAttemptTimeout(t *testing.T) {
	eachHTTP(t, func(t *testing.T, h peers.HTTPClient) {
		synctest.Test(t, func(t *testing.T) {
			c := fastCall()
			c.MaxAttempts = 3
			var mu sync.Mutex
			var lasted []time.Duration
			s := &server{start: time.Now(), reply: func(_ int, w http.ResponseWriter, r *http.Request) {
				t0 := time.Now()
				<-r.Context().Done()
				mu.Lock()
				lasted = append(lasted, time.Since(t0))
				mu.Unlock()
			}}
			_, err := h.Send(t.Context(), c, memTransport{s}, http.MethodGet, "http://peer.test/", nil)
			require.Error(t, err)
			synctest.Wait()
			assert.Equal(t, 3, s.count(), "each attempt that ran out of its timeout is retried")
			mu.Lock()
			defer mu.Unlock()
			for i, d := range lasted {
				assert.Equal(t, c.AttemptTimeout, d, "attempt %d lasts its timeout", i+1)
			}
		})
	})
}

// TestHTTPRetryAfter pins what each library does with a 503 that asks for
// 2s: the ones that honour it wait at least that long (failsafe-go jitters
// the server's delay by its ±25% factor); retry-go caps it at MaxDelay, and
// go-retry cannot see it.
func TestHTTPRetryAfter(t *testing.T) {
	eachHTTP(t, func(t *testing.T, h peers.HTTPClient) {
		synctest.Test(t, func(t *testing.T) {
			s := &server{start: time.Now(), reply: failThen(1, 503, "2")}
			status, err := h.Send(t.Context(), generous(), memTransport{s}, http.MethodGet, "http://peer.test/", nil)
			require.NoError(t, err)
			require.Equal(t, 200, status)
			require.Equal(t, 2, s.count())
			gap := s.arrivals[1] - s.arrivals[0]
			switch h.Name() {
			case peers.Failsafe{}.Name():
				assert.GreaterOrEqual(t, gap, 1500*time.Millisecond)
				assert.LessOrEqual(t, gap, 2500*time.Millisecond)
			case peers.Avast{}.Name():
				assert.LessOrEqual(t, gap, generous().BackoffMax, "retry-go caps Retry-After at MaxDelay")
			case peers.Sethvargo{}.Name():
				assert.Less(t, gap, 2*time.Second)
			default:
				assert.GreaterOrEqual(t, gap, 2*time.Second)
			}
		})
	})
}

// TestHTTPPost pins how many times each library sends a POST whose first
// delivery failed, and that the body is replayed intact when it is resent.
func TestHTTPPost(t *testing.T) {
	for _, fault := range []string{"503", "reset"} {
		eachHTTP(t, func(t *testing.T, h peers.HTTPClient) {
			synctest.Test(t, func(t *testing.T) {
				s := &server{start: time.Now(), reply: func(n int, w http.ResponseWriter, _ *http.Request) {
					if n == 1 && fault == "reset" {
						w.Header().Set("X-Reset", "1")
						return
					}
					failThen(1, 503, "")(n, w, nil)
				}}
				_, _ = h.Send(t.Context(), fastCall(), memTransport{s}, http.MethodPost, "http://peer.test/", []byte("order-42"))
				want := 2
				if _, ok := h.(peers.DeadlineHTTP); ok {
					want = 1 // a POST without an Idempotency-Key is sent once
				}
				assert.Equal(t, want, s.count(), fault)
				for _, b := range s.bodies {
					assert.Equal(t, "order-42", b)
				}
			})
		})
	}
}

func TestHTTPNotRetryableStatus(t *testing.T) {
	eachHTTP(t, func(t *testing.T, h peers.HTTPClient) {
		synctest.Test(t, func(t *testing.T) {
			s := &server{start: time.Now(), reply: failThen(1000, 404, "")}
			status, _ := h.Send(context.Background(), fastCall(), memTransport{s}, http.MethodGet, "http://peer.test/", nil)
			assert.Equal(t, 1, s.count())
			if status != 0 {
				assert.Equal(t, 404, status)
			}
		})
	})
}

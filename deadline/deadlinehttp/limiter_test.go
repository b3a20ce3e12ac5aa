package deadlinehttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// TestTransportLimiter: with WithLimiter, a request that finds the limit
// reached and no room to wait is not sent, and fails with ReasonLimited,
// not a timeout; the slot comes back when the response body is closed.
func TestTransportLimiter(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 4)
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		arrived <- struct{}{}
		if r.URL.Path == "/hold" {
			<-release
		}
	}))
	defer srv.Close()
	l, err := overload.NewLimiter(overload.WithFixedLimit(1), overload.WithBacklog(0))
	require.NoError(t, err)
	tr := deadlinehttp.NewTransport(nil, deadlinehttp.WithLimiter(l))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	var wg sync.WaitGroup
	wg.Go(func() {
		resp, err := client.Get(srv.URL + "/hold")
		if assert.NoError(t, err) {
			assert.NoError(t, resp.Body.Close())
		}
	})
	<-arrived
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/", nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	assert.Nil(t, resp)
	require.ErrorIs(t, err, deadline.ErrLimited)
	assert.False(t, errors.Is(err, context.DeadlineExceeded), "the downstream's capacity, not the budget")
	var se *deadline.StopError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, deadline.ReasonLimited, se.Reason)
	require.NotNil(t, se.Refusal)
	assert.Equal(t, overload.CauseQueueFull, se.Refusal.Cause)
	assert.Equal(t, int32(1), calls.Load(), "the refused request was not sent")

	close(release)
	wg.Wait()
	resp, err = client.Get(srv.URL + "/")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	running, _ := l.Len()
	assert.Zero(t, running)
}

// TestTransportOverloadMarked: a 503 is an overload answer for the limiter
// and throttling: with WithThrottle, once the server refuses most
// attempts, requests are dropped on the client without being sent.
func TestTransportOverloadMarked(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	b, err := deadline.NewRetryBudget(deadline.WithRetryRatio(0), deadline.WithMinRetryRate(0))
	require.NoError(t, err)
	th, err := overload.NewThrottle(overload.WithThrottleK(1.1))
	require.NoError(t, err)
	tr := deadlinehttp.NewTransport(nil, deadlinehttp.WithRetryBudget(b), deadlinehttp.WithThrottle(th), deadlinehttp.WithOverloadCharge(1))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	throttled := 0
	for range 50 {
		resp, err := client.Get(srv.URL)
		if errors.Is(err, deadline.ErrThrottled) {
			throttled++
			continue
		}
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	assert.Positive(t, throttled)
	assert.Equal(t, int32(50-throttled), calls.Load(), "a throttled request is not sent")
	assert.Greater(t, th.DropProbability(), 0.5)
}

// TestHandlerAdmissionLimiter: the adaptive limit in place of the fixed
// queue, with the same answers.
func TestHandlerAdmissionLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := overload.NewLimiter(overload.WithLimitRange(1, 1, 1), overload.WithBacklog(1), overload.WithArrivalOrder())
		require.NoError(t, err)
		release := make(chan struct{})
		var calls atomic.Int32
		h, err := deadlinehttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				<-release
			}
		}), deadlinehttp.WithAdmissionLimiter(l), deadlinehttp.WithFloor(10*time.Millisecond))
		require.NoError(t, err)

		var wg sync.WaitGroup
		var holder, waiter *httptest.ResponseRecorder
		wg.Go(func() { holder = getBudget(h, "/", 1000) })
		synctest.Wait()
		wg.Go(func() { waiter = getBudget(h, "/", 105) }) // leaves before the queue stands
		synctest.Wait()
		full := getBudget(h, "/", 1000)
		assert.Equal(t, http.StatusServiceUnavailable, full.Code)
		time.Sleep(time.Second)
		close(release)
		wg.Wait()
		assert.Equal(t, http.StatusGatewayTimeout, waiter.Code)
		assert.Equal(t, "budget-ms=105, floor-ms=10, reason=queue_timeout", waiter.Header().Get(deadlinehttp.RefusedHeader))
		assert.Equal(t, http.StatusOK, holder.Code)
		assert.Equal(t, http.StatusOK, getBudget(h, "/", 1000).Code, "the slot was freed")

		q := deadlinehttp.WithAdmissionQueue(1, 1)
		_, err = deadlinehttp.NewHandler(http.NotFoundHandler(), q, deadlinehttp.WithAdmissionLimiter(l))
		var pe *deadline.PolicyError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "deadlinehttp.WithAdmissionLimiter", pe.Field)
	})
}

// TestHandlerQueueOrderIgnoresTheClaim: under a standing queue, requests
// that forge the budget header (9999999999 ms, clamped to the maximum) or
// send none are served exactly where honest requests arriving at the same
// instants would be: the claim buys no place, with the fixed queue and
// with the adaptive limiter. Before, the queue served the largest deadline
// first, and both went ahead of every honest 300 ms request.
func TestHandlerQueueOrderIgnoresTheClaim(t *testing.T) {
	run := func(t *testing.T, opt func() deadlinehttp.HandlerOption, forge bool) []string {
		var order []string
		synctest.Test(t, func(t *testing.T) {
			var mu sync.Mutex
			release := make(chan struct{})
			h, err := deadlinehttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				id := r.URL.Query().Get("id")
				if id == "hold" {
					<-release
					return
				}
				mu.Lock()
				order = append(order, id)
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
				// A floor of 50 ms: in the standing queue each waits at most
				// twice that from when it stood, longer than this test's.
			}), opt(), deadlinehttp.WithMaxBudget(3*time.Second), deadlinehttp.WithFloor(50*time.Millisecond))
			require.NoError(t, err)
			var wg sync.WaitGroup
			send := func(id, header string) {
				req := httptest.NewRequest(http.MethodGet, "/?id="+id, nil)
				if header != "" {
					req.Header.Set(deadlinehttp.DefaultHeader, header)
				}
				wg.Go(func() { h.ServeHTTP(httptest.NewRecorder(), req) })
				synctest.Wait()
				time.Sleep(10 * time.Millisecond)
			}
			send("hold", "5000")
			send("h1", "400")
			time.Sleep(overload.LIFOAfter) // a standing queue
			forged, missing := "300", "300"
			if forge {
				forged, missing = "9999999999", ""
			}
			send("forged", forged)
			send("h2", "300")
			send("missing", missing)
			send("h3", "300")
			close(release)
			wg.Wait()
		})
		return order
	}
	for name, opt := range map[string]func() deadlinehttp.HandlerOption{
		"queue": func() deadlinehttp.HandlerOption { return deadlinehttp.WithAdmissionQueue(1, 10) },
		"limiter": func() deadlinehttp.HandlerOption {
			l, err := overload.NewLimiter(overload.WithLimitRange(1, 1, 1), overload.WithBacklog(10), overload.WithArrivalOrder())
			require.NoError(t, err)
			return deadlinehttp.WithAdmissionLimiter(l)
		},
	} {
		t.Run(name, func(t *testing.T) {
			honest := run(t, opt, false)
			claimed := run(t, opt, true)
			assert.Equal(t, []string{"h3", "missing", "h2", "forged", "h1"}, honest, "adaptive LIFO by arrival")
			assert.Equal(t, honest, claimed, "a forged or missing budget changes no place")
		})
	}
}

// rtFunc is an in-memory base RoundTripper.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestTransportFastRejectionsTeachNoLatency: a 1 s burst of 401s answered
// in 200 µs moves the limit by at most 10 %: answered without the work,
// they are OutcomeAnswered, not service time. Before, the limit fell from
// 32 to 4 and stayed there for 98 s.
func TestTransportFastRejectionsTeachNoLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := overload.NewLimiter()
		require.NoError(t, err)
		var reject atomic.Bool
		base := rtFunc(func(r *http.Request) (*http.Response, error) {
			d, code := 20*time.Millisecond, http.StatusOK
			if reject.Load() {
				d, code = 200*time.Microsecond, http.StatusUnauthorized
			}
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
			return &http.Response{StatusCode: code, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
		})
		tr := deadlinehttp.NewTransport(base, deadlinehttp.WithLimiter(l))
		var wg sync.WaitGroup
		send := func(d time.Duration) {
			for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Millisecond) {
				wg.Go(func() {
					req := httptest.NewRequest(http.MethodGet, "http://downstream/", nil)
					req.RequestURI = ""
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					defer cancel()
					if resp, err := tr.RoundTrip(req.WithContext(ctx)); err == nil {
						resp.Body.Close()
					}
				})
			}
		}
		send(3 * time.Second)
		before := l.Limit()
		reject.Store(true)
		send(time.Second)
		reject.Store(false)
		send(2 * time.Second)
		wg.Wait()
		after := l.Limit()
		t.Logf("limit %d before the burst of 401s, %d after", before, after)
		assert.InDelta(t, before, after, 0.1*float64(before))
	})
}

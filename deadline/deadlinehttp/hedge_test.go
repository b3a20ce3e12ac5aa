package deadlinehttp_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// trackedBody is a response body that records its Close.
type trackedBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *trackedBody) Close() error { b.closed.Store(true); return nil }

// scriptedBase answers the n-th request it receives with answer(n), and
// counts the requests in flight.
type scriptedBase struct {
	mu       sync.Mutex
	n        int
	now      int
	most     int
	canceled []bool
	bodies   []*trackedBody
	answer   func(n int, r *http.Request) (status int, after time.Duration, ignoreCtx bool)
}

func (b *scriptedBase) RoundTrip(r *http.Request) (*http.Response, error) {
	b.mu.Lock()
	b.n++
	n := b.n
	b.now++
	b.most = max(b.most, b.now)
	b.canceled = append(b.canceled, false)
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.now--
		b.mu.Unlock()
	}()
	status, after, ignore := b.answer(n, r)
	if ignore {
		time.Sleep(after)
	} else {
		select {
		case <-time.After(after):
		case <-r.Context().Done():
			b.mu.Lock()
			b.canceled[n-1] = true
			b.mu.Unlock()
			return nil, r.Context().Err()
		}
	}
	body := &trackedBody{Reader: strings.NewReader("answer " + strings.Repeat("x", n))}
	b.mu.Lock()
	b.bodies = append(b.bodies, body)
	b.mu.Unlock()
	return &http.Response{StatusCode: status, Body: body, Request: r, Header: http.Header{}}, nil
}

func hedgeTransport(base http.RoundTripper) *deadlinehttp.Transport {
	p := deadline.Policy{MaxAttempts: 3, Hedge: &deadline.Hedge{Delay: 30 * time.Millisecond, MaxHedges: 1}}
	return deadlinehttp.NewTransport(base, deadlinehttp.WithPolicy(p))
}

func hedgeRequest(t *testing.T, method string, body io.Reader) *http.Request {
	req, err := http.NewRequestWithContext(deadline.NewContext(t.Context(), deadline.New(time.Second)), method, "http://example.invalid/", body)
	require.NoError(t, err)
	return req
}

// TestTransportHedgesAnIdempotentRequest: the first request has no answer
// at the hedge delay, a second is sent, its answer is returned, and the
// first is canceled.
func TestTransportHedgesAnIdempotentRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scriptedBase{answer: func(n int, _ *http.Request) (int, time.Duration, bool) {
			if n == 1 {
				return 200, time.Hour, false
			}
			return 200, 10 * time.Millisecond, false
		}}
		start := time.Now()
		resp, err := hedgeTransport(base).RoundTrip(hedgeRequest(t, http.MethodGet, nil))
		require.NoError(t, err)
		assert.Equal(t, 40*time.Millisecond, time.Since(start))
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, "answer xx", string(b), "the hedge's answer")
		assert.Equal(t, 2, base.n)
		assert.Equal(t, 2, base.most)
		assert.Equal(t, []bool{true, false}, base.canceled, "the first request was canceled")
	})
}

// TestTransportDoesNotHedgeAPost: a request that may not be retried is not
// hedged either: it is sent once.
func TestTransportDoesNotHedgeAPost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scriptedBase{answer: func(int, *http.Request) (int, time.Duration, bool) { return 200, 100 * time.Millisecond, false }}
		start := time.Now()
		resp, err := hedgeTransport(base).RoundTrip(hedgeRequest(t, http.MethodPost, strings.NewReader("order=1")))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 100*time.Millisecond, time.Since(start))
		assert.Equal(t, 1, base.n)
	})
}

// TestTransportHedgedPutReplaysTheBody: a hedge sends the body again, from
// GetBody.
func TestTransportHedgedPutReplaysTheBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got []string
		base := &scriptedBase{answer: func(n int, r *http.Request) (int, time.Duration, bool) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			got = append(got, string(b))
			mu.Unlock()
			if n == 1 {
				return 200, time.Hour, false
			}
			return 200, 10 * time.Millisecond, false
		}}
		resp, err := hedgeTransport(base).RoundTrip(hedgeRequest(t, http.MethodPut, strings.NewReader("v=1")))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, []string{"v=1", "v=1"}, got)
	})
}

// TestTransportHedgeLosersClosed: a loser that got an answer anyway, a
// success or a retryable status, has it closed; only the winner's is
// returned, open.
func TestTransportHedgeLosersClosed(t *testing.T) {
	for _, status := range []int{http.StatusOK, http.StatusServiceUnavailable} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &scriptedBase{answer: func(n int, _ *http.Request) (int, time.Duration, bool) {
					if n == 1 {
						return status, 100 * time.Millisecond, true // ignores the cancellation
					}
					return 200, 10 * time.Millisecond, false
				}}
				resp, err := hedgeTransport(base).RoundTrip(hedgeRequest(t, http.MethodGet, nil))
				require.NoError(t, err)
				assert.Equal(t, 200, resp.StatusCode)
				base.mu.Lock()
				require.Len(t, base.bodies, 2)
				winner, loser := base.bodies[0], base.bodies[1] // in answer order
				base.mu.Unlock()
				assert.True(t, loser.closed.Load(), "the loser's answer is closed")
				assert.False(t, winner.closed.Load(), "the winner's is the caller's")
				resp.Body.Close()
				assert.True(t, winner.closed.Load())
			})
		})
	}
}

// TestTransportHedgedRetryableAnswers: when every attempt answers a
// retryable status, the latest answer is returned and the others closed.
func TestTransportHedgedRetryableAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scriptedBase{answer: func(n int, _ *http.Request) (int, time.Duration, bool) {
			return http.StatusServiceUnavailable, map[int]time.Duration{1: 50 * time.Millisecond, 2: 10 * time.Millisecond}[n], false
		}}
		p := deadline.Policy{MaxAttempts: 2, Hedge: &deadline.Hedge{Delay: 30 * time.Millisecond, MaxHedges: 1}}
		resp, err := deadlinehttp.NewTransport(base, deadlinehttp.WithPolicy(p)).RoundTrip(hedgeRequest(t, http.MethodGet, nil))
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		stop, ok := deadlinehttp.StopOf(resp)
		require.True(t, ok)
		assert.Equal(t, deadline.ReasonExhausted, stop.Reason)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, "answer x", string(b), "the latest answer, the first request's at 50ms")
		base.mu.Lock()
		defer base.mu.Unlock()
		for i, body := range base.bodies {
			assert.True(t, body.closed.Load(), "answer %d closed", i+1)
		}
	})
}

var _ = context.Background

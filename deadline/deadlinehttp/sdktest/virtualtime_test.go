package sdktest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
)

// The tests in this file run the real SDK inside a synctest bubble, on
// virtual time: the provider is served in memory (memProvider), since
// loopback sockets do not block durably in a bubble. Durations are exact.

// memProvider serves each request in memory with answer, as a separate
// process would: the handler sees only what crosses the wire, in a context
// of its own that ends when the client's request context does.
type memProvider struct {
	answer func(n int, w http.ResponseWriter, r *http.Request)
	mu     sync.Mutex
	at     []time.Time // when each request arrived
}

func (m *memProvider) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	m.mu.Lock()
	m.at = append(m.at, time.Now())
	n := len(m.at)
	m.mu.Unlock()
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := context.AfterFunc(req.Context(), cancel)
	defer stop()
	sr := httptest.NewRequestWithContext(sctx, req.Method, req.URL.String(), bytes.NewReader(body))
	sr.Header = req.Header.Clone()
	rec := httptest.NewRecorder()
	m.answer(n, rec, sr)
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	return rec.Result(), nil
}

func (m *memProvider) arrivals() []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]time.Time(nil), m.at...)
}

// TestOpenAIWaitsRetryAfterMsExactly: the SDK's call waits exactly the
// retry-after-ms the provider asked for (not the longer Retry-After, not
// the policy's backoff), and a 529 without a delay waits the backoff.
func TestOpenAIWaitsRetryAfterMsExactly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &memProvider{answer: func(n int, w http.ResponseWriter, r *http.Request) {
			switch n {
			case 1:
				fail(w, http.StatusTooManyRequests, openAIRateLimited, "retry-after-ms", "1250", "retry-after", "3", "x-should-retry", "true")
			case 2:
				fail(w, deadlinehttp.StatusOverloaded, openAIServerError, "x-should-retry", "true")
			default:
				completion(w)
			}
		}}
		hc := &http.Client{Transport: deadlinehttp.NewTransport(m, deadlinehttp.WithPolicy(testPolicy()))}
		client := openAIClient("http://llm.test", hc)
		start := time.Now()
		res, err := client.Chat.Completions.New(budgetCtx(5*time.Second), chatParams())
		require.NoError(t, err)
		assert.Equal(t, "hello", res.Choices[0].Message.Content)
		at := m.arrivals()
		require.Len(t, at, 3)
		assert.Equal(t, 1250*time.Millisecond, at[1].Sub(at[0]), "retry-after-ms, exactly")
		assert.Equal(t, testPolicy().Backoff.Base, at[2].Sub(at[1]), "no delay asked: the policy's backoff")
		assert.Equal(t, 1255*time.Millisecond, time.Since(start))
	})
}

// TestOpenAIRetryAfterMsDoesNotFit: with 1 s left, a retry-after-ms of
// 980 ms leaves the next attempt nothing above the 20 ms floor: the call
// stops at once, without waiting, and the SDK returns the 429.
func TestOpenAIRetryAfterMsDoesNotFit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &memProvider{answer: func(n int, w http.ResponseWriter, r *http.Request) {
			fail(w, http.StatusTooManyRequests, openAIRateLimited, "retry-after-ms", "980", "x-should-retry", "true")
		}}
		hc := &http.Client{Transport: deadlinehttp.NewTransport(m, deadlinehttp.WithPolicy(testPolicy()))}
		client := openAIClient("http://llm.test", hc)
		start := time.Now()
		_, err := client.Chat.Completions.New(budgetCtx(time.Second), chatParams())
		assert.Zero(t, time.Since(start), "stopped at once")
		apiErr, ok := errors.AsType[*openai.Error](err)
		require.True(t, ok, "the provider's answer, as the SDK's error: %v", err)
		assert.Equal(t, http.StatusTooManyRequests, apiErr.StatusCode)
		stop, ok := deadlinehttp.StopOf(apiErr.Response)
		require.True(t, ok)
		assert.Equal(t, deadline.ReasonRetryAfterTooLong, stop.Reason)
		assert.Len(t, m.arrivals(), 1)
	})
}

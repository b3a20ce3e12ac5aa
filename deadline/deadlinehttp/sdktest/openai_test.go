package sdktest

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
)

// TestOpenAIRateLimitRetryAfterMs: a 429 that asks for 30 ms in
// retry-after-ms (and a longer Retry-After, which it overrides) and says
// the request was not acted on is retried by the transport, not by the
// SDK: the chat completion, a POST, succeeds on the second physical
// request, which came no sooner than asked.
func TestOpenAIRateLimitRetryAfterMs(t *testing.T) {
	p := newProvider(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			fail(w, http.StatusTooManyRequests, openAIRateLimited,
				"retry-after-ms", "30", "retry-after", "20", "x-should-retry", "true")
			return
		}
		completion(w)
	})
	client := openAIClient(p.URL, budgetClient(t))
	res, err := client.Chat.Completions.New(budgetCtx(5*time.Second), chatParams())
	require.NoError(t, err)
	assert.Equal(t, "hello", res.Choices[0].Message.Content)

	got := p.seen()
	require.Len(t, got, 2, "one retry, the transport's")
	assert.GreaterOrEqual(t, got[1].At.Sub(got[0].At), 30*time.Millisecond, "the retry came no sooner than retry-after-ms")
	for _, s := range got {
		assert.Equal(t, "/v1/chat/completions", s.Path)
		assert.Equal(t, "0", s.RetryCount, "the SDK made one request; the transport sent it twice")
		assert.Equal(t, got[0].Body, s.Body, "the same body on every attempt")
	}
}

// TestOpenAIRetryAfterMsBeyondBudget: a retry-after-ms longer than what is
// left stops the call at once; the SDK returns the provider's 429 as its
// *openai.Error, and StopOf finds why through its Response.
func TestOpenAIRetryAfterMsBeyondBudget(t *testing.T) {
	p := newProvider(t, func(n int, w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusTooManyRequests, openAIRateLimited, "retry-after-ms", "5000", "x-should-retry", "true")
	})
	client := openAIClient(p.URL, budgetClient(t))
	_, err := client.Chat.Completions.New(budgetCtx(time.Second), chatParams())
	apiErr, ok := errors.AsType[*openai.Error](err)
	require.True(t, ok, "the provider's answer, as the SDK's error: %v", err)
	assert.Equal(t, http.StatusTooManyRequests, apiErr.StatusCode)
	assert.Equal(t, "rate_limit_exceeded", apiErr.Code)
	assert.Len(t, p.seen(), 1)
	stop, ok := deadlinehttp.StopOf(apiErr.Response)
	require.True(t, ok)
	assert.Equal(t, deadline.ReasonRetryAfterTooLong, stop.Reason)
	assert.Equal(t, 5*time.Second, stop.Wait)
}

// TestOpenAIShouldRetry: x-should-retry decides whether a chat completion
// (a POST) is retried on a 500: "true" is retried until it succeeds,
// "false" and no header are sent once, and the SDK returns the 500.
func TestOpenAIShouldRetry(t *testing.T) {
	for _, tc := range []struct {
		name     string
		headers  []string
		requests int
		ok       bool
		reason   deadline.Reason
	}{
		{"true", []string{"x-should-retry", "true"}, 3, true, 0},
		{"false", []string{"x-should-retry", "false"}, 1, false, deadline.ReasonNotRetryable},
		{"absent", nil, 1, false, deadline.ReasonNotRetryable},
		{"other value", []string{"x-should-retry", "maybe"}, 1, false, deadline.ReasonNotRetryable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProvider(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if n < 3 {
					fail(w, http.StatusInternalServerError, openAIServerError, tc.headers...)
					return
				}
				completion(w)
			})
			client := openAIClient(p.URL, budgetClient(t))
			res, err := client.Chat.Completions.New(budgetCtx(5*time.Second), chatParams())
			assert.Len(t, p.seen(), tc.requests)
			if tc.ok {
				require.NoError(t, err)
				assert.Equal(t, "hello", res.Choices[0].Message.Content)
				return
			}
			apiErr, ok := errors.AsType[*openai.Error](err)
			require.True(t, ok, "the provider's answer, as the SDK's error: %v", err)
			assert.Equal(t, http.StatusInternalServerError, apiErr.StatusCode)
			assert.Equal(t, "server_error", apiErr.Type)
			stop, ok := deadlinehttp.StopOf(apiErr.Response)
			require.True(t, ok)
			assert.Equal(t, tc.reason, stop.Reason)
		})
	}
}

// TestOpenAIBelowFloor: a run with less left than the floor sends nothing:
// the SDK returns the transport's refusal, and the provider saw no request.
func TestOpenAIBelowFloor(t *testing.T) {
	p := newProvider(t, func(n int, w http.ResponseWriter, r *http.Request) { completion(w) })
	client := openAIClient(p.URL, budgetClient(t))
	_, err := client.Chat.Completions.New(budgetCtx(10*time.Millisecond), chatParams()) // floor: 20 ms
	stop, ok := errors.AsType[*deadline.StopError](err)
	require.True(t, ok, "the refusal: %v", err)
	assert.Equal(t, deadline.ReasonRefused, stop.Reason)
	assert.Zero(t, stop.Attempts)
	assert.ErrorIs(t, err, deadline.ErrRefused)
	_, isAPI := errors.AsType[*openai.Error](err)
	assert.False(t, isAPI, "no answer: not an API error")
	assert.Empty(t, p.seen(), "no request reached the provider")
}

// TestOpenAIStreamStalls: a streamed chat completion whose server stalls
// after the first chunk ends with the attempt's lease: the stream reports
// the deadline, and the server's handler is released (its request's
// context is done), so nothing is left running on either side.
func TestOpenAIStreamStalls(t *testing.T) {
	released := make(chan struct{}, 1)
	p := newProvider(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("data: " + openAIChunk + "\n\n"))
		http.NewResponseController(w).Flush()
		<-r.Context().Done() // stalls until the client goes
		released <- struct{}{}
	})
	client := openAIClient(p.URL, budgetClient(t))
	stream := client.Chat.Completions.NewStreaming(budgetCtx(time.Second), chatParams())
	defer stream.Close()
	require.True(t, stream.Next(), "the first chunk arrives: %v", stream.Err())
	assert.Equal(t, "Hel", stream.Current().Choices[0].Delta.Content)
	assert.False(t, stream.Next(), "the stall ends with the lease")
	err := stream.Err()
	require.Error(t, err)
	assert.ErrorIs(t, err, deadline.ErrDeadlineReached, "the lease's cause: %v", err)
	requireReleased(t, released)
	assert.Len(t, p.seen(), 1)
}

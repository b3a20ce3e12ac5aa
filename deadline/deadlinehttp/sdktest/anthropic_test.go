package sdktest

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
)

// TestAnthropicOverloaded: Anthropic's 529 is an overload answer. With
// x-should-retry: true and a retry-after-ms the message (a POST) is
// retried after the delay asked; without the header it is sent once and
// the SDK returns the 529; with x-should-retry: false it is never retried.
func TestAnthropicOverloaded(t *testing.T) {
	for _, tc := range []struct {
		name     string
		headers  []string
		requests int
		ok       bool
		reason   deadline.Reason
	}{
		{"should retry", []string{"x-should-retry", "true", "retry-after-ms", "25"}, 3, true, 0},
		{"no advice", []string{"retry-after-ms", "25"}, 1, false, deadline.ReasonNotRetryable},
		{"should not retry", []string{"x-should-retry", "false"}, 1, false, deadline.ReasonNotRetryable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProvider(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if n < 3 {
					fail(w, deadlinehttp.StatusOverloaded, anthropicOverloaded, tc.headers...)
					return
				}
				message(w)
			})
			client := anthropicClient(p.URL, budgetClient(t))
			msg, err := client.Messages.New(budgetCtx(5*time.Second), messageParams())
			got := p.seen()
			assert.Len(t, got, tc.requests)
			for i := 1; i < len(got); i++ {
				assert.GreaterOrEqual(t, got[i].At.Sub(got[i-1].At), 25*time.Millisecond, "no sooner than retry-after-ms")
				assert.Equal(t, "/v1/messages", got[i].Path)
				assert.Equal(t, got[0].Body, got[i].Body)
			}
			if tc.ok {
				require.NoError(t, err)
				require.NotEmpty(t, msg.Content)
				assert.Equal(t, "hello", msg.Content[0].Text)
				return
			}
			apiErr, ok := errors.AsType[*anthropic.Error](err)
			require.True(t, ok, "the provider's answer, as the SDK's error: %v", err)
			assert.Equal(t, deadlinehttp.StatusOverloaded, apiErr.StatusCode)
			stop, ok := deadlinehttp.StopOf(apiErr.Response)
			require.True(t, ok)
			assert.Equal(t, tc.reason, stop.Reason)
		})
	}
}

// TestAnthropicOverloadCharge: a 529 without a delay draws the shared
// retry budget down (WithOverloadCharge) as a 503 does, so the second
// retry is denied and the SDK gets the last 529.
func TestAnthropicOverloadCharge(t *testing.T) {
	// 5 tokens over an hour, none earned by first attempts: 529, charge 2
	// (3), retry (2); 529, charge 2 (0), denied.
	b, err := deadline.NewRetryBudget(deadline.WithRetryRatio(0), deadline.WithRetryWindow(time.Hour),
		deadline.WithMinRetryRate(5.0/3600))
	require.NoError(t, err)
	p := newProvider(t, func(n int, w http.ResponseWriter, r *http.Request) {
		fail(w, deadlinehttp.StatusOverloaded, anthropicOverloaded, "x-should-retry", "true")
	})
	client := anthropicClient(p.URL, budgetClient(t, deadlinehttp.WithRetryBudget(b), deadlinehttp.WithOverloadCharge(2)))
	_, err = client.Messages.New(budgetCtx(5*time.Second), messageParams())
	apiErr, ok := errors.AsType[*anthropic.Error](err)
	require.True(t, ok, "the provider's answer, as the SDK's error: %v", err)
	assert.Equal(t, deadlinehttp.StatusOverloaded, apiErr.StatusCode)
	assert.Len(t, p.seen(), 2)
	stop, ok := deadlinehttp.StopOf(apiErr.Response)
	require.True(t, ok)
	assert.Equal(t, deadline.ReasonRetryBudget, stop.Reason)
	assert.Equal(t, 0, b.Balance())
}

// TestAnthropicBelowFloor: nothing is sent below the floor.
func TestAnthropicBelowFloor(t *testing.T) {
	p := newProvider(t, func(n int, w http.ResponseWriter, r *http.Request) { message(w) })
	client := anthropicClient(p.URL, budgetClient(t))
	_, err := client.Messages.New(budgetCtx(10*time.Millisecond), messageParams()) // floor: 20 ms
	stop, ok := errors.AsType[*deadline.StopError](err)
	require.True(t, ok, "the refusal: %v", err)
	assert.Equal(t, deadline.ReasonRefused, stop.Reason)
	assert.ErrorIs(t, err, deadline.ErrRefused)
	assert.Empty(t, p.seen(), "no request reached the provider")
}

// TestAnthropicStreamStalls: a streamed message whose server stalls after
// message_start ends with the lease, and the server's handler is released.
func TestAnthropicStreamStalls(t *testing.T) {
	released := make(chan struct{}, 1)
	p := newProvider(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":" + anthropicStreamStart + "}\n\n"))
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
		released <- struct{}{}
	})
	client := anthropicClient(p.URL, budgetClient(t))
	stream := client.Messages.NewStreaming(budgetCtx(time.Second), messageParams())
	defer stream.Close()
	require.True(t, stream.Next(), "message_start arrives: %v", stream.Err())
	assert.Equal(t, "message_start", string(stream.Current().Type))
	assert.False(t, stream.Next(), "the stall ends with the lease")
	require.Error(t, stream.Err())
	assert.ErrorIs(t, stream.Err(), deadline.ErrDeadlineReached, "the lease's cause: %v", stream.Err())
	requireReleased(t, released)
	assert.Len(t, p.seen(), 1)
}

const anthropicStreamStart = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-5-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":0}}`

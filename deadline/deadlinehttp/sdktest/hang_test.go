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
)

// TestOpenAIHangsBeforeAnswer: a provider that never answers holds the call
// only until the run's deadline (less the floor): the SDK returns the
// transport's stop, with no API error since there was no answer, and the
// provider's handler is released.
func TestOpenAIHangsBeforeAnswer(t *testing.T) {
	released := make(chan struct{}, 1)
	p := newProvider(t, func(n int, w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		released <- struct{}{}
	})
	client := openAIClient(p.URL, budgetClient(t))
	_, err := client.Chat.Completions.New(budgetCtx(time.Second), chatParams())
	stop, ok := errors.AsType[*deadline.StopError](err)
	require.True(t, ok, "the transport's stop: %v", err)
	assert.Equal(t, deadline.ReasonDeadline, stop.Reason)
	assert.Equal(t, 1, stop.Attempts)
	assert.ErrorIs(t, err, deadline.ErrDeadlineReached)
	_, isAPI := errors.AsType[*openai.Error](err)
	assert.False(t, isAPI, "no answer: not an API error")
	requireReleased(t, released)
	assert.Len(t, p.seen(), 1)
}

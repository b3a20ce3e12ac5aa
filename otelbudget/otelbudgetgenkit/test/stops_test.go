package test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
)

// A caller's cancel at 150 ms, in a tool call: the run's error is the
// context's (errors.Is context.Canceled) and the typed stop with
// ReasonCanceled, where Genkit alone returns a GenkitError "tool ...
// failed: ... canceled by the caller" that neither matches.
func TestCallerCancelIsTyped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		prov := &provider{Turns: 10, Latency: 10 * time.Millisecond}
		tl := &tool{Latency: 5 * time.Second} // honours its context
		s := newSetup(t, ctx, memTransport{H: prov}, fakeURL, prov, tl, false)
		rctx, rcancel := context.WithCancel(ctx)
		time.AfterFunc(150*time.Millisecond, rcancel)
		res, err := agent(t, 0, nil).Run(deadline.NewContext(rctx, deadline.New(time.Second)), s.g, tenTurns()...)
		res.WaitTools()
		require.Error(t, err)
		assert.ErrorIs(t, err, context.Canceled)
		assert.NotErrorIs(t, err, context.DeadlineExceeded)
		stop, ok := errors.AsType[*deadline.StopError](err)
		require.True(t, ok, "%v", err)
		assert.Equal(t, deadline.ReasonCanceled, stop.Reason)
		assert.Same(t, stop, res.Stop)
	})
}

// 429s until the model policy's attempts run out: the typed stop says
// attempts_exhausted with the requests the transport sent, not
// not_retryable after 1.
func TestExhaustedRetriesAreTyped(t *testing.T) {
	prov := &provider{Turns: 1, Latency: 10 * time.Millisecond, Reject: rateLimit(100, 10*time.Millisecond)}
	res, _, err := inBubble(t, time.Second, 0, prov, &tool{})
	stop, ok := errors.AsType[*deadline.StopError](err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, deadline.ReasonExhausted, stop.Reason)
	assert.Equal(t, 3, stop.Attempts)
	assert.Equal(t, 3, len(prov.Requests()))
	assert.Equal(t, "chat fake-1", stop.Name)
	assert.ErrorIs(t, err, deadline.ErrAttemptsExhausted)
	assert.Same(t, stop, res.Stop)
}

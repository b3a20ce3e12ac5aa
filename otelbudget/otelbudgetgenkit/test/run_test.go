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
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetgenkit"
)

const fakeURL = "http://fake.invalid/v1/"

// inBubble runs one ten-turn run of budget in a synctest bubble and returns
// its result, error and virtual duration.
func inBubble(t *testing.T, budget, reserve time.Duration, prov *provider, tl *tool, cfg ...func(*otelbudgetgenkit.Config)) (res *otelbudgetgenkit.Result, took time.Duration, err error) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel() // genkit.Init's signal goroutine ends with it
		s := newSetup(t, ctx, memTransport{H: prov}, fakeURL, prov, tl, false)
		var set func(*otelbudgetgenkit.Config)
		if len(cfg) > 0 {
			set = cfg[0]
		}
		a := agent(t, reserve, set)
		start := time.Now()
		res, err = a.Run(deadline.NewContext(ctx, deadline.New(budget)), s.g, tenTurns()...)
		took = time.Since(start)
		res.WaitTools()
	})
	return res, took, err
}

func TestTenTurnsAnswer(t *testing.T) {
	prov := &provider{Turns: 10, Latency: 30 * time.Millisecond}
	tl := &tool{Latency: 20 * time.Millisecond}
	res, took, err := inBubble(t, time.Second, 0, prov, tl)
	require.NoError(t, err)
	assert.Equal(t, "answer from 10 results", res.Answer.Text())
	assert.Equal(t, 11, res.ModelCalls)
	assert.Equal(t, 10, res.ToolCalls)
	assert.Nil(t, res.Stop)
	assert.Empty(t, res.Abandoned)
	assert.Equal(t, 11*30*time.Millisecond+10*20*time.Millisecond, took)
}

// A tool that ignores its context and outlasts the budget: the run
// returns the tool's stop before the deadline, the tool abandoned.
func TestSlowToolStops(t *testing.T) {
	prov := &provider{Turns: 10, Latency: 30 * time.Millisecond}
	tl := &tool{Latency: 20 * time.Millisecond, SlowAt: 5, Slow: 3 * time.Second}
	res, took, err := inBubble(t, time.Second, 0, prov, tl)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	stop, ok := errors.AsType[*deadline.StopError](err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, "execute_tool lookup", stop.Name)
	assert.Equal(t, deadline.ReasonDeadline, stop.Reason)
	var ab *otelbudgetgenkit.AbandonedError
	require.ErrorAs(t, err, &ab)
	require.Len(t, res.Abandoned, 1)
	assert.Equal(t, "lookup", res.Abandoned[0].Tool)
	assert.Equal(t, "call_5", res.Abandoned[0].CallID)
	// The tool's lease ends at the floor (20 ms before the deadline); the
	// run returns AbandonGrace later.
	assert.Equal(t, time.Second-20*time.Millisecond+otelbudgetgenkit.AbandonGrace, took)
	assert.Equal(t, 5, res.ModelCalls)
	assert.Equal(t, 5, res.ToolCalls)
}

// With a reserve, the same run answers from it.
func TestSlowToolReserveAnswers(t *testing.T) {
	prov := &provider{Turns: 10, Latency: 30 * time.Millisecond}
	tl := &tool{Latency: 20 * time.Millisecond, SlowAt: 5, Slow: 3 * time.Second}
	res, took, err := inBubble(t, time.Second, 100*time.Millisecond, prov, tl)
	require.NoError(t, err)
	assert.Equal(t, "final answer from 5 results", res.Answer.Text())
	require.NotNil(t, res.Stop)
	assert.Equal(t, "execute_tool lookup", res.Stop.Name)
	require.Len(t, res.Abandoned, 1)
	assert.Equal(t, time.Second-120*time.Millisecond+otelbudgetgenkit.AbandonGrace+30*time.Millisecond, took)
	assert.Equal(t, 6, res.ModelCalls)
}

// No model call starts with less than the floor left, though Genkit does
// not look at the context between turns.
func TestModelRefusedBelowFloor(t *testing.T) {
	prov := &provider{Turns: 10, Latency: 30 * time.Millisecond}
	tl := &tool{Latency: 20 * time.Millisecond}
	// 5 turns take 250 ms; the sixth model call would start with 15 ms
	// left, less than its 20 ms floor (the tools' floor is 5 ms).
	res, took, err := inBubble(t, 265*time.Millisecond, 0, prov, tl, func(c *otelbudgetgenkit.Config) {
		c.ToolPolicy.Floor = 5 * time.Millisecond
	})
	require.Error(t, err)
	stop, ok := errors.AsType[*deadline.StopError](err)
	require.True(t, ok, "%v", err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, "chat fake-1", stop.Name)
	assert.Equal(t, deadline.ReasonRefused, stop.Reason)
	assert.Equal(t, 5, res.ModelCalls)
	assert.Equal(t, 5, len(prov.Requests()))
	assert.Equal(t, 250*time.Millisecond, took)
}

// A 429 with retry-after-ms inside a run: the transport waits it out when
// it fits the budget, and never sends past the deadline.
func TestRateLimitHonoured(t *testing.T) {
	prov := &provider{Turns: 3, Latency: 30 * time.Millisecond, Reject: rateLimit(1, 200*time.Millisecond)}
	tl := &tool{Latency: 20 * time.Millisecond}
	res, took, err := inBubble(t, time.Second, 0, prov, tl)
	require.NoError(t, err)
	assert.Equal(t, "answer from 3 results", res.Answer.Text())
	require.GreaterOrEqual(t, len(starts(prov)), 2)
	assert.Equal(t, 200*time.Millisecond, starts(prov)[1].Sub(starts(prov)[0]), "the retry waits the retry-after-ms")
	assert.Equal(t, 200*time.Millisecond+4*30*time.Millisecond+3*20*time.Millisecond, took)
}

func TestRateLimitTooLong(t *testing.T) {
	prov := &provider{Turns: 3, Latency: 30 * time.Millisecond, Reject: rateLimit(1, 2*time.Second)}
	tl := &tool{Latency: 20 * time.Millisecond}
	res, took, err := inBubble(t, time.Second, 0, prov, tl)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	stop, ok := errors.AsType[*deadline.StopError](err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, "chat fake-1", stop.Name)
	assert.Equal(t, deadline.ReasonRetryAfterTooLong, stop.Reason)
	assert.Equal(t, time.Duration(0), took, "no wait that cannot fit")
	assert.Equal(t, 1, len(prov.Requests()), "nothing sent after the 429")
	assert.Equal(t, 1, res.ModelCalls)
}

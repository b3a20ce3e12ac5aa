package test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetgenkit"
)

// runFlaky runs a one-turn agent whose "lookup" tool fails its first call
// with a retryable error, and returns how many times the tool ran.
func runFlaky(t *testing.T, opts ...otelbudgetgenkit.ToolOption) (calls int32, res *otelbudgetgenkit.Result, err error) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		prov := &provider{Turns: 1, Latency: 10 * time.Millisecond}
		g := genkit.Init(ctx, genkit.WithPlugins(newOAI(memTransport{H: prov}, fakeURL, false)))
		var n atomic.Int32
		_, derr := otelbudgetgenkit.DefineTool(g, "lookup", "fails once", func(tc *ai.ToolContext, in lookupIn) (string, error) {
			if n.Add(1) == 1 {
				return "", deadline.Retryable(errors.New("flaky: try again"))
			}
			return "ok", nil
		}, opts...)
		require.NoError(t, derr)
		a := agent(t, 0, func(c *otelbudgetgenkit.Config) { c.ToolPolicy.MaxAttempts = 3 })
		res, err = a.Run(deadline.NewContext(ctx, deadline.New(time.Second)), g, tenTurns()...)
		calls = n.Load()
	})
	return calls, res, err
}

// A read-only (or idempotent) tool is retried within the budget; any
// other tool runs once, its error returned as Genkit returns it.
func TestToolRetriedOnlyWhenMarked(t *testing.T) {
	calls, res, err := runFlaky(t, otelbudgetgenkit.ReadOnly())
	require.NoError(t, err)
	assert.Equal(t, int32(2), calls)
	assert.Equal(t, "answer from 1 results", res.Answer.Text())

	calls, _, err = runFlaky(t, otelbudgetgenkit.Idempotent())
	require.NoError(t, err)
	assert.Equal(t, int32(2), calls)

	calls, _, err = runFlaky(t)
	require.Error(t, err)
	assert.Equal(t, int32(1), calls)
	assert.ErrorContains(t, err, "flaky: try again")
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "the tool's own error, not a budget stop")
}

// A tool that honours its context and returns its error at the lease's end
// is a budget stop as well, not abandoned.
func TestToolHonouringContextStops(t *testing.T) {
	prov := &provider{Turns: 10, Latency: 30 * time.Millisecond}
	tl := &tool{Latency: 5 * time.Second} // every call longer than the budget, but it listens
	res, took, err := inBubble(t, time.Second, 0, prov, tl)
	stop, ok := errors.AsType[*deadline.StopError](err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, "execute_tool lookup", stop.Name)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Empty(t, res.Abandoned)
	assert.Equal(t, time.Second-20*time.Millisecond, took)
}

func TestConfigErrors(t *testing.T) {
	_, err := otelbudgetgenkit.New(otelbudgetgenkit.Config{})
	assert.ErrorContains(t, err, "Config.Model is empty")
	_, err = otelbudgetgenkit.New(otelbudgetgenkit.Config{Model: "m", Reserve: -1})
	assert.ErrorContains(t, err, "Config.Reserve is -1ns")
	_, err = otelbudgetgenkit.New(otelbudgetgenkit.Config{Model: "m", Budget: -1})
	assert.ErrorContains(t, err, "Config.Budget is -1ns")
	_, err = otelbudgetgenkit.New(otelbudgetgenkit.Config{Model: "m", ToolPolicy: deadline.Policy{MaxAttempts: 1, Floor: -1}})
	assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
	assert.ErrorContains(t, err, "Config.ToolPolicy")

	a, err := otelbudgetgenkit.New(otelbudgetgenkit.Config{Model: "m"})
	require.NoError(t, err)
	_, err = a.Run(context.Background(), nil)
	assert.ErrorContains(t, err, "nil *genkit.Genkit")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := genkit.Init(ctx)
	_, err = a.Run(ctx, g)
	assert.ErrorIs(t, err, otelbudgetgenkit.ErrNoBudget)

	_, err = otelbudgetgenkit.DefineTool(g, "bad", "bad policy", func(tc *ai.ToolContext, in lookupIn) (string, error) { return "", nil },
		otelbudgetgenkit.WithToolPolicy(deadline.Policy{MaxAttempts: -1}))
	assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
	assert.ErrorContains(t, err, `tool "bad" policy`)
	_, err = otelbudgetgenkit.DefineTool[lookupIn, string](g, "nil", "nil fn", nil)
	assert.ErrorContains(t, err, "nil function")
}

// Outside a Run, a tool is its function.
func TestToolOutsideRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := genkit.Init(ctx)
	tool, err := otelbudgetgenkit.DefineTool(g, "echo", "echoes", func(tc *ai.ToolContext, in lookupIn) (string, error) {
		_, has := tc.Deadline()
		assert.False(t, has)
		return "echo " + in.Q, nil
	})
	require.NoError(t, err)
	out, err := tool.RunRaw(ctx, map[string]any{"q": "x"})
	require.NoError(t, err)
	assert.Equal(t, "echo x", out)
}

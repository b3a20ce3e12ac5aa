package test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/genai"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgeteino"
)

const (
	budget = time.Second
	floor  = 20 * time.Millisecond
)

func newBudget(t testing.TB, reserve time.Duration, mutate ...func(*otelbudgeteino.Config)) *otelbudgeteino.Budget {
	t.Helper()
	model := deadline.DefaultPolicy() // 3 attempts, 20ms floor
	model.AttemptTimeout = 400 * time.Millisecond
	tool := deadline.DefaultPolicy()
	tool.MaxAttempts = 1
	tool.AttemptTimeout = 2 * time.Second
	cfg := otelbudgeteino.Config{
		Agent: "planner", Provider: genai.ProviderOpenAI, ModelName: "gpt-4o",
		Model: model, Tool: tool, Reserve: reserve,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	b, err := otelbudgeteino.New(cfg)
	require.NoError(t, err)
	return b
}

// tenTurns is the agent of the issue: ten tool turns then an answer; the
// provider answers in 10ms; the tool answers in 60ms until call slowFrom,
// from which on it takes 5s (ignoring its context when ignore is set).
func tenTurns(slowFrom int, ignore bool) (*provider, *lookup) {
	p := &provider{Turns: 10, ToolFor: func(int) string { return "lookup" }, Latency: 10 * time.Millisecond}
	lk := &lookup{name: "lookup", latencyFor: func(n int) time.Duration {
		if n >= slowFrom {
			return 5 * time.Second
		}
		return 60 * time.Millisecond
	}}
	if ignore {
		lk.ignoreCtx = func(n int) bool { return n >= slowFrom }
	}
	return p, lk
}

// assertStarts checks that no model or tool call started with the floor or
// less left of the run's budget.
func assertStarts(t *testing.T, calls []callStart) {
	t.Helper()
	for _, c := range calls {
		require.True(t, c.HasBudget, "%s started without the run's deadline in its context", c.What)
		assert.Greater(t, c.Remaining, floor, "%s started with %v left, at or below the %v floor", c.What, c.Remaining, floor)
	}
}

func assertTypedStop(t *testing.T, err error, step string) *deadline.StopError {
	t.Helper()
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	stop, ok := errors.AsType[*deadline.StopError](err)
	require.True(t, ok, "errors.As finds the *deadline.StopError in %v", err)
	assert.Equal(t, step, stop.Name, "the stop names the step")
	assert.True(t, stop.Reason.Budget(), "a stop of the budget: %v", stop.Reason)
	return stop
}

// A slow tool that honours its context: the run ends inside its deadline,
// with the typed stop naming the tool's step.
func TestSlowToolStopsInsideDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, lk := tenTurns(4, false)
		a := newAgent(t, newBudget(t, 0), p, lk, "http://provider.test/v1", memTransport{H: p}, nil)
		res, took, err := a.run(context.Background(), budget)
		assert.LessOrEqual(t, took, budget, "the run returned inside its deadline")
		assertTypedStop(t, err, "execute_tool lookup")
		assert.Nil(t, res.Answer)
		assert.Empty(t, res.Abandoned, "the tool honoured its context")
		assertStarts(t, append(p.Requests(), lk.calls()...))
		assert.Len(t, lk.calls(), 4)
	})
}

// A tool that ignores its context: abandoned when its lease ends, reported,
// and the run returns inside its deadline all the same.
func TestToolIgnoringContextIsAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, lk := tenTurns(3, true)
		a := newAgent(t, newBudget(t, 0), p, lk, "http://provider.test/v1", memTransport{H: p}, nil)
		res, took, err := a.run(context.Background(), budget)
		assert.LessOrEqual(t, took, budget)
		stop := assertTypedStop(t, err, "execute_tool lookup")
		assert.Equal(t, deadline.ReasonDeadline, stop.Reason)
		require.Len(t, res.Abandoned, 1, "the abandoned tool is reported")
		assert.Equal(t, "lookup", res.Abandoned[0].Tool)
		assert.Equal(t, "call_3", res.Abandoned[0].CallID)
		assertStarts(t, append(p.Requests(), lk.calls()...))
		time.Sleep(5 * time.Second) // the abandoned tool sleeps on; let it finish before the bubble ends
		assert.Equal(t, 3, lk.done())
	})
}

// With a reserve, the slow tool's turn gives way to a final model call
// without tools, and the run answers inside its deadline.
func TestReserveGivesAnAnswer(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			p, lk := tenTurns(4, ignore)
			a := newAgent(t, newBudget(t, 200*time.Millisecond), p, lk, "http://provider.test/v1", memTransport{H: p}, nil)
			res, took, err := a.run(context.Background(), budget)
			require.NoError(t, err)
			assert.LessOrEqual(t, took, budget)
			require.NotNil(t, res.Answer)
			assert.Equal(t, "final answer from 4 results", res.Answer.Content)
			assert.True(t, res.Final)
			require.NotNil(t, res.Stop, "the stop the reserve turned into an answer")
			assert.Equal(t, "execute_tool lookup", res.Stop.Name)
			reqs := p.Requests()
			assert.Equal(t, 0, reqs[len(reqs)-1].Tools, "the final call offers no tools")
			assertStarts(t, append(reqs, lk.calls()...))
			time.Sleep(5 * time.Second) // an abandoned tool finishes
		})
	}
}

// A 429 with retry-after-ms: waited exactly, within the budget.
func TestRetryAfterMsHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &provider{Turns: 0, ToolFor: func(int) string { return "lookup" }, Reject: func(n int) (int, http.Header) {
			if n == 1 {
				return http.StatusTooManyRequests, http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"3"}}
			}
			return 0, nil
		}}
		lk := &lookup{name: "lookup", latencyFor: func(int) time.Duration { return 0 }}
		a := newAgent(t, newBudget(t, 0), p, lk, "http://provider.test/v1", memTransport{H: p}, nil)
		res, _, err := a.run(context.Background(), budget)
		require.NoError(t, err)
		assert.Equal(t, "answer from 0 results", res.Answer.Content)
		reqs := p.Requests()
		require.Len(t, reqs, 2)
		assert.Equal(t, 250*time.Millisecond, reqs[1].At.Sub(reqs[0].At), "retry-after-ms, exactly, not Retry-After's 3s")
	})
}

// A 429 whose retry-after-ms does not fit: no wait, no request after the
// deadline, the typed stop naming the model step.
func TestRetryAfterMsBeyondBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &provider{Turns: 0, ToolFor: func(int) string { return "lookup" }, Reject: func(int) (int, http.Header) {
			return http.StatusTooManyRequests, http.Header{"Retry-After-Ms": {"2000"}}
		}}
		lk := &lookup{name: "lookup", latencyFor: func(int) time.Duration { return 0 }}
		a := newAgent(t, newBudget(t, 0), p, lk, "http://provider.test/v1", memTransport{H: p}, nil)
		_, took, err := a.run(context.Background(), budget)
		stop := assertTypedStop(t, err, "chat gpt-4o")
		assert.Equal(t, deadline.ReasonRetryAfterTooLong, stop.Reason)
		assert.Equal(t, 2*time.Second, stop.Wait)
		assert.Zero(t, took, "nothing slept")
		assert.Len(t, p.Requests(), 1)
	})
}

// Eino's own retry (ModelRetryConfig), made budget-aware: it waits the
// provider's retry-after-ms when it fits, and does not sleep one that does
// not; the run then ends with the typed stop.
func TestEinoRetryConfigConsultsBudget(t *testing.T) {
	for _, tc := range []struct {
		name     string
		waitMs   string
		wantErr  bool
		requests int
	}{
		{"fits", "300", false, 2},
		{"does not fit", "2000", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := &provider{Turns: 0, ToolFor: func(int) string { return "lookup" }, Reject: func(n int) (int, http.Header) {
					if n == 1 {
						return http.StatusTooManyRequests, http.Header{"Retry-After-Ms": {tc.waitMs}}
					}
					return 0, nil
				}}
				lk := &lookup{name: "lookup", latencyFor: func(int) time.Duration { return 0 }}
				b := newBudget(t, 0, func(c *otelbudgeteino.Config) { c.Model.MaxAttempts = 1 })
				a := newAgent(t, b, p, lk, "http://provider.test/v1", memTransport{H: p}, b.ModelRetryConfig(3))
				res, took, err := a.run(context.Background(), budget)
				reqs := p.Requests()
				require.Len(t, reqs, tc.requests)
				if tc.wantErr {
					stop := assertTypedStop(t, err, "chat gpt-4o")
					assert.Equal(t, deadline.ReasonRetryAfterTooLong, stop.Reason)
					assert.Zero(t, took, "the wait that did not fit was not slept")
					return
				}
				require.NoError(t, err)
				assert.NotNil(t, res.Answer)
				assert.Equal(t, 300*time.Millisecond, reqs[1].At.Sub(reqs[0].At))
			})
		})
	}
}

// When too little is left for another model call, the run ends with the
// typed stop naming the model step, and the call never starts.
func TestModelRefusedBelowFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, lk := tenTurns(100, false)
		a := newAgent(t, newBudget(t, 0), p, lk, "http://provider.test/v1", memTransport{H: p}, nil)
		_, _, err := a.run(context.Background(), floor)
		stop := assertTypedStop(t, err, "chat gpt-4o")
		assert.Equal(t, deadline.ReasonRefused, stop.Reason)
		assert.Empty(t, p.Requests())
	})
}

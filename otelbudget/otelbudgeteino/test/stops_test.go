package test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cloudwego/eino/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgeteino"
)

// runKind runs the agent of p and lk once under budget, with the ADK
// ChatModelAgent or the react agent, and returns its result and error.
func runKind(t *testing.T, kind string, ctx context.Context, b *otelbudgeteino.Budget, p *provider, lk *lookup) (*otelbudgeteino.Result, error) {
	t.Helper()
	if kind == "adk" {
		a := newAgent(t, b, p, lk, "http://provider.test/v1", memTransport{H: p}, nil)
		return b.Run(ctx, deadline.New(budget), a.agent, []*schema.Message{schema.UserMessage("find it")})
	}
	agent := newReact(t, b, p, lk)
	rctx, run, err := b.Start(ctx, deadline.New(budget), "react")
	require.NoError(t, err)
	msg, err := agent.Generate(rctx, []*schema.Message{schema.UserMessage("find it")})
	return run.End(msg, err)
}

// A caller's cancel at 150 ms, in a tool call: the run's error is the
// context's (errors.Is context.Canceled) and the typed stop with
// ReasonCanceled, not a deadline.
func TestCallerCancelIsTyped(t *testing.T) {
	for _, kind := range []string{"adk", "react"} {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p, lk := tenTurns(2, false) // the second tool call takes 5 s, honouring its context
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				time.AfterFunc(150*time.Millisecond, cancel)
				res, err := runKind(t, kind, ctx, newBudget(t, 0), p, lk)
				require.Error(t, err)
				assert.ErrorIs(t, err, context.Canceled)
				assert.NotErrorIs(t, err, context.DeadlineExceeded)
				stop, ok := errors.AsType[*deadline.StopError](err)
				require.True(t, ok, "%v", err)
				assert.Equal(t, deadline.ReasonCanceled, stop.Reason)
				assert.Same(t, stop, res.Stop, "Result.Stop is the cancel's stop")
				time.Sleep(time.Second) // Eino unwinds
			})
		})
	}
}

// 429s until the model policy's attempts run out: the typed stop says
// attempts_exhausted, with the attempts the provider saw.
func TestExhaustedRetriesAreTyped(t *testing.T) {
	for _, kind := range []string{"adk", "react"} {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := &provider{Turns: 1, ToolFor: func(int) string { return "lookup" }, Reject: func(int) (int, http.Header) {
					return http.StatusTooManyRequests, http.Header{"Retry-After-Ms": {"10"}}
				}}
				lk := &lookup{name: "lookup", latencyFor: func(int) time.Duration { return 0 }}
				_, err := runKind(t, kind, context.Background(), newBudget(t, 0), p, lk)
				stop, ok := errors.AsType[*deadline.StopError](err)
				require.True(t, ok, "%v", err)
				assert.Equal(t, deadline.ReasonExhausted, stop.Reason)
				assert.Equal(t, 3, stop.Attempts)
				assert.Len(t, p.Requests(), 3)
				assert.Equal(t, "chat gpt-4o", stop.Name)
				assert.ErrorIs(t, err, deadline.ErrAttemptsExhausted)
				time.Sleep(time.Second)
			})
		})
	}
}

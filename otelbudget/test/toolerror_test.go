package test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/agentrun"
)

// An agent's tool errors reach an attempt span of the observer with their
// own error.type, not "_OTHER" (nor the type of the tool lease's cause):
// here a step ("delegate") whose operation runs a tool under a lease of its
// own, shorter than the step's attempt, as a sub-agent does. The tool that
// does not return is abandoned (agentrun.AbandonedError: "tool_abandoned"),
// the tool that panics is recovered (agentrun.PanicError: "tool_panic");
// the step's attempt itself ended with an error, not a limit.
func TestAgentToolErrorTypes(t *testing.T) {
	for _, tc := range []struct {
		want string
		tool func(context.Context) (string, error)
	}{
		{"tool_abandoned", func(context.Context) (string, error) {
			time.Sleep(time.Second) // ignores its context
			return "late", nil
		}},
		{"tool_panic", func(context.Context) (string, error) { panic("tool bug") }},
	} {
		t.Run(tc.want, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				run := agentrun.NewRun(deadline.New(time.Minute), agentrun.Config{})
				p := deadline.Policy{Name: "delegate", MaxAttempts: 1, Hooks: h.obs.Hooks()}
				_, err := deadline.Do(context.Background(), run.Deadline(), p, func(ctx context.Context, _ deadline.AttemptInfo) (string, error) {
					// The sub-agent's tool lease: its own limit, not the step's.
					ctx, cancel := context.WithTimeoutCause(ctx, 100*time.Millisecond, errors.New("the sub-agent's tool lease ended"))
					defer cancel()
					v, _, err := agentrun.CallTool(ctx, run, agentrun.ToolCall{Name: "lookup", Lease: 100 * time.Millisecond}, tc.tool)
					return v, err
				})
				require.Error(t, err)
				run.WaitTools()
				h.requireAllEnded(t)

				attempts := h.spans("delegate attempt")
				require.Len(t, attempts, 1)
				assert.Equal(t, "error", strAttr(t, attempts[0], "deadline.attempt.ended_by"))
				assert.Equal(t, tc.want, strAttr(t, attempts[0], semconv.ErrorTypeKey))
			})
		})
	}
}

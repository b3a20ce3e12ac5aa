package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/firebase/genkit/go/ai"

	"github.com/deadlinebudget/budget/otelbudget/agenttest"
)

// newProvider is the fake OpenAI-compatible chat completions endpoint
// (agenttest's, shared with the agent frameworks' tests): it asks for the
// tool "lookup" until the conversation holds turns tool results, then
// answers; a request offering no tools (the reserve's final call) is
// answered from what it has. Each answer takes latency.
func newProvider(turns int, latency time.Duration) *agenttest.Provider {
	return &agenttest.Provider{
		Turns: turns, Latency: latency, Model: "fake-1",
		Args: func(turn int) string { return fmt.Sprintf(`{"q":"topic %d"}`, turn) },
		Answer: func(results int, final bool) string {
			if final {
				return fmt.Sprintf("a partial summary of %d sources (out of time)", results)
			}
			return fmt.Sprintf("a summary of %d sources", results)
		},
	}
}

// tool is "lookup": each call takes latency, honouring its context, but
// call slowAt (1-based) takes slow and ignores its context.
type tool struct {
	latency time.Duration
	slowAt  int
	slow    time.Duration
	n       atomic.Int32
}

type lookupIn struct {
	Q string `json:"q"`
}

func (t *tool) lookup(tc *ai.ToolContext, in lookupIn) (string, error) {
	if int(t.n.Add(1)) == t.slowAt {
		time.Sleep(t.slow) // hangs, whatever its context says
		return "late notes on " + in.Q, nil
	}
	select {
	case <-time.After(t.latency):
		return "notes on " + in.Q, nil
	case <-tc.Done():
		return "", context.Cause(tc)
	}
}

package test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cloudwego/eino/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/agenttest"
)

// One adk.ChatModelAgent shared by concurrent runs races inside Eino (with
// or without this package: the "bare" scenario has none of it); one react
// agent shared by concurrent runs does not, nor do concurrent runs of one
// Budget over an ADK agent built per run (docs/agents.md). Each scenario
// runs in a child process under the race detector, which reports a race by
// printing it and failing the child.
func TestConcurrentRuns(t *testing.T) {
	if !raceEnabled {
		t.Skip("needs the race detector: go test -race")
	}
	for _, tc := range []struct {
		scenario string
		races    bool
	}{
		{"bare-adk-shared", true},
		{"adk-shared", true},
		{"adk-per-run", false},
		{"react-shared", false},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			out, err := agenttest.RunChild("TestConcurrentRunsScenario", tc.scenario)
			if tc.races {
				require.Error(t, err)
				assert.Contains(t, out, "DATA RACE")
				return
			}
			require.NoError(t, err, out)
			assert.NotContains(t, out, "DATA RACE")
		})
	}
}

// TestConcurrentRunsScenario is the child's side of TestConcurrentRuns:
// eight runs at once, in real time, against the in-memory provider.
func TestConcurrentRunsScenario(t *testing.T) {
	scenario := agenttest.ChildScenario()
	if scenario == "" {
		t.Skip("run by TestConcurrentRuns in a child process")
	}
	newParts := func() (*provider, *lookup) {
		return &provider{Turns: 2, Latency: time.Millisecond}, &lookup{name: "lookup", latencyFor: func(int) time.Duration { return time.Millisecond }}
	}
	b := newBudget(t, 0)
	p, lk := newParts()
	var shared *agentSetup
	switch scenario {
	case "bare-adk-shared":
		shared = newAgent(t, nil, p, lk, "http://provider.test/v1", memTransport{H: p}, nil)
	case "adk-shared":
		shared = newAgent(t, b, p, lk, "http://provider.test/v1", memTransport{H: p}, nil)
	}
	react := newReact(t, b, p, lk)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			msgs := []*schema.Message{schema.UserMessage("find it")}
			switch scenario {
			case "bare-adk-shared":
				_, _, _ = shared.runDefault(10 * time.Second)
			case "adk-shared":
				_, _ = b.Run(context.Background(), deadline.New(10*time.Second), shared.agent, msgs)
			case "adk-per-run":
				p, lk := newParts()
				a := newAgent(t, b, p, lk, "http://provider.test/v1", memTransport{H: p}, nil)
				res, err := b.Run(context.Background(), deadline.New(10*time.Second), a.agent, msgs)
				assert.NoError(t, err)
				assert.NotNil(t, res.Answer)
			case "react-shared":
				ctx, run, err := b.Start(context.Background(), deadline.New(10*time.Second), "react")
				require.NoError(t, err)
				msg, err := react.Generate(ctx, msgs)
				res, err := run.End(msg, err)
				assert.NoError(t, err)
				assert.NotNil(t, res.Answer)
			}
		})
	}
	wg.Wait()
}

package test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/core"
	"github.com/firebase/genkit/go/genkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/agenttest"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetgenkit"
)

// TestToolPanicChild runs each panic scenario in a child process (this
// test binary, TestToolPanicScenario selected by an environment variable),
// where a panic that escaped kills the process. Genkit alone does not
// recover a tool's panic (its tool goroutine has no recover): the "bare"
// child dies. Under this package the child exits 0: an immediate panic is
// the error Genkit returns for any failing tool (an INTERNAL
// *core.GenkitError, "tool \"lookup\" failed: ..."), the same kind as the
// "bare-error" child's tool that returns an error; a panic after the tool
// was abandoned leaves the run's own outcome, and is recorded in
// Result.Abandoned.
func TestToolPanicChild(t *testing.T) {
	for _, tc := range []struct {
		scenario, want string
		dies           bool
	}{
		{scenario: "bare", dies: true},
		{scenario: "bare-error", want: "error kind: *core.GenkitError INTERNAL_SERVER_ERROR: tool \"lookup\" failed: error calling tool lookup: boom"},
		{scenario: "wrapped", want: "error kind: *core.GenkitError INTERNAL_SERVER_ERROR: tool \"lookup\" failed: error calling tool lookup: execute_tool lookup: not retryable (after 1 attempt): agentrun: tool \"lookup\" panicked: boom"},
		{scenario: "wrapped-late", want: "error kind: budget stop execute_tool lookup; late panic recorded: late boom"},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			out, err := agenttest.RunChild("TestToolPanicScenario", tc.scenario)
			if tc.dies {
				require.Error(t, err, "Genkit alone lets the tool's panic kill the process:\n%s", out)
				assert.Contains(t, out, "panic: boom")
				return
			}
			require.NoError(t, err, "the child process died:\n%s", out)
			assert.Contains(t, out, tc.want)
			assert.Contains(t, out, "PASS: TestToolPanicScenario", "the child's goleak check passed")
		})
	}
}

// TestToolPanicScenario is the child's side of TestToolPanicChild.
func TestToolPanicScenario(t *testing.T) {
	scenario := agenttest.ChildScenario()
	if scenario == "" {
		t.Skip("run by TestToolPanicChild in a child process")
	}
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		prov := &provider{Turns: 3, Latency: 10 * time.Millisecond}
		plain := scenario == "bare" || scenario == "bare-error"
		g := genkit.Init(ctx, genkit.WithPlugins(newOAI(memTransport{H: prov}, fakeURL, plain)))
		fn := func(tc *ai.ToolContext, in lookupIn) (string, error) {
			switch scenario {
			case "bare-error":
				return "", errors.New("boom")
			case "wrapped-late":
				time.Sleep(2 * time.Second)
				panic("late boom")
			}
			panic("boom")
		}
		var res *otelbudgetgenkit.Result
		var err error
		if plain {
			genkit.DefineTool(g, "lookup", "panics", fn)
			rctx, rcancel := context.WithTimeout(ctx, time.Second)
			_, err = genkit.Generate(rctx, g, append(tenTurns(), ai.WithModelName("fake/fake-1"))...)
			rcancel()
		} else {
			_, derr := otelbudgetgenkit.DefineTool(g, "lookup", "panics", fn)
			require.NoError(t, derr)
			res, err = agent(t, 0, nil).Run(deadline.NewContext(ctx, deadline.New(time.Second)), g, tenTurns()...)
			res.WaitTools()
		}
		report(err, res)
	})
	goleak.VerifyNone(t)
}

// report prints the kind of error a run returned.
func report(err error, res *otelbudgetgenkit.Result) {
	var ge *core.GenkitError
	stop, isStop := errors.AsType[*deadline.StopError](err)
	switch {
	case err == nil:
		fmt.Println("error kind: none")
	case isStop:
		msg := "error kind: budget stop " + stop.Name
		for _, a := range res.Abandoned {
			if a.Panic != nil {
				msg += fmt.Sprintf("; late panic recorded: %v", a.Panic)
			}
		}
		fmt.Println(msg)
	case errors.As(err, &ge):
		fmt.Printf("error kind: %T %s: %s\n", ge, ge.Status, ge.Message)
	default:
		fmt.Printf("error kind: other %T: %v\n", err, err)
	}
}

package agentrun_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/agentrun"
)

// A tool that ignores its context is abandoned when its lease ends; a
// tool's panic comes back as an error, never on a goroutine nobody waits
// for. The reserve rule decides whether the next model call is the final
// one.
func ExampleCallTool() {
	run := agentrun.NewRun(deadline.New(time.Second), agentrun.Config{Reserve: 200 * time.Millisecond})

	lease, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	release := make(chan struct{})
	_, abandoned, err := agentrun.CallTool(lease, run, agentrun.ToolCall{Name: "search", CallID: "call_1"},
		func(context.Context) (string, error) {
			<-release // ignores its context
			return "late", nil
		})
	fmt.Println("abandoned:", abandoned, errors.Is(err, context.DeadlineExceeded))

	_, _, err = agentrun.CallTool(context.Background(), run, agentrun.ToolCall{Name: "boom"},
		func(context.Context) (string, error) { panic("boom") })
	var pe *agentrun.PanicError
	fmt.Println("panic:", errors.As(err, &pe), pe.Value)

	fmt.Println("final call now:", run.NextModelCall(20*time.Millisecond))

	close(release)
	res := agentrun.NewResult(run, "", false, nil)
	res.WaitTools()
	fmt.Println(len(res.Abandoned), res.Abandoned[0].Tool, res.ToolCalls)
	// Output:
	// abandoned: true true
	// panic: true boom
	// final call now: false
	// 1 search 2
}

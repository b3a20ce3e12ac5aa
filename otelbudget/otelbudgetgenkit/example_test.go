package otelbudgetgenkit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetgenkit"
)

type query struct {
	Q string `json:"q"`
}

// A Genkit agent whose tool hangs, ignoring its context, inside one 1 s
// budget: the tool is abandoned at its lease, and the 400 ms reserve pays
// for a final model call, so the run answers well before its deadline. The
// model here is an in-process stand-in that asks for the tool until it is
// offered none; with a provider, it is a plugin's model (compat_oai over
// openai-go, say, with a deadlinehttp.Transport and openai-go's retries
// off: docs/agents.md).
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // genkit.Init's signal goroutine ends with it
	g := genkit.Init(ctx)
	genkit.DefineModel(g, "demo/model", &ai.ModelOptions{Supports: &ai.ModelSupports{Tools: true, Multiturn: true}},
		func(ctx context.Context, req *ai.ModelRequest, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
			if len(req.Tools) > 0 {
				return &ai.ModelResponse{Message: &ai.Message{Role: ai.RoleModel, Content: []*ai.Part{
					ai.NewToolRequestPart(&ai.ToolRequest{Name: "search", Ref: "call_1", Input: map[string]any{"q": "deadlines"}}),
				}}}, nil
			}
			return &ai.ModelResponse{Message: ai.NewModelTextMessage("what I have so far")}, nil
		})
	release := make(chan struct{})
	_, err := otelbudgetgenkit.DefineTool(g, "search", "searches", func(tc *ai.ToolContext, in query) (string, error) {
		<-release // hangs, whatever its context says
		return "too late", nil
	}, otelbudgetgenkit.ReadOnly())
	if err != nil {
		fmt.Println(err)
		return
	}

	agent, err := otelbudgetgenkit.New(otelbudgetgenkit.Config{
		Agent:      "researcher",
		Model:      "demo/model",
		Provider:   "openai",
		Budget:     time.Second, // decided once, when Run starts
		ToolPolicy: deadline.Policy{MaxAttempts: 2, Floor: 20 * time.Millisecond},
		Reserve:    400 * time.Millisecond,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	start := time.Now()
	res, err := agent.Run(ctx, g, ai.WithPrompt("what do deadlines do?"), ai.WithTools(ai.ToolName("search")))
	took := time.Since(start)
	close(release)
	res.WaitTools()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Answer.Text())
	fmt.Println("cut short by:", res.Stop.Name, res.Stop.Reason, errors.Is(res.Stop, context.DeadlineExceeded))
	fmt.Println("abandoned:", res.Abandoned[0].Tool, res.Abandoned[0].CallID)
	fmt.Println("inside the budget:", took < time.Second)
	// Output:
	// what I have so far
	// cut short by: execute_tool search deadline_exceeded true
	// abandoned: search call_1
	// inside the budget: true
}

// Without a reserve, the run ends with the stop of the step the budget
// stopped, the *deadline.StopError itself, whatever Genkit wrapped.
func ExampleAgent_Run_stop() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := genkit.Init(ctx)
	genkit.DefineModel(g, "demo/model", &ai.ModelOptions{Supports: &ai.ModelSupports{Tools: true, Multiturn: true}},
		func(ctx context.Context, req *ai.ModelRequest, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
			return &ai.ModelResponse{Message: ai.NewModelTextMessage("hello")}, nil
		})
	agent, err := otelbudgetgenkit.New(otelbudgetgenkit.Config{Model: "demo/model"})
	if err != nil {
		fmt.Println(err)
		return
	}
	// 10 ms left is below the model calls' 20 ms floor: nothing is sent.
	run := deadline.NewContext(ctx, deadline.New(10*time.Millisecond))
	_, err = agent.Run(run, g, ai.WithPrompt("hi"))
	stop, ok := errors.AsType[*deadline.StopError](err)
	fmt.Println(ok, stop.Name, stop.Reason, errors.Is(err, context.DeadlineExceeded))
	fmt.Println(strings.HasPrefix(err.Error(), "chat model: refused"))
	// Output:
	// true chat model refused true
	// true
}

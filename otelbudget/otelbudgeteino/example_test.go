package otelbudgeteino_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/genai"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgeteino"
)

// An ADK ChatModelAgent whose tool turns slow: with a reserve, the tool's
// turn is cut before the deadline and the model answers in the reserve.
func Example() {
	b, err := otelbudgeteino.New(otelbudgeteino.Config{
		Agent: "planner", Provider: genai.ProviderOpenAI, ModelName: "gpt-4o",
		Reserve: 300 * time.Millisecond, // kept back for a final model call
	})
	if err != nil {
		panic(err)
	}
	agent, err := adk.NewChatModelAgent(context.Background(), &adk.ChatModelAgentConfig{
		Name: "planner", Description: "looks things up",
		Model: b.Model(scripted{}), // every model call leased from the run's deadline
		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{
			Tools:               []tool.BaseTool{slowLookup{}},
			ToolCallMiddlewares: []compose.ToolMiddleware{b.ToolMiddleware()}, // and every tool call
		}},
	})
	if err != nil {
		panic(err)
	}
	res, err := b.Run(context.Background(), deadline.New(time.Second), agent,
		[]adk.Message{schema.UserMessage("When was the bridge built?")})
	fmt.Println(err, res.Final, res.Answer.Content)
	fmt.Println(res.Stop.Name, res.Stop.Reason)
	// Output:
	// <nil> true I could not look it up in time: probably around 1900.
	// execute_tool lookup deadline_exceeded
}

// The typed stop: without a reserve, the same run ends with the stop that
// names the step, whatever Eino wrapped it in.
func ExampleBudget_Run_stop() {
	b, err := otelbudgeteino.New(otelbudgeteino.Config{Agent: "planner", ModelName: "gpt-4o"})
	if err != nil {
		panic(err)
	}
	agent, err := adk.NewChatModelAgent(context.Background(), &adk.ChatModelAgentConfig{
		Name: "planner", Description: "looks things up", Model: b.Model(scripted{}),
		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{
			Tools: []tool.BaseTool{slowLookup{}}, ToolCallMiddlewares: []compose.ToolMiddleware{b.ToolMiddleware()},
		}},
	})
	if err != nil {
		panic(err)
	}
	_, err = b.Run(context.Background(), deadline.New(time.Second), agent,
		[]adk.Message{schema.UserMessage("When was the bridge built?")})
	stop, _ := errors.AsType[*deadline.StopError](err)
	fmt.Println(stop.Name, stop.Reason, errors.Is(err, context.DeadlineExceeded))
	// Output:
	// execute_tool lookup deadline_exceeded true
}

// scripted stands in for a model client: with tools it asks for a lookup,
// without (the final call) it answers.
type scripted struct{ tools []*schema.ToolInfo }

func (s scripted) Generate(_ context.Context, _ []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	if len(s.tools) == 0 {
		return schema.AssistantMessage("I could not look it up in time: probably around 1900.", nil), nil
	}
	return schema.AssistantMessage("", []schema.ToolCall{{ID: "call_1", Function: schema.FunctionCall{Name: "lookup", Arguments: `{}`}}}), nil
}

func (s scripted) Stream(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	m, err := s.Generate(ctx, in, opts...)
	return schema.StreamReaderFromArray([]*schema.Message{m}), err
}

func (s scripted) WithTools(tools []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return scripted{tools: tools}, nil
}

// slowLookup takes five seconds, honouring its context.
type slowLookup struct{}

func (slowLookup) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{Name: "lookup", Desc: "looks a fact up"}, nil
}

func (slowLookup) InvokableRun(ctx context.Context, _ string, _ ...tool.Option) (string, error) {
	select {
	case <-time.After(5 * time.Second):
		return "1883", nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

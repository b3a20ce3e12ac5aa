package test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cloudwego/eino-ext/components/model/openai"
	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/agentrun"
	"github.com/deadlinebudget/budget/otelbudget/agenttest"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgeteino"
)

// panicky is a tool that panics: at once, or after sleeping 2 s whatever
// its context says (so after the run has abandoned it).
type panicky struct{ late bool }

func (p *panicky) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{Name: "lookup", Desc: "panics", ParamsOneOf: schema.NewParamsOneOfByParams(map[string]*schema.ParameterInfo{
		"q": {Type: schema.String, Desc: "the term", Required: true},
	})}, nil
}

func (p *panicky) InvokableRun(context.Context, string, ...tool.Option) (string, error) {
	if p.late {
		time.Sleep(2 * time.Second)
		panic("late boom")
	}
	panic("boom")
}

// TestToolPanicChild runs each panic scenario in a child process (this
// test binary, TestToolPanicScenario selected by an environment variable):
// a panic that escaped would kill it. The child must exit 0 and print the
// kind of error the run returned: for an immediate panic Eino's own "panic
// error", as Eino returns it for the same tool without this package; for a
// panic after the tool was abandoned, the budget's stop, the late panic
// recorded in Result.Abandoned.
func TestToolPanicChild(t *testing.T) {
	for _, tc := range []struct{ scenario, want string }{
		{"bare-adk", "error kind: eino panic error (*compose.internalError): [NodeRunError] panic error: boom"},
		{"adk", "error kind: eino panic error (*compose.internalError): [NodeRunError] panic error: boom"},
		{"react", "error kind: eino panic error (*compose.internalError): [NodeRunError] panic error: boom"},
		{"adk-late", "error kind: budget stop execute_tool lookup; late panic recorded: late boom; counted 1"},
		{"react-late", "error kind: budget stop execute_tool lookup; late panic recorded: late boom; counted 1"},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			out, err := agenttest.RunChild("TestToolPanicScenario", tc.scenario)
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
	late := scenario == "adk-late" || scenario == "react-late"
	synctest.Test(t, func(t *testing.T) {
		p := &provider{Turns: 3, ToolFor: func(int) string { return "lookup" }, Latency: 10 * time.Millisecond}
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		var b *otelbudgeteino.Budget
		if scenario != "bare-adk" {
			b = newBudget(t, 0, func(c *otelbudgeteino.Config) { c.Observer = otelbudget.New(otelbudget.WithMeterProvider(mp)) })
		}
		counted := func() int64 { return latePanics(t, reader) }
		rt := http.RoundTripper(memTransport{H: p})
		if b != nil {
			rt = b.Transport(rt)
		}
		cm, err := openai.NewChatModel(context.Background(), &openai.ChatModelConfig{
			APIKey: "sk-test", BaseURL: "http://provider.test/v1", Model: "gpt-4o", HTTPClient: &http.Client{Transport: rt},
		})
		require.NoError(t, err)
		tools := compose.ToolsNodeConfig{Tools: []tool.BaseTool{&panicky{late: late}}}
		var mdl model.ToolCallingChatModel = cm
		if b != nil {
			mdl = b.Model(cm)
			tools.ToolCallMiddlewares = []compose.ToolMiddleware{b.ToolMiddleware()}
		}
		msgs := []*schema.Message{schema.UserMessage("find it")}
		var res *otelbudgeteino.Result
		switch scenario {
		case "bare-adk", "adk", "adk-late":
			agent, err := adk.NewChatModelAgent(context.Background(), &adk.ChatModelAgentConfig{
				Name: "planner", Description: "plans", Instruction: "Use lookup.", Model: mdl,
				ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: tools},
			})
			require.NoError(t, err)
			if b == nil {
				a := &agentSetup{agent: agent}
				_, _, err = a.runDefault(budget)
			} else {
				res, err = b.Run(context.Background(), deadline.New(budget), agent, msgs)
			}
			report(err, res, counted)
		case "react", "react-late":
			agent, err := react.NewAgent(context.Background(), &react.AgentConfig{ToolCallingModel: mdl, ToolsConfig: tools})
			require.NoError(t, err)
			ctx, run, err := b.Start(context.Background(), deadline.New(budget), "react")
			require.NoError(t, err)
			msg, err := agent.Generate(ctx, msgs)
			res, err = run.End(msg, err)
			report(err, res, counted)
		}
		time.Sleep(5 * time.Second) // Eino unwinds; the late tool panics
	})
	goleak.VerifyNone(t)
}

// report prints the kind of error a run returned: Eino's panic error
// (its text, "[NodeRunError] panic error: boom, ..."; the type is Eino's
// internal one), or the budget's stop and the late panic it recorded.
func report(err error, res *otelbudgeteino.Result, counted func() int64) {
	stop, isStop := errors.AsType[*deadline.StopError](err)
	switch {
	case err == nil:
		fmt.Println("error kind: none")
	case isStop:
		msg := "error kind: budget stop " + stop.Name
		res.WaitTools()
		for _, a := range res.Abandoned {
			if a.Panic != nil {
				msg += fmt.Sprintf("; late panic recorded: %v", a.Panic)
			}
		}
		if msg != "error kind: budget stop "+stop.Name {
			msg += fmt.Sprintf("; counted %d", counted())
		}
		fmt.Println(msg)
	case strings.Contains(err.Error(), "panic error: boom"):
		fmt.Printf("error kind: eino panic error (%T): %.60s\n", err, err)
	default:
		fmt.Printf("error kind: other %T: %v\n", err, err)
	}
}

// latePanics reads agentrun.MetricToolLatePanics from reader.
func latePanics(t *testing.T, reader *sdkmetric.ManualReader) int64 {
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == agentrun.MetricToolLatePanics {
				for _, dp := range sum.DataPoints {
					n += dp.Value
				}
			}
		}
	}
	return n
}

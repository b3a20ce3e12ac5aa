package test

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cloudwego/eino-ext/components/model/openai"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/agenttest"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgeteino"
)

// TestReserveRule measures, in virtual time, agenttest's reserve cases
// (the same as otelbudgetgenkit's TestReserveRule), 200 runs each, with the
// ADK ChatModelAgent and the react agent: at least 99 % of the runs answer
// (the reserve covers one model call in every case), none returns after
// its deadline, and no call starts with the floor or less left. Before the
// rule (a normal model call started with just over floor + reserve left,
// its lease a few ms, cut, the run ended without an answer) 92–165 runs of
// 200 answered.
func TestReserveRule(t *testing.T) {
	for _, kind := range []string{"adk", "react"} {
		for _, rc := range agenttest.ReserveCases {
			t.Run(kind+"/"+rc.Name, func(t *testing.T) {
				var ta agenttest.ReserveTally
				for _, run := range rc.ReserveDraws() {
					synctest.Test(t, func(t *testing.T) {
						p := &provider{Turns: 10, LatencyOf: run.LatencyOf}
						lk := &lookup{name: "lookup", latencyFor: func(int) time.Duration { return agenttest.ReserveToolLatency }}
						b := newBudget(t, rc.Reserve)
						d := deadline.New(run.Budget)
						var res *otelbudgeteino.Result
						var err error
						if kind == "adk" {
							a := newAgent(t, b, p, lk, "http://provider.test/v1", memTransport{H: p}, nil)
							res, err = b.Run(context.Background(), d, a.agent, []*schema.Message{schema.UserMessage("find it")})
						} else {
							ctx, r, serr := b.Start(context.Background(), d, "react")
							require.NoError(t, serr)
							msg, gerr := newReact(t, b, p, lk).Generate(ctx, []*schema.Message{schema.UserMessage("find it")})
							res, err = r.End(msg, gerr)
						}
						end := time.Now()
						var starts []time.Time
						for _, c := range append(p.Requests(), lk.calls()...) {
							starts = append(starts, c.At)
						}
						ta.Add(d.End(), end, err == nil && res.Answer != nil, starts)
						time.Sleep(time.Second) // Eino unwinds
					})
				}
				t.Logf("%s, %s: %v", kind, rc.Name, &ta)
				assert.GreaterOrEqual(t, ta.Answered, agenttest.ReserveRuns*99/100, "answered")
				assert.LessOrEqual(t, ta.P99(), time.Duration(0), "overshoot p99")
				assert.Zero(t, ta.Refusals, "calls started with the floor or less left")
			})
		}
	}
}

// newReact is the react agent over eino-ext's OpenAI model, budgeted by b.
func newReact(t testing.TB, b *otelbudgeteino.Budget, p *provider, lk *lookup) *react.Agent {
	t.Helper()
	cm, err := openai.NewChatModel(context.Background(), &openai.ChatModelConfig{
		APIKey: "sk-test", BaseURL: "http://provider.test/v1", Model: "gpt-4o",
		HTTPClient: &http.Client{Transport: b.Transport(memTransport{H: p})},
	})
	require.NoError(t, err)
	agent, err := react.NewAgent(context.Background(), &react.AgentConfig{
		ToolCallingModel: b.Model(cm),
		ToolsConfig: compose.ToolsNodeConfig{
			Tools: []tool.BaseTool{lk}, ToolCallMiddlewares: []compose.ToolMiddleware{b.ToolMiddleware()},
		},
		MaxStep: 40,
	})
	require.NoError(t, err)
	return agent
}

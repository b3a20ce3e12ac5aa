package test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"slices"
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
	"github.com/deadlinebudget/budget/otelbudget/otelbudgeteino"
)

// reserveCase is one case of the reserve rule's measurement: a ten-turn
// agent whose tools take exactly 90 ms and whose model answers in 5–30 ms
// (seeded), 20 ms floors, under budget (or, when budgetMax is set, a budget
// drawn in [budget, budgetMax]: the deadline lands mid-run) with reserve.
type reserveCase struct {
	name              string
	budget, budgetMax time.Duration
	reserve           time.Duration
}

var reserveCases = []reserveCase{
	{name: "1s budget, 200ms reserve", budget: time.Second, reserve: 200 * time.Millisecond},
	{name: "300ms budget, 60ms reserve", budget: 300 * time.Millisecond, reserve: 60 * time.Millisecond},
	{name: "deadline mid-run, 60ms reserve", budget: 200 * time.Millisecond, budgetMax: 1100 * time.Millisecond, reserve: 60 * time.Millisecond},
}

// reserveRuns is how many runs each case makes.
const reserveRuns = 200

// TestReserveRule measures, in virtual time, how the reserve is spent
// with the ADK ChatModelAgent and the react agent: at least 99 % of the
// runs answer (the reserve covers one model call in every case), none
// returns after its deadline, and no call starts with the floor or less
// left. Before the rule (a normal model call started with just over floor
// + reserve left, its lease a few ms, cut, the run ended without an answer)
// 138–143 runs of 200 answered at 300 ms/60 ms.
func TestReserveRule(t *testing.T) {
	for _, kind := range []string{"adk", "react"} {
		for _, rc := range reserveCases {
			t.Run(kind+"/"+rc.name, func(t *testing.T) {
				rnd := rand.New(rand.NewPCG(35, uint64(rc.budget)))
				var over []time.Duration
				answered, refusals := 0, 0
				for range reserveRuns {
					budget := rc.budget
					if rc.budgetMax > 0 {
						budget += time.Duration(rnd.Int64N(int64(rc.budgetMax - rc.budget)))
					}
					lat := make([]time.Duration, 64)
					for i := range lat {
						lat[i] = time.Duration(5+rnd.IntN(26)) * time.Millisecond
					}
					synctest.Test(t, func(t *testing.T) {
						p := &provider{Turns: 10, ToolFor: func(int) string { return "lookup" }, LatencyOf: func(n int) time.Duration { return lat[n%len(lat)] }}
						lk := &lookup{name: "lookup", latencyFor: func(int) time.Duration { return 90 * time.Millisecond }}
						b := newBudget(t, rc.reserve)
						d := deadline.New(budget)
						var answer *schema.Message
						var err error
						if kind == "adk" {
							a := newAgent(t, b, p, lk, "http://provider.test/v1", memTransport{H: p}, nil)
							res, rerr := b.Run(context.Background(), d, a.agent, []*schema.Message{schema.UserMessage("find it")})
							answer, err = res.Answer, rerr
						} else {
							agent := newReact(t, b, p, lk)
							ctx, run, serr := b.Start(context.Background(), d, "react")
							require.NoError(t, serr)
							msg, gerr := agent.Generate(ctx, []*schema.Message{schema.UserMessage("find it")})
							res, rerr := run.End(msg, gerr)
							answer, err = res.Answer, rerr
						}
						over = append(over, time.Since(d.End()))
						if err == nil && answer != nil {
							answered++
						}
						for _, c := range append(p.Requests(), lk.calls()...) {
							// The run's time left when the call started (the
							// request's own deadline is its lease).
							if !c.HasBudget || d.End().Sub(c.At) <= floor {
								refusals++
							}
						}
						time.Sleep(time.Second) // Eino unwinds
					})
				}
				slices.Sort(over)
				p99 := over[int(0.99*float64(len(over)-1))]
				t.Logf("%s, %s: answered %d/%d; overshoot p99 %v (max %v); calls started with <= floor left %d",
					kind, rc.name, answered, reserveRuns, p99, over[len(over)-1], refusals)
				assert.GreaterOrEqual(t, answered, reserveRuns*99/100, "answered")
				assert.LessOrEqual(t, p99, time.Duration(0), "overshoot p99")
				assert.Zero(t, refusals, "calls started with the floor or less left")
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

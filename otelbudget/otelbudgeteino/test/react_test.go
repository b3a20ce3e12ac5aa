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
)

// The react agent (flow/agent/react), run through Budget.Start and Run.End
// around its Generate: the same budget, the same typed stop, the same
// answer from the reserve.
func TestReactAgent(t *testing.T) {
	for _, reserve := range []time.Duration{0, 200 * time.Millisecond} {
		synctest.Test(t, func(t *testing.T) {
			p, lk := tenTurns(4, true)
			b := newBudget(t, reserve)
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
			start := time.Now()
			ctx, run, err := b.Start(context.Background(), deadline.New(budget), "react")
			require.NoError(t, err)
			msg, err := agent.Generate(ctx, []*schema.Message{schema.UserMessage("find it")})
			res, err := run.End(msg, err)
			assert.LessOrEqual(t, time.Since(start), budget)
			require.Len(t, res.Abandoned, 1)
			if reserve == 0 {
				assertTypedStop(t, err, "execute_tool lookup")
			} else {
				require.NoError(t, err)
				assert.True(t, res.Final)
				assert.Equal(t, "final answer from 4 results", res.Answer.Content)
			}
			assertStarts(t, append(p.Requests(), lk.calls()...))
			time.Sleep(5 * time.Second)
		})
	}
}

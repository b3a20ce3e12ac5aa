package test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/cloudwego/eino-ext/components/model/openai"
	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgeteino"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// lookup is a real Eino tool: each call takes the latency latencyFor gives
// its call number, honouring its context, or, when ignoreCtx says so for
// that call, sleeping it out whatever the context says.
type lookup struct {
	name       string
	latencyFor func(n int) time.Duration
	ignoreCtx  func(n int) bool

	mu       sync.Mutex
	n        int
	starts   []callStart
	finished int
}

func (l *lookup) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{Name: l.name, Desc: "looks a term up", ParamsOneOf: schema.NewParamsOneOfByParams(map[string]*schema.ParameterInfo{
		"q": {Type: schema.String, Desc: "the term", Required: true},
	})}, nil
}

func (l *lookup) InvokableRun(ctx context.Context, _ string, _ ...tool.Option) (string, error) {
	d, ok := deadline.FromContext(ctx)
	l.mu.Lock()
	l.n++
	n := l.n
	l.starts = append(l.starts, callStart{What: l.name, At: time.Now(), Remaining: d.Remaining(), HasBudget: ok})
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.finished++
		l.mu.Unlock()
	}()
	lat := l.latencyFor(n)
	if l.ignoreCtx != nil && l.ignoreCtx(n) {
		time.Sleep(lat)
		return "late result", nil
	}
	t := time.NewTimer(lat)
	defer t.Stop()
	select {
	case <-t.C:
		return "result", nil
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

func (l *lookup) calls() []callStart {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]callStart(nil), l.starts...)
}

// agentSetup is one agent: the fake provider, its tool, and the ADK
// ChatModelAgent over eino-ext's OpenAI model, budgeted by b (nil: Eino's
// defaults, nothing of ours).
type agentSetup struct {
	p     *provider
	tool  *lookup
	agent adk.Agent
	b     *otelbudgeteino.Budget
}

// newAgent builds the agent. rt is the provider's transport (memTransport
// in a bubble, nil for base's loopback URL).
func newAgent(t testing.TB, b *otelbudgeteino.Budget, p *provider, lk *lookup, baseURL string, rt http.RoundTripper, retry *adk.ModelRetryConfig) *agentSetup {
	t.Helper()
	ctx := context.Background()
	if rt == nil {
		rt = http.DefaultTransport
	}
	if b != nil {
		rt = b.Transport(rt)
	}
	cm, err := openai.NewChatModel(ctx, &openai.ChatModelConfig{
		APIKey: "sk-test", BaseURL: baseURL, Model: "gpt-4o",
		HTTPClient: &http.Client{Transport: rt},
	})
	require.NoError(t, err)
	tools := compose.ToolsNodeConfig{Tools: []tool.BaseTool{lk}}
	var mdl model.ToolCallingChatModel = cm
	if b != nil {
		mdl = b.Model(cm)
		tools.ToolCallMiddlewares = []compose.ToolMiddleware{b.ToolMiddleware()}
	}
	agent, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
		Name: "planner", Description: "plans with lookups", Instruction: "Use lookup, then answer.",
		Model: mdl, ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: tools}, MaxIterations: 20,
		ModelRetryConfig: retry,
	})
	require.NoError(t, err)
	return &agentSetup{p: p, tool: lk, agent: agent, b: b}
}

// run runs the agent once under a budget, through the Budget.
func (a *agentSetup) run(ctx context.Context, budget time.Duration) (*otelbudgeteino.Result, time.Duration, error) {
	start := time.Now()
	res, err := a.b.Run(ctx, deadline.New(budget), a.agent, []adk.Message{schema.UserMessage("find it")})
	return res, time.Since(start), err
}

// runDefault runs the agent as a user can today: a context timeout and
// Eino's runner, nothing else.
func (a *agentSetup) runDefault(budget time.Duration) (answer *schema.Message, took time.Duration, err error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	it := adk.NewRunner(ctx, adk.RunnerConfig{Agent: a.agent}).Run(ctx, []adk.Message{schema.UserMessage("find it")})
	for {
		ev, ok := it.Next()
		if !ok {
			break
		}
		if ev.Err != nil {
			err = ev.Err
			continue
		}
		if ev.Output != nil && ev.Output.MessageOutput != nil && ev.Output.MessageOutput.Role == schema.Assistant {
			if m, _ := ev.Output.MessageOutput.GetMessage(); m != nil && len(m.ToolCalls) == 0 {
				answer = m
			}
		}
	}
	return answer, time.Since(start), err
}

func (l *lookup) done() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.finished
}

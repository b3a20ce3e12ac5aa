package test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
	"github.com/firebase/genkit/go/plugins/compat_oai"
	"github.com/openai/openai-go/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/genai"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetgenkit"
)

// The function below is docs/agents.md's Genkit set-up, verbatim
// (TestAgentsDocShowsGenkit), so that the page shows code that compiles and
// that TestAgentsDocGenkitRuns runs.

// agents.md genkit begin

// newAgent is a Genkit agent whose every run gets one deadline: compat_oai
// over openai-go with its retries off and the agents' transport under it,
// a tool marked read-only, and 3 s kept back for a final answer.
func newAgent(ctx context.Context, baseURL string, search ai.ToolFunc[lookupIn, string]) (*genkit.Genkit, *otelbudgetgenkit.Agent, error) {
	g := genkit.Init(ctx, genkit.WithPlugins(&compat_oai.OpenAICompatible{
		Provider: "openai", APIKey: os.Getenv("OPENAI_API_KEY"), BaseURL: baseURL,
		Opts: []option.RequestOption{
			option.WithHTTPClient(&http.Client{Transport: otelbudgetgenkit.Transport(nil, nil)}), // HTTP spans; 429s retried within the budget
			option.WithMaxRetries(0), // no retry of openai-go's: its sleeps ignore the deadline
		},
	}))
	if _, err := otelbudgetgenkit.DefineTool(g, "lookup", "looks a thing up", search, otelbudgetgenkit.ReadOnly()); err != nil {
		return nil, nil, err
	}
	agent, err := otelbudgetgenkit.New(otelbudgetgenkit.Config{
		Agent: "researcher", Model: "openai/gpt-4o", Provider: genai.ProviderOpenAI,
		ModelPolicy: deadline.Policy{MaxAttempts: 3, AttemptTimeout: 20 * time.Second, Floor: 50 * time.Millisecond},
		ToolPolicy:  deadline.Policy{MaxAttempts: 2, AttemptTimeout: 5 * time.Second, Floor: 50 * time.Millisecond},
		Reserve:     3 * time.Second, // a final answer, without tools, when the budget stops a step
	})
	return g, agent, err
}

// agents.md genkit end

// TestAgentsDocGenkitRuns runs the set-up against the fake provider on
// loopback, as docs/agents.md calls it.
func TestAgentsDocGenkitRuns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prov := &provider{Turns: 2, Latency: time.Millisecond}
	srv := httptest.NewServer(prov)
	defer srv.Close()
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	tl := &tool{Latency: time.Millisecond}
	g, agent, err := newAgent(ctx, srv.URL+"/v1/", tl.fn)
	require.NoError(t, err)
	res, err := agent.Run(deadline.NewContext(ctx, deadline.New(30*time.Second)), g,
		ai.WithPrompt("research"), ai.WithTools(ai.ToolName("lookup")), ai.WithMaxTurns(10))
	require.NoError(t, err)
	assert.Equal(t, "answer from 2 results", res.Answer.Text())
}

// TestAgentsDocShowsGenkit keeps docs/agents.md's Genkit block identical
// to the set-up above.
func TestAgentsDocShowsGenkit(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/agents.md")
	require.NoError(t, err)
	src, err := os.ReadFile("agentsdoc_test.go")
	require.NoError(t, err)
	_, recipe, ok := strings.Cut(string(src), "// agents.md genkit begin\n\n")
	require.True(t, ok)
	recipe, _, ok = strings.Cut(recipe, "\n// agents.md genkit end\n")
	require.True(t, ok)
	require.Contains(t, string(doc), "```go\n"+recipe+"```\n", "docs/agents.md shows the set-up")
}

package test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
	"github.com/firebase/genkit/go/plugins/compat_oai"
	"github.com/openai/openai-go/option"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/goleak"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/agenttest"
	"github.com/deadlinebudget/budget/otelbudget/genai"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetgenkit"
)

func TestMain(m *testing.M) {
	// Genkit replaces a global tracer provider that is not the SDK's with
	// one of its own, once; give it one here, outside any bubble (but in
	// the child of TestGlobalProviderBeforeInit that shows why).
	if agenttest.ChildScenario() != noGlobalProvider {
		otel.SetTracerProvider(sdktrace.NewTracerProvider())
	}
	// genkit.Init calls signal.NotifyContext, whose first call starts the
	// runtime's signal goroutine: start it here, outside any bubble. Its
	// other goroutine ends with the context Init is given.
	ctx, cancel := context.WithCancel(context.Background())
	genkit.Init(ctx)
	cancel()
	goleak.VerifyTestMain(m)
}

// provider, the fake OpenAI-compatible provider, and memTransport are
// agenttest's, shared by every agent framework's tests.
type (
	provider     = agenttest.Provider
	memTransport = agenttest.MemTransport
)

// rateLimit answers the first n requests 429 with retry-after-ms wait and
// x-should-retry true, as OpenAI answers a rate limit.
func rateLimit(n int, wait time.Duration) func(int) (int, http.Header) {
	return func(i int) (int, http.Header) {
		if i > n {
			return 0, nil
		}
		return http.StatusTooManyRequests, http.Header{
			"Retry-After-Ms": {strconv.FormatInt(wait.Milliseconds(), 10)}, "X-Should-Retry": {"true"},
		}
	}
}

// starts is when each of p's requests arrived.
func starts(p *provider) []time.Time {
	var out []time.Time
	for _, r := range p.Requests() {
		out = append(out, r.At)
	}
	return out
}

// tool is the agent's "lookup" tool: each call takes Latency (honouring its
// context), but call number SlowAt (1-based, 0: none) takes Slow and
// ignores its context.
type tool struct {
	Latency time.Duration
	SlowAt  int
	Slow    time.Duration

	calls  atomic.Int32
	mu     sync.Mutex
	starts []time.Time
	// underSpan counts the calls that found their execute_tool span in
	// their context (genai.ToolCallFromContext).
	underSpan atomic.Int32
}

type lookupIn struct {
	Q string `json:"q"`
}

func (tl *tool) fn(tc *ai.ToolContext, in lookupIn) (string, error) {
	n := int(tl.calls.Add(1))
	if tc, ok := genai.ToolCallFromContext(tc); ok && tc.Name == "lookup" {
		tl.underSpan.Add(1)
	}
	tl.mu.Lock()
	tl.starts = append(tl.starts, time.Now())
	tl.mu.Unlock()
	if n == tl.SlowAt {
		time.Sleep(tl.Slow) // ignores its context
		return "late " + in.Q, nil
	}
	select {
	case <-time.After(tl.Latency):
		return "result " + in.Q, nil
	case <-tc.Done():
		return "", context.Cause(tc)
	}
}

// setup is one agent: Genkit with compat_oai over openai-go against the
// fake provider, openai-go's retries off and a deadlinehttp.Transport under
// it, and the tool defined with otelbudgetgenkit (or plain Genkit when
// plain is true, for the defaults' comparison).
type setup struct {
	g    *genkit.Genkit
	prov *provider
	tool *tool
}

func newSetup(t testing.TB, ctx context.Context, base http.RoundTripper, baseURL string, prov *provider, tl *tool, plain bool) *setup {
	t.Helper()
	oai := newOAI(base, baseURL, plain)
	g := genkit.Init(ctx, genkit.WithPlugins(oai))
	if plain {
		genkit.DefineTool(g, "lookup", "looks a thing up", tl.fn)
	} else {
		_, err := otelbudgetgenkit.DefineTool(g, "lookup", "looks a thing up", tl.fn, otelbudgetgenkit.ReadOnly())
		require.NoError(t, err)
	}
	return &setup{g: g, prov: prov, tool: tl}
}

// newOAI is compat_oai over openai-go against the fake provider: with
// openai-go's retries off and otelbudgetgenkit.Transport over base, or, when
// plain, openai-go's defaults (two retries) over base.
func newOAI(base http.RoundTripper, baseURL string, plain bool) *compat_oai.OpenAICompatible {
	opts := []option.RequestOption{
		option.WithHTTPClient(&http.Client{Transport: otelbudgetgenkit.Transport(base, nil)}),
		option.WithMaxRetries(0),
	}
	if plain {
		opts = []option.RequestOption{option.WithHTTPClient(&http.Client{Transport: base})}
	}
	return &compat_oai.OpenAICompatible{Provider: "fake", APIKey: "sk-test", BaseURL: baseURL, Opts: opts}
}

// agent returns an Agent with a 20 ms floor for model and tool calls.
func agent(t testing.TB, reserve time.Duration, obs func(*otelbudgetgenkit.Config)) *otelbudgetgenkit.Agent {
	t.Helper()
	cfg := otelbudgetgenkit.Config{
		Agent:       "researcher",
		Model:       "fake/fake-1",
		Provider:    "openai",
		ModelPolicy: deadline.Policy{MaxAttempts: 3, Floor: 20 * time.Millisecond},
		ToolPolicy:  deadline.Policy{MaxAttempts: 1, Floor: 20 * time.Millisecond},
		Reserve:     reserve,
	}
	if obs != nil {
		obs(&cfg)
	}
	a, err := otelbudgetgenkit.New(cfg)
	require.NoError(t, err)
	return a
}

// tenTurns is the run's options: the prompt, the tool, ten turns.
func tenTurns() []ai.GenerateOption {
	return []ai.GenerateOption{ai.WithPrompt("research"), ai.WithTools(ai.ToolName("lookup")), ai.WithMaxTurns(11)}
}

package test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
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
	"github.com/deadlinebudget/budget/otelbudget/genai"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetgenkit"
)

func TestMain(m *testing.M) {
	// Genkit replaces a global tracer provider that is not the SDK's with
	// one of its own, once; give it one here, outside any bubble.
	otel.SetTracerProvider(sdktrace.NewTracerProvider())
	// genkit.Init calls signal.NotifyContext, whose first call starts the
	// runtime's signal goroutine: start it here, outside any bubble. Its
	// other goroutine ends with the context Init is given.
	ctx, cancel := context.WithCancel(context.Background())
	genkit.Init(ctx)
	cancel()
	goleak.VerifyTestMain(m)
}

// provider is a fake OpenAI-compatible chat completions server: it asks for
// the tool "lookup" until the conversation holds Turns tool results, then
// answers; a request without tools (the reserve's final call) is answered
// at once. Each answer takes Latency, honouring the request's context.
type provider struct {
	Turns   int
	Latency time.Duration
	// RateLimit, when > 0, is how many first requests answer 429 with
	// retry-after-ms RetryAfter.
	RateLimit  int
	RetryAfter time.Duration
	// LatencyOf, when set, is the latency of request n (1-based) instead
	// of Latency.
	LatencyOf func(n int) time.Duration

	requests atomic.Int32
	mu       sync.Mutex
	starts   []time.Time // when each request arrived
}

type chatRequest struct {
	Messages []struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	} `json:"messages"`
	Tools []json.RawMessage `json:"tools"`
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := int(p.requests.Add(1))
	p.mu.Lock()
	p.starts = append(p.starts, time.Now())
	p.mu.Unlock()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if n <= p.RateLimit {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("retry-after-ms", strconv.FormatInt(p.RetryAfter.Milliseconds(), 10))
		w.Header().Set("x-should-retry", "true") // as OpenAI answers a rate limit
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
		return
	}
	lat := p.Latency
	if p.LatencyOf != nil {
		lat = p.LatencyOf(n)
	}
	select {
	case <-time.After(lat):
	case <-r.Context().Done():
		return
	}
	results := 0
	for _, m := range req.Messages {
		if m.Role == "tool" {
			results++
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if len(req.Tools) > 0 && results < p.Turns {
		fmt.Fprintf(w, `{"id":"c%d","object":"chat.completion","created":1,"model":"fake-1","system_fingerprint":"fp","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"","tool_calls":[{"id":"call_%d","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"%d\"}"}}]}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, n, results+1, results+1)
		return
	}
	text := fmt.Sprintf("answer from %d results", results)
	if len(req.Tools) == 0 && strings.Contains(string(body), "time budget") {
		text = fmt.Sprintf("final answer from %d results", results)
	}
	fmt.Fprintf(w, `{"id":"c%d","object":"chat.completion","created":1,"model":"fake-1","system_fingerprint":"fp","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":%q}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, n, text)
}

// memTransport serves handler in memory: the same HTTP exchange as over
// loopback, without sockets, so that it runs inside a synctest bubble.
type memTransport struct{ h http.Handler }

func (t memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	if err := req.Context().Err(); err != nil {
		return nil, context.Cause(req.Context())
	}
	resp := rec.Result()
	resp.Request = req
	return resp, nil
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

package sdktest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.uber.org/goleak"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// seen is one request as the fake provider received it.
type seen struct {
	Method, Path string
	Budget       string // Deadline-Budget-Ms
	RetryCount   string // X-Stainless-Retry-Count: the SDK's own attempt number
	Body         string
	At           time.Time
}

// provider is a fake LLM provider on loopback: it records every request
// and answers the n-th (1-based) with answer.
type provider struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newProvider(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *provider {
	t.Helper()
	p := &provider{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.reqs = append(p.reqs, seen{
			Method: r.Method, Path: r.URL.Path, Budget: r.Header.Get(deadlinehttp.DefaultHeader),
			RetryCount: r.Header.Get("X-Stainless-Retry-Count"), Body: string(body), At: time.Now(),
		})
		n := len(p.reqs)
		p.mu.Unlock()
		answer(n, w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// newExampleProvider is a plain loopback server for examples, which have
// no *testing.T.
func newExampleProvider(h http.HandlerFunc) *httptest.Server {
	return httptest.NewServer(h)
}

func (p *provider) seen() []seen {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]seen(nil), p.reqs...)
}

// fail answers like a provider that refuses a request: status, the given
// headers (name, value pairs), and a JSON error body.
func fail(w http.ResponseWriter, status int, body string, headers ...string) {
	for i := 0; i+1 < len(headers); i += 2 {
		w.Header().Add(headers[i], headers[i+1])
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

const (
	openAIRateLimited = `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	openAIServerError = `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`
	openAICompletion  = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	openAIChunk       = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}`

	anthropicOverloaded = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	anthropicMessage    = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-5-5","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}`
)

func completion(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, openAICompletion)
}

func message(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, anthropicMessage)
}

// testPolicy is the policy of the LLM step in these tests: 3 attempts, the
// default 20 ms floor, a short fixed backoff.
func testPolicy() deadline.Policy {
	p := deadline.DefaultPolicy()
	p.Name = "chat"
	p.Backoff = deadline.Backoff{Base: 5 * time.Millisecond, Max: 5 * time.Millisecond, Jitter: deadline.JitterNone}
	return p
}

// budgetClient returns an http.Client whose transport is the budget
// transport over a connection pool of its own, closed when the test ends.
func budgetClient(t *testing.T, opts ...deadlinehttp.Option) *http.Client {
	t.Helper()
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	opts = append([]deadlinehttp.Option{deadlinehttp.WithPolicy(testPolicy())}, opts...)
	return &http.Client{Transport: deadlinehttp.NewTransport(base, opts...)}
}

// openAIClient is the real openai-go client as an agent configures it:
// this project's transport as its HTTP client, its own retries off.
func openAIClient(baseURL string, hc *http.Client) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(baseURL+"/v1/"),
		option.WithAPIKey("sk-test"),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
	)
}

// anthropicClient is the real anthropic-sdk-go client, configured alike.
func anthropicClient(baseURL string, hc *http.Client) anthropic.Client {
	return anthropic.NewClient(
		anthropicoption.WithBaseURL(baseURL+"/"),
		anthropicoption.WithAPIKey("sk-ant-test"),
		anthropicoption.WithHTTPClient(hc),
		anthropicoption.WithMaxRetries(0),
	)
}

func chatParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    openai.ChatModelGPT6_1Sol,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Extract the dates.")},
	}
}

func messageParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropic.ModelClaudeHaiku5_5,
		MaxTokens: 256,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Extract the dates."))},
	}
}

// budgetCtx is an agent run's context: a fresh Deadline of budget.
func budgetCtx(budget time.Duration) context.Context {
	return deadline.NewContext(context.Background(), deadline.New(budget))
}

// requireReleased waits for a stalled handler to return; the guard only
// bounds a failing test.
func requireReleased(t *testing.T, released <-chan struct{}) {
	t.Helper()
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("the server's handler was not released")
	}
}

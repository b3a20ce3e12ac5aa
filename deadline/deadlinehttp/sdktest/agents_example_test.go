package sdktest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgethttp"
)

// The two functions below are docs/agents.md's recipe, verbatim
// (TestAgentsDocShowsRecipe), so that the page shows code that compiles
// and that Example_agents runs.

// agents.md begin

// newLLM returns the agent's OpenAI client: one for the whole agent. Its
// requests run under the run's deadline; only the transport retries them.
func newLLM(obs *otelbudget.Observer, opts ...option.RequestOption) openai.Client {
	hc := &http.Client{Transport: otelbudgethttp.NewTransport(nil, obs)}
	return openai.NewClient(append(opts,
		option.WithHTTPClient(hc), // every request under the run's deadline
		option.WithMaxRetries(0),  // no retry of the SDK's: its sleeps ignore the deadline
	)...)
}

// extract is one step of a run: its policy travels with the request.
func extract(ctx context.Context, llm openai.Client, page string) (string, error) {
	step := deadline.DefaultPolicy()
	step.Name, step.AttemptTimeout = "extract", 2*time.Second
	res, err := llm.Chat.Completions.New(deadlinehttp.WithRequestPolicy(ctx, step), openai.ChatCompletionNewParams{
		Model:    openai.ChatModelGPT6_1Sol,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Extract the dates: " + page)},
	})
	if apiErr, ok := errors.AsType[*openai.Error](err); ok { // the provider's last answer
		if stop, ok := deadlinehttp.StopOf(apiErr.Response); ok { // why the transport did not retry it
			return "", fmt.Errorf("extract: stopped (%s): %w", stop.Reason, err)
		}
		return "", fmt.Errorf("extract: %w", err)
	}
	if err != nil { // no answer: refused below the floor, the deadline, a transport error
		return "", fmt.Errorf("extract: %w", err) // errors.As finds the *deadline.StopError
	}
	return res.Choices[0].Message.Content, nil
}

// agents.md end

// Example_agents runs the recipe against a fake provider: a rate limit the
// transport waits out within the budget, an answer the server says not to
// retry, and a run with less left than the floor, which sends nothing.
func Example_agents() {
	var n atomic.Int32
	srv := newExampleProvider(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			fail(w, http.StatusTooManyRequests, openAIRateLimited, "retry-after-ms", "20", "x-should-retry", "true")
		case 2:
			completion(w)
		default:
			fail(w, http.StatusInternalServerError, openAIServerError, "x-should-retry", "false")
		}
	})
	defer srv.Close()
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	llm := newLLM(otelbudget.New(), option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("sk-test"))

	run := func(budget time.Duration) context.Context {
		return deadline.NewContext(context.Background(), deadline.New(budget))
	}
	out, err := extract(run(5*time.Second), llm, "...")
	fmt.Printf("%q %v\n", out, err)

	_, err = extract(run(5*time.Second), llm, "...")
	apiErr, _ := errors.AsType[*openai.Error](err)
	fmt.Println(apiErr.StatusCode, strings.HasPrefix(err.Error(), "extract: stopped (not_retryable): "))

	_, err = extract(run(10*time.Millisecond), llm, "...")
	stop, _ := errors.AsType[*deadline.StopError](err)
	fmt.Println(stop.Reason, n.Load())
	// Output:
	// "hello" <nil>
	// 500 true
	// refused 3
}

// TestAgentsDocShowsRecipe keeps docs/agents.md's Go block identical to
// the recipe above.
func TestAgentsDocShowsRecipe(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/agents.md")
	require.NoError(t, err)
	src, err := os.ReadFile("agents_example_test.go")
	require.NoError(t, err)
	_, recipe, ok := strings.Cut(string(src), "// agents.md begin\n\n")
	require.True(t, ok)
	recipe, _, ok = strings.Cut(recipe, "\n// agents.md end\n")
	require.True(t, ok)
	require.Contains(t, string(doc), "```go\n"+recipe+"```\n", "docs/agents.md shows the recipe")
}

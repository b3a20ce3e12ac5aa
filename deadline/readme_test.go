package deadline_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/stretchr/testify/require"
)

// Example_readme is the README's usage example, verbatim between the
// markers, so that the README shows code that compiles and runs.
func Example_readme() {
	ctx := context.Background()
	fetch := func(ctx context.Context) (string, error) { return "", errors.New("404 not found") }

	// README begin
	d := deadline.New(time.Second) // the run's one deadline, on the monotonic clock
	p := deadline.Policy{
		Name: "fetch", MaxAttempts: 3,
		AttemptTimeout: 100 * time.Millisecond, // a ceiling: each lease is min(ceiling, remaining - floor)
		Floor:          20 * time.Millisecond,  // at or below this, refuse instead of dialing out
		Backoff:        deadline.Backoff{Base: 50 * time.Millisecond, Max: 400 * time.Millisecond},
	}
	body, err := deadline.Do(ctx, d, p, func(ctx context.Context, a deadline.AttemptInfo) (string, error) {
		return fetch(ctx) // ctx ends when this attempt's lease (a.Granted) does
	})
	var stop *deadline.StopError
	if errors.As(err, &stop) { // stop.Reason: refused, backoff/Retry-After too long, deadline, exhausted, …
		fmt.Printf("%s (attempts: %d): %v\n", stop.Reason, stop.Attempts, stop.Last) // also stop.Remaining
	}
	// README end

	fmt.Printf("body %q\n", body)
	// Output:
	// not_retryable (attempts: 1): 404 not found
	// body ""
}

// TestREADMEUsageIsExample keeps the README's first Go block identical to
// Example_readme, which the compiler and go test check.
func TestREADMEUsageIsExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	src, err := os.ReadFile("readme_test.go")
	require.NoError(t, err)
	require.Equal(t, between(t, string(src), "\t// README begin\n", "\t// README end\n", "\t"),
		between(t, string(readme), "```go\n", "```\n", ""))
}

// between returns the text between the first begin and the next end, with
// indent removed from the start of each line.
func between(t *testing.T, s, begin, end, indent string) string {
	t.Helper()
	_, after, ok := strings.Cut(s, begin)
	require.True(t, ok, "no %q", begin)
	block, _, ok := strings.Cut(after, end)
	require.True(t, ok, "no %q", end)
	lines := strings.Split(block, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, indent)
	}
	return strings.Join(lines, "\n")
}

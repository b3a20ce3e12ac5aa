package deadlinehttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/stretchr/testify/require"
)

// Example_readme is the README's client example (its third Go block),
// verbatim between the markers, so that the README shows code that
// compiles and runs.
func Example_readme() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	ctx, url := context.Background(), srv.URL
	d, p := deadline.New(2*time.Second), deadline.DefaultPolicy()
	client := &http.Client{Transport: deadlinehttp.NewTransport(srv.Client().Transport)}
	var req *http.Request
	var resp *http.Response
	var err error

	// README begin
	ctx = deadlinehttp.WithRequestPolicy(deadline.NewContext(ctx, d), p) // this step's policy, next to the deadline
	req, _ = http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err = client.Do(req) // err: refused below the floor, a transport error, the deadline before an answer
	if err == nil && resp.StatusCode != http.StatusOK {
		if stop, ok := deadlinehttp.StopOf(resp); ok { // the last answer, and why it was not retried
			fmt.Println(resp.Status, stop.Reason, stop.Attempts) // 503 Service Unavailable attempts_exhausted 3
		}
	}
	// README end

	if err == nil {
		resp.Body.Close()
	}
	// Output:
	// 503 Service Unavailable attempts_exhausted 3
}

// TestREADMEClientIsExample keeps the README's third Go block identical to
// Example_readme, which the compiler and go test check.
func TestREADMEClientIsExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	src, err := os.ReadFile("readme_test.go")
	require.NoError(t, err)
	_, got, ok := strings.Cut(string(src), "\t// README begin\n")
	require.True(t, ok)
	got, _, _ = strings.Cut(got, "\t// README end\n")
	require.Contains(t, readmeGoBlocks(t, string(readme)), strings.ReplaceAll("\n"+got, "\n\t", "\n")[1:],
		"README shows Example_readme's code")
}

// readmeGoBlocks returns the contents of the README's Go code blocks, so
// that a test finds an example's block wherever the README puts it.
func readmeGoBlocks(t *testing.T, readme string) []string {
	t.Helper()
	var out []string
	for _, b := range strings.Split(readme, "```go\n")[1:] {
		body, _, ok := strings.Cut(b, "```\n")
		require.True(t, ok, "a Go block of the README is closed")
		out = append(out, body)
	}
	return out
}

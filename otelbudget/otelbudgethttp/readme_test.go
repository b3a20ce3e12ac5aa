package otelbudgethttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgethttp"
)

// Example_readme is the README's HTTP example, verbatim between the markers,
// so that the README shows code that compiles and runs.
func Example_readme() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "budget header present: %t", r.Header.Get(deadlinehttp.DefaultHeader) != "")
	}))
	defer srv.Close()
	ctx, url := context.Background(), srv.URL
	d, p := deadline.New(time.Second), deadline.DefaultPolicy()

	// README begin
	obs := otelbudget.New() // global TracerProvider and MeterProvider unless given
	client := &http.Client{Transport: otelbudgethttp.NewTransport(http.DefaultTransport, obs, deadlinehttp.WithPolicy(p))}
	req, _ := http.NewRequestWithContext(deadline.NewContext(ctx, d), "GET", url, nil)
	resp, err := client.Do(req) // sends Deadline-Budget-Ms: <the attempt's lease>; servers use deadlinehttp.NewHandler
	// README end

	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.CloseIdleConnections()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))
	// Output:
	// 200 budget header present: true
}

// TestREADMEHTTPIsExample keeps the README's second Go block identical to
// Example_readme, which the compiler and go test check.
func TestREADMEHTTPIsExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	src, err := os.ReadFile("readme_test.go")
	require.NoError(t, err)
	_, second, ok := strings.Cut(string(readme), "```go\n")
	require.True(t, ok)
	_, second, ok = strings.Cut(second, "```go\n")
	require.True(t, ok, "README has a second Go block")
	want, _, _ := strings.Cut(second, "```\n")
	_, got, ok := strings.Cut(string(src), "\t// README begin\n")
	require.True(t, ok)
	got, _, _ = strings.Cut(got, "\t// README end\n")
	require.Equal(t, strings.ReplaceAll(got, "\n\t", "\n")[1:], want)
}

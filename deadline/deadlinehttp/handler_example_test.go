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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Observing each admission, as a telemetry layer would: which limit set the
// budget, and why a request was refused.
func ExampleWithAdmission() {
	h, err := deadlinehttp.NewHandler(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
		deadlinehttp.WithMaxBudget(2*time.Second),
		deadlinehttp.WithFloor(20*time.Millisecond),
		deadlinehttp.WithAdmission(func(r *http.Request, a deadlinehttp.Admission) {
			fmt.Printf("%-10q budget %-5v set by %-7v refused: %v\n",
				r.Header.Get(deadlinehttp.DefaultHeader), a.Budget, a.Limit, a.Refusal)
		}),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	outer, cancel := context.WithTimeout(context.Background(), time.Hour) // an outer layer's deadline
	defer cancel()
	for _, v := range []string{"800", "60000", "800, 10", "0", ""} {
		r := httptest.NewRequestWithContext(outer, http.MethodGet, "/", nil)
		if v != "" {
			r.Header.Set(deadlinehttp.DefaultHeader, v)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	ended, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second)) // an outer layer out of time
	defer cancel()
	r := httptest.NewRequestWithContext(ended, http.MethodGet, "/", nil)
	r.Header.Set(deadlinehttp.DefaultHeader, "800")
	h.ServeHTTP(httptest.NewRecorder(), r)
	// Output:
	// "800"      budget 800ms set by header  refused: none
	// "60000"    budget 2s    set by max     refused: none
	// "800, 10"  budget 10ms  set by header  refused: floor
	// "0"        budget 0s    set by header  refused: spent
	// ""         budget 2s    set by max     refused: none
	// "800"      budget 0s    set by context refused: spent
}

// Example_readmeServer is the README's server example, verbatim between the
// markers, so that the README shows code that compiles and runs.
func Example_readmeServer() {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		d, _ := deadline.FromContext(r.Context())
		fmt.Fprintf(w, "budget %v", d.Budget())
	})
	build := func() (http.Handler, error) {
		// README begin
		h, err := deadlinehttp.NewHandler(mux, // mux: the server's own handler
			deadlinehttp.WithMaxBudget(5*time.Second),   // a client can never grant more
			deadlinehttp.WithFloor(20*time.Millisecond), // at or below this, or spent: 504 at once
		)
		if err != nil { // an invalid or contradictory option
			return nil, err
		}
		// mux's handlers: deadline.FromContext(r.Context()) is the budget, and r.Context() ends with it
		// README end
		return h, nil
	}
	h, err := build()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, v := range []string{"300, 9000", "0"} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set(deadlinehttp.DefaultHeader, v)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		fmt.Printf("%q: %d %s\n", v, rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	// Output:
	// "300, 9000": 200 budget 300ms
	// "0": 504 deadline budget too small: budget-ms=0, floor-ms=20
}

// TestREADMEServerIsExample keeps a Go block of the README identical to
// Example_readmeServer, apart from the return.
func TestREADMEServerIsExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	src, err := os.ReadFile("handler_example_test.go")
	require.NoError(t, err)
	_, got, ok := strings.Cut(string(src), "\t\t// README begin\n")
	require.True(t, ok)
	got, _, _ = strings.Cut(got, "\t\t// README end\n")
	got = strings.ReplaceAll(got, "\n\t\t", "\n")
	got = strings.TrimPrefix(got, "\t\t")
	got = strings.Replace(got, "return nil, err", "return err", 1)
	assert.Contains(t, readmeGoBlocks(t, string(readme)), got, "README shows Example_readmeServer's code")
}

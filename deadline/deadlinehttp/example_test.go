package deadlinehttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
)

// A client whose requests spend one run's budget: the first attempt gets a
// 503 and is retried, each attempt carries its lease in the budget header,
// and a Retry-After that does not fit in what is left stops the call at
// once.
func ExampleNewTransport() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/flaky":
			if n.Add(1) == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			_, ok := deadlinehttp.ParseBudget(r.Header.Get(deadlinehttp.DefaultHeader))
			fmt.Fprintf(w, "hello (budget header valid: %v)", ok)
		case "/busy":
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer srv.Close()

	client := &http.Client{Transport: deadlinehttp.NewTransport(srv.Client().Transport)}
	// The run's one deadline, decided at the top.
	ctx := deadline.NewContext(context.Background(), deadline.New(2*time.Second))

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/flaky", nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("%s after %d requests: %s\n", resp.Status, n.Load(), body)

	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/busy", nil)
	_, err = client.Do(req)
	var stop *deadline.StopError
	var status *deadlinehttp.StatusError
	if errors.As(err, &stop) && errors.As(err, &status) {
		fmt.Printf("stopped: %v after %d attempt; last answer %d\n", stop.Reason, stop.Attempts, status.StatusCode())
	}
	// Output:
	// 200 OK after 2 requests: hello (budget header valid: true)
	// stopped: retry_after_exceeds_budget after 1 attempt; last answer 429
}

// A server that takes the budget its callers send, clamps it to its own
// maximum, and refuses work it has no time for.
func ExampleNewHandler() {
	h, err := deadlinehttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := deadline.FromContext(r.Context())
		fmt.Fprintf(w, "budget %v", d.Budget())
	}), deadlinehttp.WithMaxBudget(2*time.Second), deadlinehttp.WithFloor(50*time.Millisecond))
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	for _, budget := range []string{"800", "60000", "garbage", "800, 90", "10", "0"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set(deadlinehttp.DefaultHeader, budget)
		resp, err := srv.Client().Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			fmt.Printf("%s: %s\n", budget, body)
		} else {
			fmt.Printf("%s: %d %s: %s\n", budget, resp.StatusCode, deadlinehttp.RefusedHeader, resp.Header.Get(deadlinehttp.RefusedHeader))
		}
	}
	// Output:
	// 800: budget 800ms
	// 60000: budget 2s
	// garbage: budget 2s
	// 800, 90: budget 90ms
	// 10: 504 Deadline-Refused: budget-ms=10, floor-ms=50
	// 0: 504 Deadline-Refused: budget-ms=0, floor-ms=50
}

func ExampleParseRetryAfter() {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{"120", "Sun, 01 Mar 2026 12:00:30 GMT", "-1", "86401"} {
		d, ok := deadlinehttp.ParseRetryAfter(v, now)
		fmt.Println(d, ok)
	}
	// Output:
	// 2m0s true
	// 30s true
	// 0s false
	// 0s false
}

func ExampleFormatBudget() {
	fmt.Println(deadlinehttp.FormatBudget(1980 * time.Millisecond))
	fmt.Println(deadlinehttp.FormatBudget(1500 * time.Microsecond))
	fmt.Println(deadlinehttp.FormatBudget(0))
	// Output:
	// 1980
	// 2
	// 1
}

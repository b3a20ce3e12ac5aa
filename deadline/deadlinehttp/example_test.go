package deadlinehttp_test

import (
	"context"
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
// once: that answer is the response, and StopOf says why it was not
// retried.
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
	resp, err = client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	if stop, ok := deadlinehttp.StopOf(resp); ok {
		fmt.Printf("%s; stopped: %v after %d attempt\n", resp.Status, stop.Reason, stop.Attempts)
	}
	// Output:
	// 200 OK after 2 requests: hello (budget header valid: true)
	// 429 Too Many Requests; stopped: retry_after_exceeds_budget after 1 attempt
}

// A call that ends on an answer returns it, with a nil error, whatever its
// status: check resp.StatusCode as with any client, then StopOf to learn
// why the transport stopped retrying. An error means there was no answer to
// return (refused below the floor, a transport error, the deadline before
// the headers).
func ExampleStopOf() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	p := deadline.DefaultPolicy() // 3 attempts
	p.Name = "fetch"
	client := &http.Client{Transport: deadlinehttp.NewTransport(srv.Client().Transport, deadlinehttp.WithPolicy(p))}
	ctx := deadline.NewContext(context.Background(), deadline.New(2*time.Second))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println("no answer:", err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		fmt.Printf("%s: %s", resp.Status, body)
		if stop, ok := deadlinehttp.StopOf(resp); ok {
			fmt.Printf("%s gave up: %v after %d attempts (the budget's doing: %v)\n", stop.Name, stop.Reason, stop.Attempts, stop.Reason.Budget())
		}
	}
	// Output:
	// 503 Service Unavailable: overloaded
	// fetch gave up: attempts_exhausted after 3 attempts (the budget's doing: false)
}

// One http.Client for the whole service: the policy function gives each
// route its own step policy (name, attempts, ceiling), and the budget
// header of each request carries its own lease.
func ExampleWithPolicyFunc() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s got a %sms lease", r.URL.Path, r.Header.Get(deadlinehttp.DefaultHeader))
	}))
	defer srv.Close()

	policies := map[string]deadline.Policy{
		"/search": {Name: "search", MaxAttempts: 2, AttemptTimeout: 250 * time.Millisecond, Floor: 20 * time.Millisecond},
		"/fetch":  {Name: "fetch", MaxAttempts: 3, AttemptTimeout: 100 * time.Millisecond, Floor: 20 * time.Millisecond},
	}
	client := &http.Client{Transport: deadlinehttp.NewTransport(srv.Client().Transport,
		deadlinehttp.WithPolicyFunc(func(r *http.Request) (deadline.Policy, bool) {
			p, ok := policies[r.URL.Path]
			return p, ok // false: the Transport's own policy (WithPolicy)
		}))}

	ctx := deadline.NewContext(context.Background(), deadline.New(2*time.Second))
	for _, path := range []string{"/search", "/fetch"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(string(body))
	}
	// Output:
	// /search got a 250ms lease
	// /fetch got a 100ms lease
}

// The step that makes a request chooses its policy, next to the deadline;
// it wins over the Transport's own choice.
func ExampleWithRequestPolicy() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "a %sms lease", r.Header.Get(deadlinehttp.DefaultHeader))
	}))
	defer srv.Close()
	client := &http.Client{Transport: deadlinehttp.NewTransport(srv.Client().Transport)}

	extract := deadline.Policy{Name: "extract", MaxAttempts: 2, AttemptTimeout: 250 * time.Millisecond, Floor: 20 * time.Millisecond}
	ctx := deadline.NewContext(context.Background(), deadline.New(2*time.Second))
	ctx = deadlinehttp.WithRequestPolicy(ctx, extract)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(string(body))
	// Output:
	// a 250ms lease
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

// One retry budget per downstream, shared by every request of the
// Transport: while the server fails every request, retries stay within the
// budget (here none beyond 20 % of first attempts) instead of tripling the
// load, and a denied retry returns the last answer with StopOf saying why.
func ExampleWithRetryBudget() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	budget, err := deadline.NewRetryBudget(deadline.WithRetryRatio(0.2), deadline.WithMinRetryRate(0))
	if err != nil {
		fmt.Println(err)
		return
	}
	p := deadline.DefaultPolicy()
	p.Backoff = deadline.Backoff{} // retry at once, for the example
	client := &http.Client{Transport: deadlinehttp.NewTransport(srv.Client().Transport,
		deadlinehttp.WithPolicy(p), deadlinehttp.WithRetryBudget(budget))}
	denied := 0
	for range 10 {
		ctx := deadline.NewContext(context.Background(), deadline.New(2*time.Second))
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		if stop, ok := deadlinehttp.StopOf(resp); ok && stop.Reason == deadline.ReasonRetryBudget {
			denied++
		}
	}
	fmt.Printf("10 calls: %d requests sent (3 attempts each would send 30), %d retries denied\n", n.Load(), denied)
	// Output:
	// 10 calls: 12 requests sent (3 attempts each would send 30), 10 retries denied
}

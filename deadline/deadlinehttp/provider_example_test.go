package deadlinehttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
)

// A chat completion is a POST, which RFC 9110 does not let the transport
// repeat. A provider that answers 429 with "x-should-retry: true" says it
// did not act on the request, so the transport retries it, after the
// "retry-after-ms" it asked for; an answer with "x-should-retry: false" is
// never retried, and is the response.
func ExampleShouldRetryHeader() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			w.Header().Set(deadlinehttp.ShouldRetryHeader, "true")
			w.Header().Set(deadlinehttp.RetryAfterMsHeader, "20")
			w.WriteHeader(http.StatusTooManyRequests)
		case 2:
			io.WriteString(w, `{"choices":[]}`)
		default:
			w.Header().Set(deadlinehttp.ShouldRetryHeader, "false")
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	client := &http.Client{Transport: deadlinehttp.NewTransport(srv.Client().Transport)}
	ctx := deadline.NewContext(context.Background(), deadline.New(2*time.Second))

	for range 2 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		stop, stopped := deadlinehttp.StopOf(resp)
		fmt.Println(resp.Status, "after", n.Load(), "requests; stopped:", stopped && stop.Reason == deadline.ReasonNotRetryable)
	}
	// Output:
	// 200 OK after 2 requests; stopped: false
	// 500 Internal Server Error after 3 requests; stopped: true
}

// Reading a provider's millisecond Retry-After: a fraction is kept and
// never rounded down; a negative, signed or non-numeric value is refused,
// and the transport then falls back to Retry-After or its own backoff.
func ExampleParseRetryAfterMs() {
	for _, v := range []string{"1500", "20.5", "-5", "soon"} {
		d, ok := deadlinehttp.ParseRetryAfterMs(v)
		fmt.Println(v, d, ok)
	}
	// Output:
	// 1500 1.5s true
	// 20.5 20.5ms true
	// -5 0s false
	// soon 0s false
}

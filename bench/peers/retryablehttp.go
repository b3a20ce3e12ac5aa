package peers

import (
	"context"
	"net/http"

	"github.com/hashicorp/go-retryablehttp"
)

// RetryableHTTP is github.com/hashicorp/go-retryablehttp. Its per-attempt
// timeout is the inner http.Client's Timeout; it has no overall limit of its
// own, so the context's deadline is the only one (mode lib: none). Its
// exponential backoff, DefaultBackoff, honours Retry-After on 429 and 503 but
// has no jitter (the jittered backoffs are linear); it is the default:
//
//	cl := retryablehttp.NewClient()
//	cl.HTTPClient = &http.Client{Transport: base, Timeout: c.AttemptTimeout}
//	cl.RetryMax = c.MaxAttempts - 1
//	cl.RetryWaitMin, cl.RetryWaitMax = c.BackoffBase, c.BackoffMax
//	cl.Backoff = retryablehttp.DefaultBackoff
//	cl.Logger = nil
//	req, _ := retryablehttp.NewRequestWithContext(ctx, method, url, body)
//	resp, err := cl.Do(req)
type RetryableHTTP struct{}

// Name returns "go-retryablehttp".
func (RetryableHTTP) Name() string { return "hashicorp/go-retryablehttp v0.7.8" }

// Config describes the client built from a Call.
func (RetryableHTTP) Config() string {
	return "retryablehttp.Client{HTTPClient: &http.Client{Timeout: AttemptTimeout}, RetryMax: MaxAttempts-1, RetryWaitMin: Base, " +
		"RetryWaitMax: Max, Backoff: DefaultBackoff (exponential, Retry-After, no jitter)}; no overall limit but the request's context"
}

// Send sends the request with the client.
func (RetryableHTTP) Send(ctx context.Context, c Call, base http.RoundTripper, method, url string, body []byte) (int, error) {
	if err := c.Validate(); err != nil {
		return 0, err
	}
	cl := retryablehttp.NewClient()
	cl.HTTPClient = &http.Client{Transport: base, Timeout: c.AttemptTimeout}
	cl.RetryMax = c.MaxAttempts - 1
	cl.RetryWaitMin, cl.RetryWaitMax = c.BackoffBase, c.BackoffMax
	cl.Backoff = retryablehttp.DefaultBackoff
	cl.Logger = nil
	var raw any
	if body != nil {
		raw = body
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, method, url, raw)
	if err != nil {
		return 0, err
	}
	resp, err := cl.Do(req)
	return drain(resp), err
}

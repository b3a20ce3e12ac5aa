package otelbudgeteino

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
)

// answer is what the provider's last HTTP answer of one model attempt said:
// its status, the wait it asked for and whether it said to retry.
type answer struct {
	mu          sync.Mutex
	status      int
	wait        time.Duration
	hasWait     bool
	shouldRetry bool
	hasShould   bool
}

type answerKey struct{}

// Transport returns an http.RoundTripper for the model client's HTTP client
// (e.g. eino-ext's OpenAI model, Config.HTTPClient): it passes every request
// to base (nil: http.DefaultTransport) unchanged, and tells the model call
// made through [Budget.Model] what the provider's answer said, since the
// model client's error does not: its status, its retry-after-ms,
// x-ms-retry-after-ms or Retry-After, and its x-should-retry. With it, a 429,
// 502, 503, 504 or 529 is retried under the model policy, after the wait the
// provider asked for, never past the deadline; without it, a model call is
// not retried on the provider's answer. Turn the model client's own retries
// off (its sleeps ignore the deadline).
func (b *Budget) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base}
}

type transport struct{ base http.RoundTripper }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	a, _ := req.Context().Value(answerKey{}).(*answer)
	if err != nil || a == nil {
		return resp, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.status = resp.StatusCode
	a.wait, a.hasWait = retryAfter(resp.Header)
	a.shouldRetry, a.hasShould = deadlinehttp.ParseShouldRetry(resp.Header.Get(deadlinehttp.ShouldRetryHeader))
	return resp, nil
}

// retryAfter reads the wait an answer asks for: the millisecond headers
// first (OpenAI's retry-after-ms, Azure's x-ms-retry-after-ms), then
// Retry-After.
func retryAfter(h http.Header) (time.Duration, bool) {
	for _, name := range []string{deadlinehttp.RetryAfterMsHeader, deadlinehttp.AzureRetryAfterMsHeader} {
		if d, ok := deadlinehttp.ParseRetryAfterMs(h.Get(name)); ok {
			return d, true
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		return deadlinehttp.ParseRetryAfter(v, time.Now())
	}
	return 0, false
}

func withAnswer(ctx context.Context, a *answer) context.Context {
	return context.WithValue(ctx, answerKey{}, a)
}

// classify marks a model attempt's error retryable, with the provider's
// wait, when the provider's answer says it may be retried.
func (a *answer) classify(err error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.status == 0:
		return err // no answer: a transport error or the lease; Do decides
	case a.hasShould && !a.shouldRetry:
		return err
	case a.hasShould && a.shouldRetry, retryableStatus(a.status):
		err = deadline.Retryable(err)
		if a.hasWait {
			err = deadline.RetryAfter(err, a.wait)
		}
	}
	return err
}

func retryableStatus(s int) bool {
	switch s {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable,
		http.StatusGatewayTimeout, deadlinehttp.StatusOverloaded:
		return true
	}
	return false
}

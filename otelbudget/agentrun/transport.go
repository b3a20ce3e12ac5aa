package agentrun

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgethttp"
)

// Transport is the transport recipe of every adapter: the http.RoundTripper
// to give the model client's HTTP client (eino-ext's OpenAI model's
// Config.HTTPClient, compat_oai's option.WithHTTPClient). It sends every
// request through otelhttp over base (otelbudgethttp.NewBase: one CLIENT
// span per request, a child of the chat attempt span, with its client
// metrics on obs's MeterProvider), and tells the model call what the
// provider's answer said, which the model client's error does not: its
// status, its retry-after-ms, x-ms-retry-after-ms or Retry-After, and its
// x-should-retry ([Answer.Classify]). With it, a 429, 502, 503, 504 or 529
// is retried under the model policy, by the model call itself, after the
// wait the provider asked for, never past the deadline. Turn the model
// client's own retries off (their sleeps ignore the deadline). A nil base
// means http.DefaultTransport; a nil obs otelbudget.New().
func Transport(base http.RoundTripper, obs *otelbudget.Observer) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: otelbudgethttp.NewBase(base, obs), idle: base}
}

type transport struct {
	base http.RoundTripper
	idle http.RoundTripper // the connection pool, for CloseIdleConnections
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	a, _ := req.Context().Value(answerKey{}).(*Answer)
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

// CloseIdleConnections closes the base transport's idle connections.
func (t *transport) CloseIdleConnections() {
	if c, ok := t.idle.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Answer is what the provider's last HTTP answer of one model attempt
// said: its status, the wait it asked for and whether it said to retry.
type Answer struct {
	mu          sync.Mutex
	status      int
	wait        time.Duration
	hasWait     bool
	shouldRetry bool
	hasShould   bool
}

type answerKey struct{}

// WithAnswer returns a context for one model attempt in which [Transport]
// records the provider's answer, and that answer.
func WithAnswer(ctx context.Context) (context.Context, *Answer) {
	a := &Answer{}
	return context.WithValue(ctx, answerKey{}, a), a
}

// Classify marks a model attempt's error retryable, with the provider's
// wait, when the provider's answer says it may be retried: x-should-retry
// true, or a 429, 502, 503, 504 or 529 without x-should-retry false. An
// error with no answer (a transport error, the lease) is returned as it
// is: deadline.Do decides.
func (a *Answer) Classify(err error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.status == 0:
		return err
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

func retryableStatus(s int) bool {
	switch s {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable,
		http.StatusGatewayTimeout, deadlinehttp.StatusOverloaded:
		return true
	}
	return false
}

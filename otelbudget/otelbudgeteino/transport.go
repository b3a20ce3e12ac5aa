package otelbudgeteino

import (
	"net/http"

	"github.com/deadlinebudget/budget/otelbudget/agentrun"
)

// Transport returns the http.RoundTripper for the model client's HTTP
// client (e.g. eino-ext's OpenAI model, Config.HTTPClient): agentrun's
// transport recipe, the same for every framework ([agentrun.Transport]):
// an HTTP CLIENT span per request (otelhttp) below the chat attempt span,
// and the provider's answer (status, retry-after-ms, x-should-retry) told
// to the model call made through [Budget.Model], so that a 429, 502, 503,
// 504 or 529 is retried under the model policy after the wait the provider
// asked for, never past the deadline; without it, a model call is not
// retried on the provider's answer. Turn the model client's own retries
// off (its sleeps ignore the deadline). A nil base means
// http.DefaultTransport.
func (b *Budget) Transport(base http.RoundTripper) http.RoundTripper {
	return agentrun.Transport(base, b.obs)
}

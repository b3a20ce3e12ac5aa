package otelbudgetgenkit

import (
	"net/http"

	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/agentrun"
)

// Transport returns the http.RoundTripper for the model plugin's HTTP
// client (compat_oai's option.WithHTTPClient), with the SDK's own retries
// off (option.WithMaxRetries(0)): agentrun's transport recipe, the same for
// every framework ([agentrun.Transport]). Each request gets an HTTP CLIENT
// span (otelhttp, recorded by obs) below its chat attempt span, and the
// provider's answer (status, retry-after-ms, x-should-retry) is told to the
// model call, which retries a 429, 502, 503, 504 or 529 under
// [Config.ModelPolicy] after the wait the provider asked for, never past
// the deadline. A nil base means http.DefaultTransport; a nil obs
// otelbudget.New() (the global providers).
func Transport(base http.RoundTripper, obs *otelbudget.Observer) http.RoundTripper {
	return agentrun.Transport(base, obs)
}

package deadlinehttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRetryAfterMs(t *testing.T) {
	cases := []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"20", 20 * time.Millisecond, true},
		{"1500", 1500 * time.Millisecond, true},
		{" \t20 ", 20 * time.Millisecond, true},
		{"007", 7 * time.Millisecond, true},
		{"20.5", 20500 * time.Microsecond, true},
		{"1.000000", time.Millisecond, true},
		{"1.000001", time.Millisecond + time.Nanosecond, true},
		{"1.0000001", time.Millisecond + time.Nanosecond, true}, // below a nanosecond: rounded up
		{"0.00000000009", time.Nanosecond, true},
		{"1.0000000000", time.Millisecond, true},
		{"86400000", deadlinehttp.MaxRetryAfter, true},
		{"86400000.000001", 0, false}, // longer than MaxRetryAfter
		{"86400001", 0, false},
		{"9223372036854775807", 0, false}, // overflows a Duration
		{"99999999999999999999999", 0, false},
		{"", 0, false},
		{" ", 0, false},
		{"-5", 0, false},
		{"+5", 0, false},
		{"-0", 0, false},
		{"1e3", 0, false},
		{"5ms", 0, false},
		{"1.", 0, false},
		{".5", 0, false},
		{"1.5.5", 0, false},
		{"1,5", 0, false},
		{"5, 6", 0, false},
		{"0x10", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"٣", 0, false}, // a non-ASCII digit
	}
	for _, tc := range cases {
		d, ok := deadlinehttp.ParseRetryAfterMs(tc.v)
		assert.Equal(t, tc.ok, ok, "ParseRetryAfterMs(%q)", tc.v)
		assert.Equal(t, tc.want, d, "ParseRetryAfterMs(%q)", tc.v)
	}
}

func TestParseShouldRetry(t *testing.T) {
	cases := []struct {
		v         string
		retry, ok bool
	}{
		{"true", true, true},
		{"false", false, true},
		{"TRUE", true, true},
		{"False", false, true},
		{" true\t", true, true},
		{"", false, false},
		{"1", false, false},
		{"0", false, false},
		{"yes", false, false},
		{"no", false, false},
		{"truee", false, false},
		{"true, false", false, false},
		{`"true"`, false, false},
		{"falſe", false, false}, // a Unicode fold of "false", not ASCII
	}
	for _, tc := range cases {
		retry, ok := deadlinehttp.ParseShouldRetry(tc.v)
		assert.Equal(t, tc.ok, ok, "ParseShouldRetry(%q)", tc.v)
		assert.Equal(t, tc.retry, retry, "ParseShouldRetry(%q)", tc.v)
	}
}

// TestServerDelayHeaders: on an overload answer the retry waits the delay
// of the first valid of retry-after-ms, x-ms-retry-after-ms and
// Retry-After, never less; invalid ones are skipped, and without any the
// policy's backoff applies.
func TestServerDelayHeaders(t *testing.T) {
	const backoff = 5 * time.Millisecond // fastPolicy's first delay
	cases := []struct {
		name   string
		status int
		header http.Header
		want   time.Duration
		source deadline.BackoffSource
	}{
		{"retry-after-ms", http.StatusTooManyRequests, http.Header{"Retry-After-Ms": {"1500"}}, 1500 * time.Millisecond, deadline.SourceRetryAfter},
		{"retry-after-ms before Retry-After", http.StatusTooManyRequests,
			http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"3"}}, 250 * time.Millisecond, deadline.SourceRetryAfter},
		{"retry-after-ms before x-ms-retry-after-ms", http.StatusServiceUnavailable,
			http.Header{"Retry-After-Ms": {"250"}, "X-Ms-Retry-After-Ms": {"700"}}, 250 * time.Millisecond, deadline.SourceRetryAfter},
		{"x-ms-retry-after-ms before Retry-After", http.StatusTooManyRequests,
			http.Header{"X-Ms-Retry-After-Ms": {"700"}, "Retry-After": {"3"}}, 700 * time.Millisecond, deadline.SourceRetryAfter},
		{"529", deadlinehttp.StatusOverloaded, http.Header{"Retry-After-Ms": {"40"}}, 40 * time.Millisecond, deadline.SourceRetryAfter},
		{"529 Retry-After", deadlinehttp.StatusOverloaded, http.Header{"Retry-After": {"2"}}, 2 * time.Second, deadline.SourceRetryAfter},
		{"fraction", http.StatusTooManyRequests, http.Header{"Retry-After-Ms": {"12.5"}}, 12500 * time.Microsecond, deadline.SourceRetryAfter},
		{"zero", http.StatusTooManyRequests, http.Header{"Retry-After-Ms": {"0"}, "Retry-After": {"3"}}, 0, deadline.SourceRetryAfter},
		{"malformed falls back to Retry-After", http.StatusTooManyRequests,
			http.Header{"Retry-After-Ms": {"soon"}, "Retry-After": {"1"}}, time.Second, deadline.SourceRetryAfter},
		{"negative falls back to x-ms", http.StatusTooManyRequests,
			http.Header{"Retry-After-Ms": {"-5"}, "X-Ms-Retry-After-Ms": {"30"}}, 30 * time.Millisecond, deadline.SourceRetryAfter},
		{"several lines fall back to Retry-After", http.StatusTooManyRequests,
			http.Header{"Retry-After-Ms": {"100", "200"}, "Retry-After": {"1"}}, time.Second, deadline.SourceRetryAfter},
		{"list falls back to Retry-After", http.StatusTooManyRequests,
			http.Header{"Retry-After-Ms": {"100, 200"}, "Retry-After": {"1"}}, time.Second, deadline.SourceRetryAfter},
		{"all invalid: backoff", http.StatusServiceUnavailable,
			http.Header{"Retry-After-Ms": {"-5"}, "X-Ms-Retry-After-Ms": {"1e3"}, "Retry-After": {"soon"}}, backoff, deadline.SourcePolicy},
		{"not an overload status: backoff", http.StatusBadGateway, http.Header{"Retry-After-Ms": {"700"}}, backoff, deadline.SourcePolicy},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var rec recorder
				tr, l := inMemory(func(n int, w http.ResponseWriter, r *http.Request) {
					if n == 1 {
						for k, vs := range tc.header {
							w.Header()[k] = vs
						}
						w.WriteHeader(tc.status)
					}
				}, deadlinehttp.WithPolicy(fastPolicy(2)), deadlinehttp.WithHooks(rec.hooks()))
				resp, err := get(t, budgetCtx(5*time.Second), tr)
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				got := l.all()
				require.Len(t, got, 2)
				assert.Equal(t, tc.want, got[1].At.Sub(got[0].At), "the retry waited the delay asked, exactly")
				require.Len(t, rec.backoffs, 1)
				assert.Equal(t, tc.source, rec.backoffs[0].Source)
				assert.Equal(t, tc.want, rec.backoffs[0].Delay)
				if tc.source == deadline.SourceRetryAfter {
					ra, ok := deadline.RetryAfterOf(rec.results[0].Err)
					require.True(t, ok, "the attempt's error carries the delay asked")
					assert.Equal(t, tc.want, ra)
				}
			})
		})
	}
}

// TestRetryAfterMsBeyondBudget: a millisecond delay that does not fit in
// what is left stops the call at once, as a Retry-After does, even when a
// Retry-After of 0 says otherwise; an overflowing value saturates and
// stops it too. The server's answer is returned whole.
func TestRetryAfterMsBeyondBudget(t *testing.T) {
	cases := []struct {
		name   string
		header http.Header
		wait   time.Duration
	}{
		{"retry-after-ms", http.Header{"Retry-After-Ms": {"3000"}}, 3 * time.Second},
		{"x-ms-retry-after-ms", http.Header{"X-Ms-Retry-After-Ms": {"3000"}}, 3 * time.Second},
		{"wins over Retry-After 0", http.Header{"Retry-After-Ms": {"3000"}, "Retry-After": {"0"}}, 3 * time.Second},
		{"beyond MaxRetryAfter", http.Header{"Retry-After-Ms": {"172800000"}}, 48 * time.Hour},
		{"overflowing", http.Header{"Retry-After-Ms": {"99999999999999999999"}}, time.Duration(1<<63 - 1)},
		{"overflowing by its fraction", http.Header{"Retry-After-Ms": {"9223372036854.775808"}}, time.Duration(1<<63 - 1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr, l := inMemory(func(n int, w http.ResponseWriter, r *http.Request) {
					for k, vs := range tc.header {
						w.Header()[k] = vs
					}
					w.WriteHeader(http.StatusTooManyRequests)
					io.WriteString(w, "rate limited")
				})
				start := time.Now()
				resp, err := get(t, budgetCtx(time.Second), tr)
				require.NoError(t, err)
				assert.Zero(t, time.Since(start), "stopped at once, without waiting")
				body, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
				assert.Equal(t, "rate limited", string(body))
				stop, ok := deadlinehttp.StopOf(resp)
				require.True(t, ok)
				assert.Equal(t, deadline.ReasonRetryAfterTooLong, stop.Reason)
				assert.Equal(t, tc.wait, stop.Wait)
				assert.Len(t, l.all(), 1)
			})
		})
	}
}

// post returns a POST with a replayable body (GetBody set).
func post(t *testing.T, ctx context.Context, header http.Header) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://svc.test/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
	require.NoError(t, err)
	for k, vs := range header {
		req.Header[k] = vs
	}
	return req
}

// TestShouldRetry: x-should-retry "false" is never retried, whatever the
// method, key or classifier; "true" lets a request that is not idempotent
// be retried when its body can be replayed, within the attempts and the
// retry budget and as the classifier allows; any other value is ignored.
func TestShouldRetry(t *testing.T) {
	never := func(error) bool { return false }
	always := func(error) bool { return true }
	cases := []struct {
		name      string
		method    string
		reqHeader http.Header
		streamed  bool // a body without GetBody
		advice    []string
		status    int
		retryable func(error) bool
		budget    int // retry budget reserve; < 0: none
		requests  int
		reason    deadline.Reason // of the stop; ReasonSuccess: no stop
	}{
		{"POST true", http.MethodPost, nil, false, []string{"true"}, http.StatusServiceUnavailable, nil, -1, 3, deadline.ReasonExhausted},
		{"POST TRUE", http.MethodPost, nil, false, []string{" TRUE "}, http.StatusServiceUnavailable, nil, -1, 3, deadline.ReasonExhausted},
		{"POST 529 true", http.MethodPost, nil, false, []string{"true"}, deadlinehttp.StatusOverloaded, nil, -1, 3, deadline.ReasonExhausted},
		{"POST none", http.MethodPost, nil, false, nil, http.StatusServiceUnavailable, nil, -1, 1, deadline.ReasonNotRetryable},
		{"POST other value", http.MethodPost, nil, false, []string{"yes"}, http.StatusServiceUnavailable, nil, -1, 1, deadline.ReasonNotRetryable},
		{"POST empty value", http.MethodPost, nil, false, []string{""}, http.StatusServiceUnavailable, nil, -1, 1, deadline.ReasonNotRetryable},
		{"POST true twice", http.MethodPost, nil, false, []string{"true", "true"}, http.StatusServiceUnavailable, nil, -1, 1, deadline.ReasonNotRetryable},
		{"POST true streamed body", http.MethodPost, nil, true, []string{"true"}, http.StatusServiceUnavailable, nil, -1, 1, deadline.ReasonNotRetryable},
		{"POST true classifier says no", http.MethodPost, nil, false, []string{"true"}, http.StatusServiceUnavailable, never, -1, 1, deadline.ReasonNotRetryable},
		{"POST true custom classifier", http.MethodPost, nil, false, []string{"true"}, http.StatusServiceUnavailable, always, -1, 3, deadline.ReasonExhausted},
		{"POST true retry budget", http.MethodPost, nil, false, []string{"true"}, http.StatusServiceUnavailable, nil, 1, 2, deadline.ReasonRetryBudget},
		{"POST true status not retryable", http.MethodPost, nil, false, []string{"true"}, http.StatusBadRequest, nil, -1, 1, deadline.ReasonSuccess},
		{"GET false", http.MethodGet, nil, false, []string{"false"}, http.StatusServiceUnavailable, nil, -1, 1, deadline.ReasonNotRetryable},
		{"GET false classifier says yes", http.MethodGet, nil, false, []string{"false"}, http.StatusServiceUnavailable, always, -1, 1, deadline.ReasonNotRetryable},
		{"GET False", http.MethodGet, nil, false, []string{"False"}, http.StatusTooManyRequests, nil, -1, 1, deadline.ReasonNotRetryable},
		{"GET false twice", http.MethodGet, nil, false, []string{"false", "false"}, http.StatusServiceUnavailable, nil, -1, 3, deadline.ReasonExhausted},
		{"GET other value", http.MethodGet, nil, false, []string{"0"}, http.StatusServiceUnavailable, nil, -1, 3, deadline.ReasonExhausted},
		{"GET true", http.MethodGet, nil, false, []string{"true"}, http.StatusServiceUnavailable, nil, -1, 3, deadline.ReasonExhausted},
		{"POST with key false", http.MethodPost, http.Header{"Idempotency-Key": {"k1"}}, false, []string{"false"}, http.StatusServiceUnavailable, nil, -1, 1, deadline.ReasonNotRetryable},
		{"POST with key none", http.MethodPost, http.Header{"Idempotency-Key": {"k1"}}, false, nil, http.StatusServiceUnavailable, nil, -1, 3, deadline.ReasonExhausted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var rec recorder
				p := fastPolicy(3)
				p.Retryable = tc.retryable
				opts := []deadlinehttp.Option{deadlinehttp.WithPolicy(p), deadlinehttp.WithHooks(rec.hooks())}
				if tc.budget >= 0 {
					opts = append(opts, deadlinehttp.WithRetryBudget(retryBudget(t, tc.budget)))
				}
				tr, l := inMemory(func(n int, w http.ResponseWriter, r *http.Request) {
					if tc.advice != nil {
						w.Header()["X-Should-Retry"] = tc.advice
					}
					w.WriteHeader(tc.status)
					io.WriteString(w, "answer")
				}, opts...)
				var req *http.Request
				switch {
				case tc.method == http.MethodGet:
					var err error
					req, err = http.NewRequestWithContext(budgetCtx(5*time.Second), http.MethodGet, "http://svc.test/x", nil)
					require.NoError(t, err)
				case tc.streamed:
					req = post(t, budgetCtx(5*time.Second), tc.reqHeader)
					req.GetBody = nil
				default:
					req = post(t, budgetCtx(5*time.Second), tc.reqHeader)
				}
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err, "the provider's last answer is the response")
				body, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, tc.status, resp.StatusCode)
				assert.Equal(t, "answer", string(body))
				got := l.all()
				assert.Len(t, got, tc.requests)
				for _, s := range got[1:] {
					assert.Equal(t, got[0].Body, s.Body, "every attempt sends the same body")
				}
				stop, ok := deadlinehttp.StopOf(resp)
				if tc.reason == deadline.ReasonSuccess {
					assert.False(t, ok, "a status outside the retryable set is returned as it is")
					return
				}
				require.True(t, ok)
				assert.Equal(t, tc.reason, stop.Reason)
				require.NotEmpty(t, rec.results)
				assert.Equal(t, tc.reason != deadline.ReasonNotRetryable, rec.results[len(rec.results)-1].Retryable,
					"AttemptEnd reports the classifier's answer")
			})
		})
	}
}

// TestOverloadAnswers: 529 is retried like 503, and with
// WithOverloadCharge it charges the retry budget unless it carries a
// delay; a millisecond delay counts as one.
func TestOverloadAnswers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		status   int
		header   http.Header
		requests int
		reason   deadline.Reason
		balance  int
	}{
		// 5 tokens: 529, charge 2 (3), retry (2); 529, charge 2 (0), denied.
		{"529", deadlinehttp.StatusOverloaded, nil, 2, deadline.ReasonRetryBudget, 0},
		{"529 retry-after-ms", deadlinehttp.StatusOverloaded, http.Header{"Retry-After-Ms": {"10"}}, 3, deadline.ReasonExhausted, 3},
		{"429 x-ms-retry-after-ms", http.StatusTooManyRequests, http.Header{"X-Ms-Retry-After-Ms": {"10"}}, 3, deadline.ReasonExhausted, 3},
		{"503 malformed retry-after-ms", http.StatusServiceUnavailable, http.Header{"Retry-After-Ms": {"-10"}}, 2, deadline.ReasonRetryBudget, 0},
		{"529 x-should-retry false", deadlinehttp.StatusOverloaded, http.Header{"X-Should-Retry": {"false"}}, 1, deadline.ReasonNotRetryable, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := retryBudget(t, 5)
				tr, l := inMemory(func(n int, w http.ResponseWriter, r *http.Request) {
					for k, vs := range tc.header {
						w.Header()[k] = vs
					}
					w.WriteHeader(tc.status)
				}, deadlinehttp.WithPolicy(fastPolicy(3)), deadlinehttp.WithRetryBudget(b), deadlinehttp.WithOverloadCharge(2))
				resp, err := get(t, budgetCtx(5*time.Second), tr)
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, tc.status, resp.StatusCode)
				stop, ok := deadlinehttp.StopOf(resp)
				require.True(t, ok)
				assert.Equal(t, tc.reason, stop.Reason)
				assert.Len(t, l.all(), tc.requests)
				assert.Equal(t, tc.balance, b.Balance())
				se, ok := errors.AsType[*deadlinehttp.StatusError](stop)
				require.True(t, ok)
				assert.Equal(t, tc.status, se.StatusCode())
			})
		})
	}
}

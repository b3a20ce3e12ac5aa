package otelbudgethttp_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgethttp"
)

// documentedErrorTypes parses the table of error.type values in
// docs/attributes.md: the backquoted values of its first column, and the
// status-code range written as two numbers in one cell.
func documentedErrorTypes(t *testing.T) (values map[string]bool, lo, hi int) {
	t.Helper()
	doc, err := os.ReadFile("../../../docs/attributes.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), "### Values of `error.type`\n")
	require.True(t, ok, "docs/attributes.md has a section \"Values of `error.type`\"")
	section, _, _ = strings.Cut(section, "\n#")
	values = map[string]bool{}
	tick := regexp.MustCompile("`([^`]+)`")
	rows := 0
	for line := range strings.SplitSeq(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		rows++
		first := strings.Split(line, "|")[1]
		var nums []int
		for _, m := range tick.FindAllStringSubmatch(first, -1) {
			if n, err := strconv.Atoi(m[1]); err == nil {
				nums = append(nums, n)
				continue
			}
			values[m[1]] = true
		}
		if len(nums) == 2 {
			lo, hi = nums[0], nums[1]
		}
	}
	require.Positive(t, rows, "the section has a table")
	require.NotZero(t, hi, "the table gives the range of status codes")
	return values, lo, hi
}

// spanErrorTypes is what one scenario recorded: the call span's error.type
// ("" when unset) and each attempt span's, in attempt order.
type spanErrorTypes struct {
	call     string
	attempts []string
}

func errorTypeOf(s sdktrace.ReadOnlySpan) string {
	for _, kv := range s.Attributes() {
		if kv.Key == semconv.ErrorTypeKey {
			return kv.Value.AsString()
		}
	}
	return ""
}

// recorded reads a scenario's error.type values from the spans: the one
// call span (scope otelbudget, named by the step) and every attempt span,
// the observer's own or otelhttp's CLIENT span, ordered by attempt number.
func recorded(t *testing.T, ended []sdktrace.ReadOnlySpan, step string) spanErrorTypes {
	t.Helper()
	var got spanErrorTypes
	byNumber := map[int64]string{}
	for _, s := range ended {
		number := int64(0)
		for _, kv := range s.Attributes() {
			if kv.Key == otelbudget.AttrAttemptNumber {
				number = kv.Value.AsInt64()
			}
		}
		switch {
		case s.Name() == step:
			got.call = errorTypeOf(s)
		case number > 0:
			_, dup := byNumber[number]
			require.False(t, dup, "one span per attempt")
			byNumber[number] = errorTypeOf(s)
		}
	}
	for n := int64(1); n <= int64(len(byNumber)); n++ {
		got.attempts = append(got.attempts, byNumber[n])
	}
	return got
}

func statusErr(code int) error {
	return &deadlinehttp.StatusError{Response: &http.Response{StatusCode: code, Status: strconv.Itoa(code) + " " + http.StatusText(code), Body: http.NoBody}}
}

// errorTypeScenario runs once through the HTTP composition (a loopback
// server and otelbudgethttp.NewTransport) and once as a plain operation
// under the observer's Hooks that fails the same way.
type errorTypeScenario struct {
	name   string
	policy deadline.Policy // Name and Hooks are set by the test
	budget time.Duration
	want   spanErrorTypes
	// handler answers the HTTP variant; nil means the base transport fails
	// (base is then used as the transport under otelhttp).
	handler func(arrived chan<- struct{}) http.HandlerFunc
	base    http.RoundTripper
	// op is the plain variant.
	op func(context.Context, deadline.AttemptInfo) (string, error)
	// cancel: the caller cancels once the first attempt is under way.
	cancel bool
	panics bool
}

func hang(arrived chan<- struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	}
}

func opHang(ctx context.Context, _ deadline.AttemptInfo) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

func opFail(err error) func(context.Context, deadline.AttemptInfo) (string, error) {
	return func(context.Context, deadline.AttemptInfo) (string, error) { return "", err }
}

// refusedAddr returns a loopback address nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func errorTypeScenarios() []errorTypeScenario {
	const ms = time.Millisecond
	quick := deadline.Backoff{Base: ms, Max: ms, Jitter: deadline.JitterNone}
	return []errorTypeScenario{
		{
			name: "success", budget: 10 * time.Second,
			policy:  deadline.Policy{MaxAttempts: 2, Floor: 20 * ms, Backoff: quick},
			handler: func(chan<- struct{}) http.HandlerFunc { return func(http.ResponseWriter, *http.Request) {} },
			op:      func(context.Context, deadline.AttemptInfo) (string, error) { return "ok", nil },
			want:    spanErrorTypes{call: "", attempts: []string{""}},
		},
		{
			name: "503 exhausted", budget: 10 * time.Second,
			policy: deadline.Policy{MaxAttempts: 2, Floor: 20 * ms, Backoff: quick},
			handler: func(chan<- struct{}) http.HandlerFunc {
				return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }
			},
			op:   opFail(deadline.Retryable(statusErr(503))),
			want: spanErrorTypes{call: "attempts_exhausted", attempts: []string{"503", "503"}},
		},
		{
			name: "ceiling timeout", budget: 10 * time.Second,
			policy:  deadline.Policy{MaxAttempts: 2, AttemptTimeout: 100 * ms, Floor: 20 * ms, Backoff: quick},
			handler: hang, op: opHang,
			want: spanErrorTypes{call: "attempts_exhausted", attempts: []string{"attempt_timeout", "attempt_timeout"}},
		},
		{
			name: "deadline cut", budget: 300 * ms,
			policy:  deadline.Policy{MaxAttempts: 2, Floor: 20 * ms, Backoff: quick},
			handler: hang, op: opHang,
			want: spanErrorTypes{call: "deadline_exceeded", attempts: []string{"deadline_exceeded"}},
		},
		{
			name: "refusal", budget: 10 * ms,
			policy:  deadline.Policy{MaxAttempts: 2, Floor: 20 * ms, Backoff: quick},
			handler: hang, op: opHang,
			want: spanErrorTypes{call: "refused"},
		},
		{
			name: "Retry-After too long", budget: 10 * time.Second,
			policy: deadline.Policy{MaxAttempts: 2, Floor: 20 * ms, Backoff: quick},
			handler: func(chan<- struct{}) http.HandlerFunc {
				return func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Retry-After", "30")
					w.WriteHeader(http.StatusServiceUnavailable)
				}
			},
			op:   opFail(deadline.Retryable(deadline.RetryAfter(statusErr(503), 30*time.Second))),
			want: spanErrorTypes{call: "retry_after_exceeds_budget", attempts: []string{"503"}},
		},
		{
			// A budget that allows no retry at all denies the first one,
			// whatever its clock says (it is shared by both runs).
			name: "retry budget", budget: 10 * time.Second,
			policy: deadline.Policy{MaxAttempts: 2, Floor: 20 * ms, Backoff: quick, RetryBudget: noRetries()},
			handler: func(chan<- struct{}) http.HandlerFunc {
				return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }
			},
			op:   opFail(deadline.Retryable(statusErr(503))),
			want: spanErrorTypes{call: "retry_budget_exhausted", attempts: []string{"503"}},
		},
		{
			name: "cancel", budget: 10 * time.Second, cancel: true,
			policy:  deadline.Policy{MaxAttempts: 2, Floor: 20 * ms, Backoff: quick},
			handler: hang, op: opHang,
			want: spanErrorTypes{call: "canceled", attempts: []string{"canceled"}},
		},
		{
			name: "panic", budget: 10 * time.Second, panics: true,
			policy: deadline.Policy{MaxAttempts: 2, Floor: 20 * ms, Backoff: quick},
			base:   panicky{},
			op:     func(context.Context, deadline.AttemptInfo) (string, error) { panic("base transport") },
			want:   spanErrorTypes{call: "panic", attempts: []string{"panic"}},
		},
		{
			name: "transport error", budget: 10 * time.Second,
			policy: deadline.Policy{MaxAttempts: 2, Floor: 20 * ms, Backoff: quick},
			op:     opFail(deadline.Retryable(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})),
			want:   spanErrorTypes{call: "attempts_exhausted", attempts: []string{"_OTHER", "_OTHER"}},
		},
	}
}

// noRetries is a retry budget that denies every retry.
func noRetries() *deadline.RetryBudget {
	b, err := deadline.NewRetryBudget(deadline.WithRetryRatio(0), deadline.WithMinRetryRate(0))
	if err != nil {
		panic(err)
	}
	return b
}

// runHTTP runs sc through the HTTP composition and returns its spans.
func runHTTP(t *testing.T, sc errorTypeScenario) []sdktrace.ReadOnlySpan {
	h := newHarness(t)
	arrived := make(chan struct{}, 1)
	url := "http://" + refusedAddr(t) + "/"
	if sc.handler != nil {
		srv := httptest.NewServer(sc.handler(arrived))
		defer srv.Close()
		url = srv.URL
	}
	base := http.RoundTripper(h.base)
	if sc.base != nil {
		base = sc.base
	}
	p := sc.policy
	p.Name = "step"
	client := &http.Client{Transport: otelbudgethttp.NewTransport(base, h.obs, deadlinehttp.WithPolicy(p))}
	ctx, cancel := context.WithCancel(deadline.NewContext(context.Background(), deadline.New(sc.budget)))
	defer cancel()
	if sc.cancel {
		go func() {
			<-arrived
			cancel()
		}()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	do := func() {
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			require.NoError(t, resp.Body.Close())
		}
	}
	if sc.panics {
		require.Panics(t, do)
	} else {
		do()
	}
	h.requireAllEnded(t)
	return h.rec.Ended()
}

// runPlain runs sc as an operation under the observer's Hooks, in a
// synctest bubble.
func runPlain(t *testing.T, sc errorTypeScenario) (ended []sdktrace.ReadOnlySpan) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p := sc.policy
		p.Name, p.Hooks = "step", h.obs.Hooks()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if sc.cancel {
			time.AfterFunc(10*time.Millisecond, cancel)
		}
		do := func() { _, _ = deadline.Do(ctx, deadline.New(sc.budget), p, sc.op) }
		if sc.panics {
			require.Panics(t, do)
		} else {
			do()
		}
		h.requireAllEnded(t)
		ended = h.rec.Ended()
	})
	return ended
}

// TestErrorTypesAreDocumented runs every scenario with and without HTTP,
// checks that both record the same error.type values, and that every
// value observed is in the set docs/attributes.md documents.
func TestErrorTypesAreDocumented(t *testing.T) {
	values, lo, hi := documentedErrorTypes(t)
	observed := map[string]bool{}
	for _, sc := range errorTypeScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			plain := recorded(t, runPlain(t, sc), "step")
			viaHTTP := recorded(t, runHTTP(t, sc), "step")
			assert.Equal(t, sc.want, plain, "without HTTP")
			assert.Equal(t, sc.want, viaHTTP, "through otelhttp")
			for _, v := range append(slices.Clone(plain.attempts), plain.call, viaHTTP.call) {
				observed[v] = true
			}
			for _, v := range viaHTTP.attempts {
				observed[v] = true
			}
		})
	}
	delete(observed, "")
	require.NotEmpty(t, observed)
	for v := range observed {
		if n, err := strconv.Atoi(v); err == nil {
			assert.True(t, n >= lo && n <= hi, "status code %s is in the documented range %d-%d", v, lo, hi)
			continue
		}
		assert.True(t, values[v], "error.type %q is documented in docs/attributes.md", v)
	}
	t.Logf("observed error.type values: %v", slices.Sorted(func(yield func(string) bool) {
		for v := range observed {
			if !yield(v) {
				return
			}
		}
	}))
}

package deadlinehttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests in this file run inside a synctest bubble, on virtual time,
// against handlers served in memory (memTransport): durations are exact.

// inMemory returns a Transport in front of h and the log of what h
// received. answer gets each request's 1-based number.
func inMemory(answer func(n int, w http.ResponseWriter, r *http.Request), opts ...deadlinehttp.Option) (*deadlinehttp.Transport, *reqLog) {
	l := &reqLog{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answer(l.record(r), w, r) })
	return deadlinehttp.NewTransport(memTransport{h}, opts...), l
}

func get(t *testing.T, ctx context.Context, tr http.RoundTripper) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc.test/x", nil)
	require.NoError(t, err)
	return tr.RoundTrip(req)
}

// TestRetryAfterWithinBudget: the retry after "Retry-After: 1" (or an
// HTTP-date 2 s ahead) arrives no sooner than the server asked, and the
// server's delay replaced the policy's backoff.
func TestRetryAfterWithinBudget(t *testing.T) {
	cases := []struct {
		name  string
		value func(now time.Time) string
		want  time.Duration
	}{
		{"delay-seconds", func(time.Time) string { return "1" }, time.Second},
		{"HTTP-date", func(now time.Time) string { return now.Add(2 * time.Second).UTC().Format(http.TimeFormat) }, 2 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var rec recorder
				tr, l := inMemory(func(n int, w http.ResponseWriter, r *http.Request) {
					if n == 1 {
						w.Header().Set("Retry-After", tc.value(time.Now()))
						w.WriteHeader(http.StatusServiceUnavailable)
						return
					}
					io.WriteString(w, "ok")
				}, deadlinehttp.WithHooks(rec.hooks()))

				resp, err := get(t, budgetCtx(5*time.Second), tr)
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)

				got := l.all()
				require.Len(t, got, 2)
				assert.GreaterOrEqual(t, got[1].At.Sub(got[0].At), tc.want, "the retry came sooner than Retry-After")
				require.Len(t, rec.backoffs, 1)
				assert.Equal(t, deadline.SourceRetryAfter, rec.backoffs[0].Source)
				assert.Equal(t, tc.want, rec.backoffs[0].Delay)
			})
		})
	}
}

// TestRetryAfterBeyondBudget: a Retry-After longer than what is left stops
// the call at once (no virtual time passes): the answer is returned whole,
// and StopOf gives the typed reason; the server saw one request. A value
// too large for the parser does too.
func TestRetryAfterBeyondBudget(t *testing.T) {
	cases := []struct {
		name     string
		status   int
		value    func(now time.Time) string
		wantWait time.Duration
	}{
		{"503 delay-seconds", http.StatusServiceUnavailable, func(time.Time) string { return "3" }, 3 * time.Second},
		{"429 HTTP-date", http.StatusTooManyRequests, func(now time.Time) string { return now.Add(3 * time.Second).UTC().Format(http.TimeFormat) }, 3 * time.Second},
		{"beyond MaxRetryAfter", http.StatusServiceUnavailable, func(time.Time) string { return "172800" }, 48 * time.Hour},
		{"overflowing", http.StatusServiceUnavailable, func(time.Time) string { return "99999999999999999999999" }, time.Duration(1<<63 - 1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr, l := inMemory(func(n int, w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Retry-After", tc.value(time.Now()))
					w.WriteHeader(tc.status)
					io.WriteString(w, "slow down")
				})
				start := time.Now()
				resp, err := get(t, budgetCtx(time.Second), tr)
				require.NoError(t, err)
				assert.Zero(t, time.Since(start), "stopped at once, without waiting")
				assert.Equal(t, tc.status, resp.StatusCode)
				body, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, "slow down", string(body))
				stop, ok := deadlinehttp.StopOf(resp)
				require.True(t, ok)
				assert.Equal(t, deadline.ReasonRetryAfterTooLong, stop.Reason)
				assert.Equal(t, tc.wantWait, stop.Wait)
				assert.ErrorIs(t, stop, deadline.ErrRetryAfterExceedsBudget)
				assert.ErrorIs(t, stop, context.DeadlineExceeded)
				se, ok := errors.AsType[*deadlinehttp.StatusError](stop)
				require.True(t, ok)
				assert.Same(t, resp, se.Response)
				assert.Len(t, l.all(), 1)
			})
		})
	}
}

// TestMalformedRetryAfterIgnored: garbage or a negative Retry-After is
// ignored and the policy's backoff applies.
func TestMalformedRetryAfterIgnored(t *testing.T) {
	for _, v := range []string{"soon", "-1", "1.5", "+2"} {
		t.Run(v, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var rec recorder
				p := fastPolicy(2)
				tr, l := inMemory(func(n int, w http.ResponseWriter, r *http.Request) {
					if n == 1 {
						w.Header().Set("Retry-After", v)
						w.WriteHeader(http.StatusServiceUnavailable)
					}
				}, deadlinehttp.WithPolicy(p), deadlinehttp.WithHooks(rec.hooks()))
				resp, err := get(t, budgetCtx(time.Second), tr)
				require.NoError(t, err)
				resp.Body.Close()
				got := l.all()
				require.Len(t, got, 2)
				require.Len(t, rec.backoffs, 1)
				assert.Equal(t, deadline.SourcePolicy, rec.backoffs[0].Source)
				assert.Equal(t, p.Backoff.Base, got[1].At.Sub(got[0].At))
			})
		})
	}
}

// TestBudgetHeaderIsTheLease: each attempt's header is exactly its granted
// lease in milliseconds (here whole), so never more than the grant, and it
// shrinks across attempts by the time spent.
func TestBudgetHeaderIsTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		p := deadline.DefaultPolicy()
		p.Backoff = deadline.Backoff{Base: 100 * time.Millisecond, Max: 400 * time.Millisecond, Jitter: deadline.JitterNone}
		tr, l := inMemory(func(n int, w http.ResponseWriter, r *http.Request) {
			time.Sleep(30 * time.Millisecond) // the server works a little
			w.WriteHeader(http.StatusServiceUnavailable)
		}, deadlinehttp.WithPolicy(p), deadlinehttp.WithHooks(rec.hooks()))

		resp, err := get(t, budgetCtx(2*time.Second), tr)
		require.NoError(t, err)
		resp.Body.Close()
		stop, ok := deadlinehttp.StopOf(resp)
		require.True(t, ok)
		require.ErrorIs(t, stop, deadline.ErrAttemptsExhausted)
		got := l.all()
		require.Len(t, got, 3)
		require.Len(t, rec.attempts, 3)
		// 2s - 20ms floor; then - (30ms + 100ms); then - (30ms + 200ms).
		want := []string{"1980", "1850", "1620"}
		for i, r := range got {
			assert.Equal(t, want[i], r.Budget, "attempt %d", i+1)
			d, ok := deadlinehttp.ParseBudget(r.Budget)
			require.True(t, ok)
			assert.LessOrEqual(t, d, rec.attempts[i].Granted, "attempt %d header exceeds its grant", i+1)
		}
	})
}

// TestAttemptCeilingRetried: an attempt that outlives its ceiling is cut,
// seen by the server as the end of its request, and retried.
func TestAttemptCeilingRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		p := deadline.DefaultPolicy()
		p.AttemptTimeout = 100 * time.Millisecond
		var serverErr error
		tr, l := inMemory(func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				<-r.Context().Done() // hangs until the client gives up
				serverErr = r.Context().Err()
				return
			}
			io.WriteString(w, "ok")
		}, deadlinehttp.WithPolicy(p), deadlinehttp.WithHooks(rec.hooks()))

		resp, err := get(t, budgetCtx(time.Second), tr)
		require.NoError(t, err)
		resp.Body.Close()
		require.Len(t, l.all(), 2)
		assert.ErrorIs(t, serverErr, context.Canceled)
		require.Len(t, rec.results, 2)
		assert.Equal(t, deadline.EndedAttemptTimeout, rec.results[0].EndedBy)
		assert.Equal(t, "100", l.all()[0].Budget, "the ceiling is the lease sent")
	})
}

// TestDefaultBudget: a request whose context has no deadline runs under
// WithDefaultBudget's, or DefaultBudget's.
func TestDefaultBudget(t *testing.T) {
	for _, tc := range []struct {
		opts []deadlinehttp.Option
		want time.Duration
	}{
		{nil, deadlinehttp.DefaultBudget},
		{[]deadlinehttp.Option{deadlinehttp.WithDefaultBudget(7 * time.Second)}, 7 * time.Second},
	} {
		synctest.Test(t, func(t *testing.T) {
			var rec recorder
			tr, l := inMemory(func(int, http.ResponseWriter, *http.Request) {}, append(tc.opts, deadlinehttp.WithHooks(rec.hooks()))...)
			resp, err := get(t, context.Background(), tr)
			require.NoError(t, err)
			resp.Body.Close()
			require.Len(t, rec.calls, 1)
			assert.Equal(t, tc.want, rec.calls[0].Budget)
			assert.Equal(t, "HTTP GET", rec.calls[0].Name)
			assert.Equal(t, deadlinehttp.FormatBudget(tc.want-20*time.Millisecond), l.all()[0].Budget)
		})
	}
}

// TestHooksAndAttemptContext: the context's, the policy's and WithHooks'
// hooks all observe the call, in that order, and the context an
// AttemptStart hook returns is the one the base transport receives, with
// the attempt's deadline.
func TestHooksAndAttemptContext(t *testing.T) {
	type key struct{}
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var order []string
		mark := func(name string) *deadline.Hooks {
			return &deadline.Hooks{AttemptStart: func(ctx context.Context, a deadline.AttemptInfo) context.Context {
				mu.Lock()
				defer mu.Unlock()
				order = append(order, name)
				return context.WithValue(ctx, key{}, name+"#"+string(rune('0'+a.Number)))
			}}
		}
		var seenVals []any
		var seenEnds []time.Time
		var grants []time.Time
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			seenVals = append(seenVals, r.Context().Value(key{}))
			end, _ := r.Context().Deadline()
			seenEnds = append(seenEnds, end)
			return &http.Response{StatusCode: http.StatusBadGateway, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
		})
		p := fastPolicy(2)
		p.Hooks = mark("policy")
		p.Hooks.AttemptEnd = func(ctx context.Context, a deadline.AttemptInfo, _ deadline.AttemptResult) {
			grants = append(grants, a.Start.Add(a.Granted))
		}
		tr := deadlinehttp.NewTransport(base, deadlinehttp.WithHooks(mark("option")), deadlinehttp.WithPolicy(p))
		ctx := deadline.WithHooks(budgetCtx(time.Second), mark("context"))
		resp, err := get(t, ctx, tr)
		require.NoError(t, err)
		stop, ok := deadlinehttp.StopOf(resp)
		require.True(t, ok)
		require.ErrorIs(t, stop, deadline.ErrAttemptsExhausted)
		assert.Equal(t, []string{"context", "policy", "option", "context", "policy", "option"}, order)
		assert.Equal(t, []any{"option#1", "option#2"}, seenVals)
		assert.Equal(t, grants, seenEnds, "the base transport's context ends with the attempt's lease")
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestStopReturnsLastAnswer: whatever stops the call after a retryable
// answer, that answer is the response (nil error), whole and unread, and
// StopOf says why; the hooks' CallEnd reports the same reason.
func TestStopReturnsLastAnswer(t *testing.T) {
	long := strings.Repeat("z", deadlinehttp.MaxDrain+10)
	cases := []struct {
		name     string
		method   string
		policy   func() deadline.Policy
		atLease  bool // the answer arrives as the lease ends
		reason   deadline.Reason
		attempts int
	}{
		{"backoff does not fit", http.MethodGet, func() deadline.Policy {
			p := fastPolicy(3)
			p.Backoff = deadline.Backoff{Base: 5 * time.Second, Max: 5 * time.Second, Jitter: deadline.JitterNone}
			return p
		}, false, deadline.ReasonBackoffTooLong, 1},
		{"classifier declines", http.MethodGet, func() deadline.Policy {
			p := fastPolicy(3)
			p.Retryable = func(error) bool { return false }
			return p
		}, false, deadline.ReasonNotRetryable, 1},
		{"POST without a key", http.MethodPost, func() deadline.Policy { return fastPolicy(3) }, false, deadline.ReasonNotRetryable, 1},
		{"attempts exhausted", http.MethodGet, func() deadline.Policy { return fastPolicy(2) }, false, deadline.ReasonExhausted, 2},
		{"answer as the deadline ends", http.MethodGet, func() deadline.Policy { return fastPolicy(3) }, true, deadline.ReasonDeadline, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var rec recorder
				n := 0
				base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					n++
					if tc.atLease {
						<-r.Context().Done()
					}
					return &http.Response{
						StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable",
						Header: http.Header{"X-Attempt": {strconv.Itoa(n)}}, Body: io.NopCloser(strings.NewReader(long)),
					}, nil
				})
				tr := deadlinehttp.NewTransport(base, deadlinehttp.WithPolicy(tc.policy()), deadlinehttp.WithHooks(rec.hooks()))
				req, err := http.NewRequestWithContext(budgetCtx(time.Second), tc.method, "http://svc.test/x", nil)
				require.NoError(t, err)
				req = req.WithContext(context.WithValue(req.Context(), reqKey{}, "caller's"))
				resp, err := tr.RoundTrip(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
				assert.Equal(t, strconv.Itoa(tc.attempts), resp.Header.Get("X-Attempt"), "the last answer")
				body, err := io.ReadAll(resp.Body)
				require.NoError(t, err)
				assert.Equal(t, long, string(body), "whole and unread")
				require.NotNil(t, resp.Request)
				assert.Equal(t, "caller's", resp.Request.Context().Value(reqKey{}), "resp.Request is the request sent")

				stop, ok := deadlinehttp.StopOf(resp)
				require.True(t, ok)
				assert.Equal(t, tc.reason, stop.Reason)
				assert.Equal(t, tc.attempts, stop.Attempts)
				require.Len(t, rec.ends, 1)
				assert.Equal(t, tc.reason, rec.ends[0].Reason, "CallEnd reports the same reason")
				assert.Same(t, stop, rec.ends[0].Err)
			})
		})
	}
}

// reqKey is unused by the transport: TestStopReturnsLastAnswer checks that
// resp.Request, which the transport fills in when the base leaves it nil,
// is the clone of the caller's request (its context carries the caller's
// values).
type reqKey struct{}

// TestCanceledDuringBackoff: a retryable answer is drained as soon as the
// retry is decided, before the wait; if the caller cancels during the
// wait, no answer remains to return: RoundTrip returns the StopError, whose
// last error is the drained StatusError.
func TestCanceledDuringBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(budgetCtx(time.Second))
		defer cancel()
		var rec recorder
		hooks := rec.hooks()
		hooks.Backoff = func(context.Context, deadline.BackoffInfo) { time.AfterFunc(10*time.Millisecond, cancel) }
		p := fastPolicy(3)
		p.Backoff = deadline.Backoff{Base: 100 * time.Millisecond, Max: 100 * time.Millisecond, Jitter: deadline.JitterNone}
		tr, l := inMemory(func(n int, w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "bad gateway")
		}, deadlinehttp.WithPolicy(p), deadlinehttp.WithHooks(hooks))
		resp, err := get(t, ctx, tr)
		assert.Nil(t, resp)
		assert.ErrorIs(t, err, context.Canceled)
		stop, ok := errors.AsType[*deadline.StopError](err)
		require.True(t, ok, "%v", err)
		assert.Equal(t, deadline.ReasonCanceled, stop.Reason)
		se, ok := errors.AsType[*deadlinehttp.StatusError](err)
		require.True(t, ok)
		assert.Equal(t, http.StatusBadGateway, se.StatusCode())
		body, _ := io.ReadAll(se.Response.Body)
		assert.Equal(t, "bad gateway", string(body), "the drained bytes")
		assert.Len(t, l.all(), 1)
	})
}

// trickle is a response body that yields one byte every 10ms, forever,
// until its request's context ends or it is closed (as a connection being
// closed would end a read).
type trickle struct {
	ctx    context.Context
	closed chan struct{}
	once   sync.Once
}

func newTrickle(ctx context.Context) *trickle {
	return &trickle{ctx: ctx, closed: make(chan struct{})}
}

func (b *trickle) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	select {
	case <-time.After(10 * time.Millisecond):
		p[0] = 'x'
		return 1, nil
	case <-b.ctx.Done():
		return 0, context.Cause(b.ctx)
	case <-b.closed:
		return 0, errors.New("read on a closed body")
	}
}

func (b *trickle) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// TestDrainBoundedInTime: a discarded 503 whose body trickles is drained
// for MaxDrainTime at most, then closed, and the retry gets the rest of the
// budget; on a tight budget the drain takes at most half of what the retry
// will be granted, so that the retry still happens.
func TestDrainBoundedInTime(t *testing.T) {
	cases := []struct {
		name      string
		budget    time.Duration
		wantRetry time.Duration // when attempt 2 starts
	}{
		{"MaxDrainTime", 2 * time.Second, deadlinehttp.MaxDrainTime + 5*time.Millisecond},
		// 60ms - 5ms backoff - 20ms floor = 35ms for the retry: drain 17.5ms.
		{"half of the retry's grant", 60 * time.Millisecond, 17500*time.Microsecond + 5*time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var rec recorder
				var starts []time.Time
				var first *trickle
				base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
					starts = append(starts, time.Now())
					if len(starts) == 1 {
						first = newTrickle(r.Context())
						return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}, Body: first}, nil
					}
					return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok"))}, nil
				})
				tr := deadlinehttp.NewTransport(base, deadlinehttp.WithPolicy(fastPolicy(3)), deadlinehttp.WithHooks(rec.hooks()))
				start := time.Now()
				resp, err := get(t, budgetCtx(tc.budget), tr)
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				require.Len(t, starts, 2)
				assert.Equal(t, tc.wantRetry, starts[1].Sub(start))

				require.Len(t, rec.results, 2)
				se, ok := errors.AsType[*deadlinehttp.StatusError](rec.results[0].Err)
				require.True(t, ok)
				assert.True(t, se.Truncated, "the drain stopped before the body's end")
				drained, _ := io.ReadAll(se.Response.Body)
				assert.NotEmpty(t, drained)
				select {
				case <-first.closed:
				default:
					t.Error("the trickling body was not closed")
				}
			})
		})
	}
}

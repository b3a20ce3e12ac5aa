package deadlinehttp_test

import (
	"io"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// retryBudget returns a budget that allows reserve retries over an hour
// and no share of first attempts: tests that read it never see it move
// with time.
func retryBudget(t *testing.T, reserve int) *deadline.RetryBudget {
	t.Helper()
	b, err := deadline.NewRetryBudget(deadline.WithRetryRatio(0), deadline.WithRetryWindow(time.Hour),
		deadline.WithMinRetryRate(float64(reserve)/3600))
	require.NoError(t, err)
	return b
}

// TestRetryBudgetDeniedReturnsLastAnswer: a retry the budget denies is not
// sent, and the answer it would have retried is the response, whole and
// unread (not drained as a retry would drain it), with the stop reason.
func TestRetryBudgetDeniedReturnsLastAnswer(t *testing.T) {
	s := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "busy #"+strconv.Itoa(n))
	})
	rec := &recorder{}
	c := client(s, deadlinehttp.WithPolicy(fastPolicy(3)), deadlinehttp.WithRetryBudget(retryBudget(t, 0)), deadlinehttp.WithHooks(rec.hooks()))
	req, err := http.NewRequestWithContext(budgetCtx(5*time.Second), http.MethodGet, s.URL, nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "busy #1", string(body))
	assert.Len(t, s.all(), 1, "the denied retry was not sent")
	stop, ok := deadlinehttp.StopOf(resp)
	require.True(t, ok)
	assert.Equal(t, deadline.ReasonRetryBudget, stop.Reason)
	assert.ErrorIs(t, stop, deadline.ErrRetryBudgetExhausted)
	require.Len(t, rec.backoffs, 1)
	assert.True(t, rec.backoffs[0].RetryDenied)
	c.CloseIdleConnections()
	s.waitAllClosed(t)
}

// TestRetryBudgetSharedByRequests: one Transport's budget is shared by all
// its requests; a policy with a budget of its own keeps it.
func TestRetryBudgetSharedByRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared := retryBudget(t, 2)
		tr, l := inMemory(func(n int, w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
		}, deadlinehttp.WithPolicy(fastPolicy(3)), deadlinehttp.WithRetryBudget(shared))
		for _, want := range []deadline.Reason{deadline.ReasonExhausted, deadline.ReasonRetryBudget} {
			resp, err := get(t, budgetCtx(5*time.Second), tr)
			require.NoError(t, err)
			resp.Body.Close()
			stop, ok := deadlinehttp.StopOf(resp)
			require.True(t, ok)
			assert.Equal(t, want, stop.Reason)
		}
		assert.Len(t, l.all(), 4, "3 attempts, then 1: the two retries were the budget's")
		assert.Equal(t, 0, shared.Balance())

		own := fastPolicy(2)
		own.RetryBudget = retryBudget(t, 1)
		resp, err := get(t, deadlinehttp.WithRequestPolicy(budgetCtx(5*time.Second), own), tr)
		require.NoError(t, err)
		resp.Body.Close()
		stop, _ := deadlinehttp.StopOf(resp)
		assert.Equal(t, deadline.ReasonExhausted, stop.Reason, "the policy's own budget allowed the retry")
		assert.Equal(t, 0, own.RetryBudget.Balance())
	})
}

// TestOverloadCharge: a 503 or 429 without Retry-After charges the budget
// (so the second retry is denied); one with a Retry-After does not, nor a
// 503 that shed the request from a standing queue (Deadline-Refused
// reason=standing_queue).
func TestOverloadCharge(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter string
		refused    string
		opts       []deadlinehttp.Option
		requests   int
		reason     deadline.Reason
		balance    int
	}{
		// 5 tokens: 503, charge 2 (3), retry (2); 503, charge 2 (0), denied.
		{"503", http.StatusServiceUnavailable, "", "", []deadlinehttp.Option{deadlinehttp.WithOverloadCharge(2)}, 2, deadline.ReasonRetryBudget, 0},
		{"429", http.StatusTooManyRequests, "", "", []deadlinehttp.Option{deadlinehttp.WithOverloadCharge(2)}, 2, deadline.ReasonRetryBudget, 0},
		{"Retry-After", http.StatusServiceUnavailable, "0", "", []deadlinehttp.Option{deadlinehttp.WithOverloadCharge(2)}, 3, deadline.ReasonExhausted, 3},
		{"shed from a standing queue", http.StatusServiceUnavailable, "", "budget-ms=300, floor-ms=0, reason=standing_queue", []deadlinehttp.Option{deadlinehttp.WithOverloadCharge(2)}, 3, deadline.ReasonExhausted, 3},
		{"another reason on a 503", http.StatusServiceUnavailable, "", "budget-ms=300, floor-ms=0, reason=queue_full", []deadlinehttp.Option{deadlinehttp.WithOverloadCharge(2)}, 2, deadline.ReasonRetryBudget, 0},
		{"not an overload status", http.StatusBadGateway, "", "", []deadlinehttp.Option{deadlinehttp.WithOverloadCharge(2)}, 3, deadline.ReasonExhausted, 3},
		{"off by default", http.StatusServiceUnavailable, "", "", nil, 3, deadline.ReasonExhausted, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := retryBudget(t, 5)
				opts := append([]deadlinehttp.Option{deadlinehttp.WithPolicy(fastPolicy(3)), deadlinehttp.WithRetryBudget(b)}, tc.opts...)
				tr, l := inMemory(func(n int, w http.ResponseWriter, r *http.Request) {
					if tc.retryAfter != "" {
						w.Header().Set("Retry-After", tc.retryAfter)
					}
					if tc.refused != "" {
						w.Header().Set(deadlinehttp.RefusedHeader, tc.refused)
					}
					w.WriteHeader(tc.status)
				}, opts...)
				resp, err := get(t, budgetCtx(5*time.Second), tr)
				require.NoError(t, err)
				resp.Body.Close()
				stop, ok := deadlinehttp.StopOf(resp)
				require.True(t, ok)
				assert.Equal(t, tc.reason, stop.Reason)
				assert.Len(t, l.all(), tc.requests)
				assert.Equal(t, tc.balance, b.Balance())
			})
		})
	}
}

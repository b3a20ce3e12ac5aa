package deadlinehttp_test

import (
	"context"
	"errors"
	"net/http"
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

// step returns a policy named name with its own attempts and ceiling, the
// 20ms floor and a short unjittered backoff, and hooks recording its calls.
func step(name string, attempts int, ceiling time.Duration, rec *recorder) deadline.Policy {
	return deadline.Policy{
		Name: name, MaxAttempts: attempts, AttemptTimeout: ceiling, Floor: 20 * time.Millisecond,
		Backoff: deadline.Backoff{Base: 5 * time.Millisecond, Max: 5 * time.Millisecond, Jitter: deadline.JitterNone},
		Hooks:   rec.hooks(),
	}
}

// TestOneClientManyPolicies: one shared http.Client sends three requests,
// each under its own policy: one from its context, one from the policy
// function, one from WithPolicy. Each is seen on the wire with its own
// lease and number of attempts, and in the hooks with its own name,
// attempts and ceiling; WithHooks observes all three, each policy's own
// hooks only its calls.
func TestOneClientManyPolicies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var all, searchRec, fetchRec, defRec recorder
		var mu sync.Mutex
		wire := map[string][]string{} // path -> budget header of each attempt
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			wire[r.URL.Path] = append(wire[r.URL.Path], r.Header.Get(deadlinehttp.DefaultHeader))
			mu.Unlock()
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		fetch := step("fetch", 3, 100*time.Millisecond, &fetchRec)
		tr := deadlinehttp.NewTransport(memTransport{h},
			deadlinehttp.WithPolicy(step("", 1, 0, &defRec)),
			deadlinehttp.WithPolicyFunc(func(r *http.Request) (deadline.Policy, bool) {
				return fetch, r.URL.Path == "/fetch"
			}),
			deadlinehttp.WithHooks(all.hooks()))
		client := &http.Client{Transport: tr}

		send := func(ctx context.Context, path string) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc.test"+path, nil)
			require.NoError(t, err)
			resp, err := client.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		}
		send(deadlinehttp.WithRequestPolicy(budgetCtx(time.Second), step("search", 2, 250*time.Millisecond, &searchRec)), "/search")
		send(budgetCtx(time.Second), "/fetch")
		send(budgetCtx(time.Second), "/other")

		assert.Equal(t, map[string][]string{
			"/search": {"250", "250"},
			"/fetch":  {"100", "100", "100"},
			"/other":  {"980"}, // no ceiling: 1s less the 20ms floor
		}, wire)

		require.Len(t, all.calls, 3)
		type seen struct {
			name     string
			attempts int
			ceiling  time.Duration
		}
		var got []seen
		for _, c := range all.calls {
			got = append(got, seen{c.Name, c.MaxAttempts, c.Ceiling})
		}
		assert.Equal(t, []seen{{"search", 2, 250 * time.Millisecond}, {"fetch", 3, 100 * time.Millisecond}, {"HTTP GET", 1, 0}}, got)
		require.Len(t, all.ends, 3)
		for _, e := range all.ends {
			assert.Equal(t, deadline.ReasonExhausted, e.Reason, e.Name)
		}
		assert.Len(t, all.attempts, 6)

		for _, tc := range []struct {
			rec  *recorder
			name string
			n    int
		}{{&searchRec, "search", 2}, {&fetchRec, "fetch", 3}, {&defRec, "HTTP GET", 1}} {
			require.Len(t, tc.rec.calls, 1, "%s's own hooks observe its call only", tc.name)
			assert.Equal(t, tc.name, tc.rec.calls[0].Name)
			assert.Len(t, tc.rec.attempts, tc.n, tc.name)
		}
	})
}

// TestRequestPolicyPrecedence: the context's policy beats the policy
// function's, which beats WithPolicy's; a function that declines leaves
// the request to WithPolicy.
func TestRequestPolicyPrecedence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		called := 0
		tr, _ := inMemory(func(int, http.ResponseWriter, *http.Request) {},
			deadlinehttp.WithPolicy(deadline.Policy{Name: "option", MaxAttempts: 1}),
			deadlinehttp.WithPolicyFunc(func(r *http.Request) (deadline.Policy, bool) {
				called++
				return deadline.Policy{Name: "func", MaxAttempts: 1}, r.URL.Path == "/f"
			}),
			deadlinehttp.WithHooks(rec.hooks()))
		send := func(ctx context.Context, path string) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc.test"+path, nil)
			require.NoError(t, err)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
		}
		send(deadlinehttp.WithRequestPolicy(budgetCtx(time.Second), deadline.Policy{Name: "context", MaxAttempts: 1}), "/f")
		send(budgetCtx(time.Second), "/f")
		send(budgetCtx(time.Second), "/other")
		var names []string
		for _, c := range rec.calls {
			names = append(names, c.Name)
		}
		assert.Equal(t, []string{"context", "func", "option"}, names)
		assert.Equal(t, 2, called, "the function is not asked when the context chose")
	})
}

// TestRequestPolicy: RequestPolicy returns what WithRequestPolicy stored,
// through derived contexts, the latest one winning; a copy both ways, so
// neither the caller's value nor the one returned changes the context's;
// nothing (and the zero Policy) for a context without one. A Transport
// runs the request under that policy, its own hooks composed after.
func TestRequestPolicy(t *testing.T) {
	p, ok := deadlinehttp.RequestPolicy(context.Background())
	assert.False(t, ok)
	assert.Zero(t, p.Name)
	assert.Zero(t, p.MaxAttempts)

	fetch := deadline.Policy{Name: "fetch", MaxAttempts: 3, AttemptTimeout: 100 * time.Millisecond}
	ctx := deadlinehttp.WithRequestPolicy(context.Background(), fetch)
	fetch.Name = "changed"
	derived, cancel := context.WithCancel(ctx)
	defer cancel()
	p, ok = deadlinehttp.RequestPolicy(derived)
	require.True(t, ok)
	assert.Equal(t, "fetch", p.Name)
	assert.Equal(t, 3, p.MaxAttempts)
	assert.Equal(t, 100*time.Millisecond, p.AttemptTimeout)
	p.Name = "changed"
	p, _ = deadlinehttp.RequestPolicy(ctx)
	assert.Equal(t, "fetch", p.Name)

	p, ok = deadlinehttp.RequestPolicy(deadlinehttp.WithRequestPolicy(derived, deadline.Policy{Name: "search", MaxAttempts: 1}))
	require.True(t, ok)
	assert.Equal(t, "search", p.Name)

	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		tr, _ := inMemory(func(int, http.ResponseWriter, *http.Request) {}, deadlinehttp.WithHooks(rec.hooks()))
		stored := deadline.Policy{Name: "fetch", MaxAttempts: 1}
		ctx := deadlinehttp.WithRequestPolicy(budgetCtx(time.Second), stored)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc.test/f", nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		got, ok := deadlinehttp.RequestPolicy(req.Context())
		require.True(t, ok)
		require.Len(t, rec.calls, 1)
		assert.Equal(t, got.Name, rec.calls[0].Name)
		assert.Nil(t, got.Hooks, "the Transport's hooks are composed into its own copy, not the context's")
	})
}

// TestInvalidRequestPolicy: an invalid policy from the context or from the
// function fails that RoundTrip with its PolicyError, sends nothing and
// closes the body; the Transport's other requests are unaffected.
func TestInvalidRequestPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr, l := inMemory(func(int, http.ResponseWriter, *http.Request) {},
			deadlinehttp.WithPolicyFunc(func(r *http.Request) (deadline.Policy, bool) {
				return deadline.Policy{MaxAttempts: 1, Floor: -time.Second}, r.URL.Path == "/bad"
			}))
		for _, tc := range []struct {
			ctx   context.Context
			path  string
			field string
		}{
			{deadlinehttp.WithRequestPolicy(budgetCtx(time.Second), deadline.Policy{}), "/ok", "Policy.MaxAttempts"},
			{budgetCtx(time.Second), "/bad", "Policy.Floor"},
		} {
			body := &closeRecorder{Reader: strings.NewReader("x")}
			req, err := http.NewRequestWithContext(tc.ctx, http.MethodPut, "http://svc.test"+tc.path, body)
			require.NoError(t, err)
			resp, err := tr.RoundTrip(req)
			assert.Nil(t, resp)
			require.ErrorIs(t, err, deadline.ErrInvalidPolicy)
			pe, ok := errors.AsType[*deadline.PolicyError](err)
			require.True(t, ok)
			assert.Equal(t, tc.field, pe.Field)
			assert.True(t, body.closed, "the request body is closed")
		}
		assert.Empty(t, l.all(), "nothing was sent")

		req, err := http.NewRequestWithContext(budgetCtx(time.Second), http.MethodGet, "http://svc.test/ok", nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
	})
}

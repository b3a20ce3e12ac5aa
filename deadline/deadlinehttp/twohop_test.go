package deadlinehttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hop is what one server of a chain observed.
type hop struct {
	budget  time.Duration // deadline.FromContext(r.Context()).Budget()
	end     time.Time     // that deadline's End
	ctxErr  error         // the request context's error when its work ended
	callErr error         // the error of the call to the next hop, if any
}

// chain builds client → A → B: A and B behind NewHandler, A calling B with
// a Transport over baseB (3 attempts), B working until its context ends
// (answering 504 then, as a server out of time would: whether B's own
// deadline or A's cancellation comes first, A's retry no longer fits). It returns A's handler and the
// records; the caller serves A over baseA's side.
func chain(baseB func(http.Handler) http.RoundTripper) (a http.Handler, ah, bh *hop) {
	ah, bh = &hop{}, &hop{}
	b := mustHandler(deadlinehttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := deadline.FromContext(r.Context())
		bh.budget, bh.end = d.Budget(), d.End()
		<-r.Context().Done() // B's work: as long as it is allowed
		bh.ctxErr = r.Context().Err()
		w.WriteHeader(http.StatusGatewayTimeout)
	}), deadlinehttp.WithMaxBudget(time.Minute)))
	toB := &http.Client{Transport: deadlinehttp.NewTransport(baseB(b), deadlinehttp.WithPolicy(fastPolicy(3)))}
	a = mustHandler(deadlinehttp.NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := deadline.FromContext(r.Context())
		ah.budget, ah.end = d.Budget(), d.End()
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://b.test/work", nil)
		if bURL, ok := r.Context().Value(bURLKey{}).(string); ok {
			req.URL, _ = req.URL.Parse(bURL)
		}
		resp, err := toB.Do(req)
		if err == nil {
			if stop, ok := deadlinehttp.StopOf(resp); ok {
				err = stop // B's answer came with the end of A's lease
			}
			resp.Body.Close()
		}
		ah.callErr = err
		ah.ctxErr = r.Context().Err()
		w.WriteHeader(http.StatusGatewayTimeout)
	}), deadlinehttp.WithMaxBudget(time.Minute)))
	return a, ah, bh
}

type bURLKey struct{}

// TestTwoHopsInMemory: on virtual time the budget shrinks exactly by each
// hop's floor, and A's deadline ends B's work before A's own deadline.
func TestTwoHopsInMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, ah, bh := chain(func(b http.Handler) http.RoundTripper { return memTransport{b} })
		c := deadlinehttp.NewTransport(memTransport{a}, deadlinehttp.WithPolicy(fastPolicy(1)))
		start := time.Now()
		resp, err := get(t, budgetCtx(time.Second), c)
		if err == nil {
			resp.Body.Close()
		}

		assert.Equal(t, 980*time.Millisecond, ah.budget, "A got the client's lease: 1s less its 20ms floor")
		assert.Equal(t, 960*time.Millisecond, bh.budget, "B got A's lease: A's budget less A's floor")
		assert.Less(t, bh.budget, ah.budget)
		assert.Equal(t, start.Add(960*time.Millisecond), bh.end)
		assert.True(t, !bh.end.After(ah.end), "B's deadline %v is within A's %v", bh.end, ah.end)
		require.Error(t, bh.ctxErr, "B's work was ended by its context")
		require.Error(t, ah.callErr)
		stop, ok := errors.AsType[*deadline.StopError](ah.callErr)
		require.True(t, ok, "%v", ah.callErr)
		assert.True(t, stop.Reason.Budget(), "A's call to B stopped on the budget: %v", stop.Reason)
		assert.ErrorIs(t, ah.callErr, context.DeadlineExceeded)
		assert.NoError(t, ah.ctxErr, "A still had its floor left to answer in")
	})
}

// TestTwoHopsLoopback: the same chain over real loopback servers: B sees a
// smaller budget than A received, and B's work ends because A's deadline
// does, long before B's own one-minute maximum.
func TestTwoHopsLoopback(t *testing.T) {
	var bServer *server
	a, ah, bh := chain(func(b http.Handler) http.RoundTripper {
		bServer = newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) { b.ServeHTTP(w, r) })
		return bServer.Client().Transport
	})
	aServer := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		a.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), bURLKey{}, bServer.URL)))
	})

	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(budgetCtx(500*time.Millisecond), http.MethodGet, aServer.URL, nil)
		resp, err := client(aServer, deadlinehttp.WithPolicy(fastPolicy(1))).Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the chain did not end: A's deadline did not reach B")
	}
	aServer.Close() // waits for A's handler, which waited for B's answer
	bServer.Close()

	require.Positive(t, ah.budget)
	assert.LessOrEqual(t, ah.budget, 480*time.Millisecond, "A got at most the client's lease")
	assert.Less(t, bh.budget, ah.budget, "B sees a smaller budget than A received")
	require.Error(t, bh.ctxErr, "B's work was ended by its context")
	// A's call to B ends on the budget, or, when the wire was slower than
	// A's floor, because the client's own lease (which A's budget came
	// from) ended first and closed A's request: the same deadline either way.
	stop, ok := errors.AsType[*deadline.StopError](ah.callErr)
	require.True(t, ok, "%v", ah.callErr)
	assert.True(t, stop.Reason.Budget() || stop.Reason == deadline.ReasonCanceled, "A's call to B stopped with %v", stop.Reason)
	assert.Less(t, bh.end.Sub(ah.end), time.Minute/2, "B's deadline derives from A's, not from B's own maximum")
}

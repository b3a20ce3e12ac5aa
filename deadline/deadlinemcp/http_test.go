package deadlinemcp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
)

// These tests run the real SDK over streamable HTTP on loopback, in real
// time: they assert what was sent and what ended, never how long it took.

// wire counts the tools/call POSTs that reach the HTTP server, and answers
// the first reject of them with 503 before the MCP handler sees them.
type wire struct {
	next   http.Handler
	mu     sync.Mutex
	calls  int
	reject int
}

func (w *wire) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if strings.Contains(string(body), `"method":"tools/call"`) {
			w.mu.Lock()
			w.calls++
			rejected := w.calls <= w.reject
			w.mu.Unlock()
			if rejected {
				http.Error(rw, "overloaded", http.StatusServiceUnavailable)
				return
			}
		}
	}
	w.next.ServeHTTP(rw, r)
}

func (w *wire) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls
}

// connectHTTP serves s over streamable HTTP on loopback and connects c to
// it; everything closes at cleanup.
func connectHTTP(t *testing.T, s *mcp.Server, c *mcp.Client, reject int) (*mcp.ClientSession, *wire) {
	t.Helper()
	w := &wire{next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil), reject: reject}
	ts := httptest.NewServer(w)
	transport := &mcp.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: ts.Client(), DisableStandaloneSSE: true, MaxRetries: -1}
	cs, err := c.Connect(context.Background(), transport, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.Close()
		ts.Close()
	})
	return cs, w
}

// Over HTTP the budget on the wire is each attempt's lease and shrinks:
// the second attempt gets what the first left, less than the first's
// ceiling; the first attempt's handler is cut at its lease.
func TestHTTPBudgetShrinksAndHangingToolCut(t *testing.T) {
	rec := &admissions{}
	search := &tool{name: "search", annotations: readOnly(), behave: hangFirst(1)}
	mc, _, g := newClient(t)
	cs, w := connectHTTP(t, newServer(t, newBudgetServer(t, rec), search), mc, 0)
	listTools(t, cs)

	p := deadline.Policy{Name: "search", MaxAttempts: 2, AttemptTimeout: 600 * time.Millisecond, Floor: 20 * time.Millisecond}
	_, err := call(cs, time.Second, p, "search")
	require.NoError(t, err)

	got := search.arrivals()
	require.Len(t, got, 2)
	assert.Equal(t, 2, w.count())
	leases := g.list()
	require.Len(t, leases, 2)
	assert.Equal(t, 600*time.Millisecond, leases[0])
	assert.Less(t, leases[1], leases[0], "the second lease is what the first left")
	for i, a := range got {
		assert.LessOrEqual(t, a.Meta, ms(leases[i]), "attempt %d sends at most its lease", i+1)
		assert.Greater(t, a.Meta, float64(0))
		assert.True(t, a.HasLimit)
		assert.LessOrEqual(t, a.Left, time.Duration(a.Meta.(float64))*time.Millisecond, "the handler's deadline is at most the budget sent")
	}
	// Its own deadline (the lease, from _meta) and the client's
	// notifications/cancelled end it at about the same time: either cause.
	cause := got[0].WaitEnded(t)
	assert.True(t, errors.Is(cause, deadline.ErrDeadlineReached) || errors.Is(cause, context.Canceled), "cause %v", cause)
}

// Over HTTP, a server without budget middleware still learns, through
// notifications/cancelled, that the caller has gone.
func TestHTTPCancellationReachesServer(t *testing.T) {
	search := &tool{name: "search", behave: hangFirst(1)}
	mc, _, _ := newClient(t)
	cs, _ := connectHTTP(t, newServer(t, nil, search), mc, 0)
	_, err := call(cs, 5*time.Second, deadline.Policy{MaxAttempts: 1, AttemptTimeout: 200 * time.Millisecond}, "search")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	got := search.arrivals()
	require.Len(t, got, 1)
	assert.False(t, got[0].HasLimit)
	assert.ErrorIs(t, got[0].WaitEnded(t), context.Canceled)
}

// A 503 from the HTTP server is a transient failure: retried for a
// read-only tool, not for a tool without annotations.
func TestHTTPTransientRejection(t *testing.T) {
	t.Run("read-only: retried", func(t *testing.T) {
		search := &tool{name: "search", annotations: readOnly()}
		mc, _, _ := newClient(t)
		cs, w := connectHTTP(t, newServer(t, nil, search), mc, 1)
		listTools(t, cs)
		_, err := call(cs, 5*time.Second, deadline.Policy{MaxAttempts: 2}, "search")
		require.NoError(t, err)
		assert.Equal(t, 2, w.count())
		assert.Len(t, search.arrivals(), 1)
	})
	t.Run("no annotations: sent once", func(t *testing.T) {
		search := &tool{name: "search"}
		mc, _, _ := newClient(t)
		cs, w := connectHTTP(t, newServer(t, nil, search), mc, 1)
		listTools(t, cs)
		_, err := call(cs, 5*time.Second, deadline.Policy{MaxAttempts: 2}, "search")
		var stop *deadline.StopError
		require.ErrorAs(t, err, &stop)
		assert.Equal(t, deadline.ReasonNotRetryable, stop.Reason)
		assert.Equal(t, 1, w.count())
		assert.Empty(t, search.arrivals())
	})
}

// Refusal on both sides over HTTP: below the client's floor nothing is
// sent; below the server's floor the server answers CodeBudgetRefused.
func TestHTTPRefusals(t *testing.T) {
	rec := &admissions{}
	search := &tool{name: "search", annotations: readOnly()}
	mc, _, _ := newClient(t)
	srv := newBudgetServer(t, rec, deadlinemcp.WithFloor(time.Second))
	cs, w := connectHTTP(t, newServer(t, srv, search), mc, 0)

	_, err := call(cs, 10*time.Millisecond, deadline.Policy{MaxAttempts: 2, Floor: 20 * time.Millisecond}, "search")
	require.ErrorIs(t, err, deadline.ErrRefused)
	assert.Zero(t, w.count(), "nothing sent below the client's floor")

	_, err = call(cs, 500*time.Millisecond, deadline.Policy{MaxAttempts: 2}, "search")
	var we *jsonrpc.Error
	require.ErrorAs(t, err, &we)
	assert.Equal(t, int64(deadlinemcp.CodeBudgetRefused), we.Code)
	assert.Contains(t, we.Message, "floor-ms=1000")
	assert.Equal(t, 1, w.count())
	assert.Empty(t, search.arrivals())
}

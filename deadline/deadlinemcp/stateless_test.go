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

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
)

// cancelSeen closes served once the HTTP server has finished a POST that
// carried notifications/cancelled.
type cancelSeen struct {
	next   http.Handler
	served chan struct{}
	once   sync.Once
}

func (c *cancelSeen) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	c.next.ServeHTTP(rw, r)
	if strings.Contains(string(body), `"notifications/cancelled"`) {
		c.once.Do(func() { close(c.served) })
	}
}

// connectStateless serves s over a stateless streamable HTTP handler with
// opts on loopback, and connects c to it with the session options so.
// When filter is not nil the handler is served behind its HTTPHandler.
func connectStateless(t *testing.T, s *mcp.Server, c *mcp.Client, opts mcp.StreamableHTTPOptions, so *mcp.ClientSessionOptions, filter *deadlinemcp.Server) (*mcp.ClientSession, chan struct{}) {
	t.Helper()
	opts.Stateless = true
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &opts)
	if filter != nil {
		h = filter.HTTPHandler(h)
	}
	seen := &cancelSeen{next: h, served: make(chan struct{})}
	ts := httptest.NewServer(seen)
	transport := &mcp.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: ts.Client(), DisableStandaloneSSE: true, MaxRetries: -1}
	cs, err := c.Connect(context.Background(), transport, so)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.Close()
		ts.Close()
	})
	return cs, seen.served
}

// waitClosed waits for ch; the bound only keeps a broken build from
// hanging.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal(what)
	}
}

// On a stateless streamable HTTP server, each POST is a session of its
// own, so the notifications/cancelled the SDK sends when a lease ends
// lands on a new session and cancels nothing: the handler keeps running
// for a caller who has gone. It is ended by the server's
// PropagateRequestCancellation (the client's POST ends with the lease, and
// with it the handler's context), or by the budget middleware (the lease
// is the handler's deadline).
func TestStatelessHTTPCancellation(t *testing.T) {
	lease := deadline.Policy{MaxAttempts: 1, AttemptTimeout: 200 * time.Millisecond}

	t.Run("neither: the handler outlives the caller", func(t *testing.T) {
		release := make(chan struct{})
		search := &tool{name: "search", behave: func(ctx context.Context, _ int) (*mcp.CallToolResult, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-release:
				return text("late"), nil
			}
		}}
		mc, _, _ := newClient(t)
		cs, cancelled := connectStateless(t, newServer(t, nil, search), mc, mcp.StreamableHTTPOptions{}, nil, nil)
		defer close(release)
		_, err := call(cs, 5*time.Second, lease, "search")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		waitClosed(t, cancelled, "the client never sent notifications/cancelled")
		got := search.arrivals()
		require.Len(t, got, 1)
		select {
		case cause := <-got[0].Ended:
			t.Fatalf("the handler's context ended (%v): the SDK now cancels on a stateless server; update docs/mcp.md", cause)
		default:
		}
	})

	t.Run("PropagateRequestCancellation: canceled", func(t *testing.T) {
		search := &tool{name: "search", behave: hangFirst(1)}
		mc, _, _ := newClient(t)
		cs, _ := connectStateless(t, newServer(t, nil, search), mc, mcp.StreamableHTTPOptions{PropagateRequestCancellation: true}, nil, nil)
		_, err := call(cs, 5*time.Second, lease, "search")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		got := search.arrivals()
		require.Len(t, got, 1)
		assert.False(t, got[0].HasLimit, "no budget middleware")
		assert.ErrorIs(t, got[0].WaitEnded(t), context.Canceled)
	})

	// A caller who sends no budget (a plain SDK client) gets the server's
	// 30 s maximum; behind Server.HTTPHandler the handler's context ends
	// when the caller drops its POST, on any protocol version.
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("Server.HTTPHandler: canceled, protocol "+version, func(t *testing.T) {
			srv, err := deadlinemcp.NewServer()
			require.NoError(t, err)
			search := &tool{name: "search", behave: hangFirst(1)}
			var so *mcp.ClientSessionOptions
			if version != "" {
				so = &mcp.ClientSessionOptions{ProtocolVersion: version}
			}
			cs, _ := connectStateless(t, newServer(t, srv, search), mcp.NewClient(impl, nil), mcp.StreamableHTTPOptions{}, so, srv)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "search"})
			require.ErrorIs(t, err, context.DeadlineExceeded)
			got := search.arrivals()
			require.Len(t, got, 1)
			require.True(t, got[0].HasLimit)
			assert.Greater(t, got[0].Left, 10*time.Second, "the server's maximum: no budget was sent")
			cause := got[0].WaitEnded(t)
			assert.ErrorIs(t, cause, context.Canceled)
			assert.NotErrorIs(t, cause, deadline.ErrDeadlineReached)
		})
	}

	t.Run("budget middleware: ended at its lease", func(t *testing.T) {
		srv, err := deadlinemcp.NewServer()
		require.NoError(t, err)
		search := &tool{name: "search", behave: hangFirst(1)}
		mc, _, _ := newClient(t)
		cs, _ := connectStateless(t, newServer(t, srv, search), mc, mcp.StreamableHTTPOptions{}, nil, nil)
		_, err = call(cs, 5*time.Second, lease, "search")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		got := search.arrivals()
		require.Len(t, got, 1)
		assert.True(t, got[0].HasLimit)
		cause := got[0].WaitEnded(t)
		assert.True(t, errors.Is(cause, deadline.ErrDeadlineReached), "cause %v", cause)
	})
}

// Behind Server.HTTPHandler a stateful server's handler is not ended by
// the end of the POST that opened its session: it keeps its budget.
func TestHTTPHandlerStatefulNotCanceled(t *testing.T) {
	srv, err := deadlinemcp.NewServer()
	require.NoError(t, err)
	var live []error
	var mu sync.Mutex
	s := mcp.NewServer(impl, nil)
	s.AddReceivingMiddleware(srv.Middleware())
	s.AddTool(&mcp.Tool{Name: "search", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			live = append(live, ctx.Err())
			mu.Unlock()
			return text("ok"), nil
		})
	ts := httptest.NewServer(srv.HTTPHandler(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)))
	defer ts.Close()
	transport := &mcp.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: ts.Client(), DisableStandaloneSSE: true, MaxRetries: -1}
	for _, version := range []string{"", "2025-11-25"} {
		var so *mcp.ClientSessionOptions
		if version != "" {
			so = &mcp.ClientSessionOptions{ProtocolVersion: version}
		}
		cs, err := mcp.NewClient(impl, nil).Connect(context.Background(), transport, so)
		require.NoError(t, err)
		for range 2 {
			_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search"})
			require.NoError(t, err)
		}
		require.NoError(t, cs.Close())
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []error{nil, nil, nil, nil}, live)
}

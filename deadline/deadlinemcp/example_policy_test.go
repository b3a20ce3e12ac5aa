package deadlinemcp_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
)

// One client serves every tool of an agent, each with its own policy: the
// search tool gets a 500ms ceiling, every other request the client's
// 150ms one, except the handshake, which is sent with what is left of the
// deadline whatever the tools' ceilings.
func ExampleWithPolicyFunc() {
	ctx := context.Background()
	server := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "v1"}, nil)
	for _, name := range []string{"search", "fetch"} {
		server.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	leases := &deadline.Hooks{AttemptStart: func(ctx context.Context, a deadline.AttemptInfo) context.Context {
		if strings.HasPrefix(a.Name, "MCP tools/call") || a.Name == "search" {
			fmt.Println(a.Name, "attempt", a.Number, "lease", a.Granted)
		}
		return ctx
	}}
	c, err := deadlinemcp.NewClient(
		deadlinemcp.WithHooks(leases),
		deadlinemcp.WithPolicy(deadline.Policy{MaxAttempts: 1, AttemptTimeout: 150 * time.Millisecond}),
		deadlinemcp.WithPolicyFunc(func(method, tool string) (deadline.Policy, bool) {
			if method == "tools/call" && tool == "search" {
				return deadline.Policy{Name: "search", MaxAttempts: 2, AttemptTimeout: 500 * time.Millisecond}, true
			}
			return deadline.Policy{}, false // WithPolicy's, or the handshake's default
		}))
	if err != nil {
		panic(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil)
	client.AddSendingMiddleware(c.Middleware())

	st, ct := mcp.NewInMemoryTransports()
	ss, _ := server.Connect(ctx, st, nil)
	cs, _ := client.Connect(ctx, ct, nil)
	defer func() { cs.Close(); ss.Wait() }()

	run := deadline.NewContext(ctx, deadline.New(10*time.Second))
	for _, name := range []string{"search", "fetch"} {
		if _, err := cs.CallTool(run, &mcp.CallToolParams{Name: name}); err != nil {
			panic(err)
		}
	}
	// Output:
	// search attempt 1 lease 500ms
	// MCP tools/call fetch attempt 1 lease 150ms
}

// appendBudget is a proxy on the way that adds a second, larger budget to
// every request's _meta.
type appendBudget struct{}

func (appendBudget) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil {
		return http.DefaultTransport.RoundTrip(r)
	}
	body, _ := io.ReadAll(r.Body)
	key := []byte(`"` + deadlinemcp.MetaKey + `":50`)
	body = bytes.Replace(body, key, append(append(key, ','), []byte(`"`+deadlinemcp.MetaKey+`":999999`)...), 1)
	r = r.Clone(r.Context())
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	return http.DefaultTransport.RoundTrip(r)
}

// Behind HTTPHandler, a budget key repeated in one request's _meta gives
// its smallest value, as a repeated Deadline-Budget-Ms header does: a
// proxy that adds 999999 after 50 does not raise the budget.
func ExampleServer_HTTPHandler() {
	srv, err := deadlinemcp.NewServer(deadlinemcp.WithAdmission(
		func(_ context.Context, method string, _ mcp.Request, a deadlinemcp.Admission) {
			if method == "tools/call" {
				fmt.Println("admitted with", a.Budget)
			}
		}))
	if err != nil {
		panic(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "search", Version: "v1"}, nil)
	server.AddReceivingMiddleware(srv.Middleware())
	server.AddTool(&mcp.Tool{Name: "search", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	ts := httptest.NewServer(srv.HTTPHandler(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)))
	defer ts.Close()

	ctx := context.Background()
	transport := &mcp.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: &http.Client{Transport: appendBudget{}}, DisableStandaloneSSE: true, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, nil).Connect(ctx, transport, nil)
	if err != nil {
		panic(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search", Meta: mcp.Meta{deadlinemcp.MetaKey: 50}}); err != nil {
		panic(err)
	}
	// Output: admitted with 50ms
}

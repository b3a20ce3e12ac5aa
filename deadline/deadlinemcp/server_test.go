package deadlinemcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
	"github.com/deadlinebudget/budget/deadline/mcpbudget/mcpbudgettest"
)

// admissions records what a Server decided for each tools/call.
type admissions struct{ mcpbudgettest.Admissions }

func (r *admissions) option() deadlinemcp.ServerOption {
	return deadlinemcp.WithAdmission(func(_ context.Context, method string, _ mcp.Request, a deadlinemcp.Admission) {
		if method == "tools/call" {
			r.Record(a)
		}
	})
}

func (r *admissions) list() []mcpbudget.Admission { return r.List() }

func newBudgetServer(t *testing.T, rec *admissions, opts ...deadlinemcp.ServerOption) *deadlinemcp.Server {
	t.Helper()
	s, err := deadlinemcp.NewServer(append(opts, rec.option())...)
	require.NoError(t, err)
	return s
}

// The lease on the wire becomes the handler's context deadline.
func TestServerBudgetBecomesHandlerDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &admissions{}
		search := &tool{name: "search"}
		mc, _, _ := newClient(t)
		cs := connectInMemory(t, newServer(t, newBudgetServer(t, rec), search), mc)
		_, err := call(cs, 500*time.Millisecond, deadline.Policy{MaxAttempts: 1, Floor: 20 * time.Millisecond}, "search")
		require.NoError(t, err)

		got := search.arrivals()
		require.Len(t, got, 1)
		assert.Equal(t, float64(480), got[0].Meta)
		assert.Equal(t, 480*time.Millisecond, got[0].Left, "the handler's deadline is the lease (virtual time)")
		a := rec.list()[0]
		assert.Equal(t, admission.ByInbound, a.Limit)
		assert.Equal(t, 480*time.Millisecond, a.Budget)
		assert.False(t, a.Clamped())
	})
}

// A budget larger than the server's maximum is clamped to it.
func TestServerClampsToMax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &admissions{}
		search := &tool{name: "search"}
		mc, _, _ := newClient(t)
		srv := newBudgetServer(t, rec, deadlinemcp.WithMaxBudget(200*time.Millisecond))
		cs := connectInMemory(t, newServer(t, srv, search), mc)
		_, err := call(cs, time.Second, deadline.Policy{MaxAttempts: 1}, "search")
		require.NoError(t, err)
		assert.Equal(t, 200*time.Millisecond, search.arrivals()[0].Left)
		a := rec.list()[0]
		assert.True(t, a.Clamped())
		assert.Equal(t, admission.ByMax, a.Limit)
	})
}

// A deadline the request's context already has (an outer middleware's)
// wins when it ends sooner, and the handler keeps it.
func TestServerKeepsOuterDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &admissions{}
		search := &tool{name: "search"}
		mc, _, _ := newClient(t)
		s := mcp.NewServer(impl, nil)
		outer := func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel()
				return next(ctx, method, req)
			}
		}
		s.AddReceivingMiddleware(outer, newBudgetServer(t, rec).Middleware())
		search.add(s)
		cs := connectInMemory(t, s, mc)
		_, err := call(cs, time.Second, deadline.Policy{MaxAttempts: 1}, "search")
		require.NoError(t, err)
		assert.Equal(t, 50*time.Millisecond, search.arrivals()[0].Left)
		a := rec.list()[0]
		assert.Equal(t, admission.ByOuter, a.Limit)
		assert.Equal(t, 50*time.Millisecond, a.OuterRemaining)
	})
}

// At or below the server's floor the request is refused with a JSON-RPC
// error that says budget and floor; the client does not retry it, even for
// a read-only tool.
func TestServerRefusesAtFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &admissions{}
		search := &tool{name: "search", annotations: readOnly()}
		mc, _, _ := newClient(t)
		srv := newBudgetServer(t, rec, deadlinemcp.WithFloor(50*time.Millisecond))
		cs := connectInMemory(t, newServer(t, srv, search), mc)
		listTools(t, cs)
		_, err := call(cs, 40*time.Millisecond, deadline.Policy{MaxAttempts: 3, Floor: time.Millisecond}, "search")

		var we *jsonrpc.Error
		require.ErrorAs(t, err, &we)
		assert.Equal(t, int64(deadlinemcp.CodeBudgetRefused), we.Code)
		assert.Equal(t, "deadline budget too small: budget-ms=39, floor-ms=50", we.Message)
		assert.JSONEq(t, `{"budget_ms":39,"floor_ms":50}`, string(we.Data))
		refused, ok := errors.AsType[*mcpbudget.RefusedError](err)
		require.True(t, ok, "the type an mcp-go client's caller finds too")
		assert.Equal(t, 39*time.Millisecond, refused.Budget)
		assert.Equal(t, 50*time.Millisecond, refused.Floor)
		var stop *deadline.StopError
		require.ErrorAs(t, err, &stop)
		assert.Equal(t, deadline.ReasonNotRetryable, stop.Reason)
		assert.Equal(t, 1, stop.Attempts)
		assert.Empty(t, search.arrivals(), "the handler is not called")
		require.Len(t, rec.list(), 1)
		assert.Equal(t, admission.RefusalFloor, rec.list()[0].Refusal)
	})
}

// A custom classifier cannot make the client retry the server's refusal.
func TestRefusalNotRetriedByCustomClassifier(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &admissions{}
		search := &tool{name: "search", annotations: readOnly()}
		mc, _, _ := newClient(t)
		srv := newBudgetServer(t, rec, deadlinemcp.WithFloor(50*time.Millisecond))
		cs := connectInMemory(t, newServer(t, srv, search), mc)
		listTools(t, cs)
		p := deadline.Policy{MaxAttempts: 3, Floor: time.Millisecond, Retryable: func(error) bool { return true }}
		_, err := call(cs, 40*time.Millisecond, p, "search")
		require.Error(t, err)
		assert.Len(t, rec.list(), 1)
	})
}

// What a server makes of every kind of _meta budget, sent as it is by a
// plain MCP client.
func TestServerInboundMeta(t *testing.T) {
	const max = 2 * time.Second
	cases := []struct {
		name      string
		value     any
		present   bool
		malformed bool
		budget    time.Duration
		limit     admission.Limit
		refusal   admission.Refusal
	}{
		{"integer", 500, true, false, 500 * time.Millisecond, admission.ByInbound, admission.RefusalNone},
		{"zero: spent", 0, true, false, 0, admission.ByInbound, admission.RefusalSpent},
		{"above the maximum: clamped", 5000, true, false, max, admission.ByMax, admission.RefusalNone},
		{"eleven digits: clamped", 99999999999, true, false, max, admission.ByMax, admission.RefusalNone},
		{"absurdly large: clamped", 1e300, true, false, max, admission.ByMax, admission.RefusalNone},
		{"negative: ignored", -5, false, true, max, admission.ByMax, admission.RefusalNone},
		{"fractional: ignored", 1.5, false, true, max, admission.ByMax, admission.RefusalNone},
		{"string: ignored", "100", false, true, max, admission.ByMax, admission.RefusalNone},
		{"bool: ignored", true, false, true, max, admission.ByMax, admission.RefusalNone},
		{"null: ignored", nil, false, true, max, admission.ByMax, admission.RefusalNone},
		{"object: ignored", map[string]any{"ms": 5}, false, true, max, admission.ByMax, admission.RefusalNone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &admissions{}
				search := &tool{name: "search"}
				srv := newBudgetServer(t, rec, deadlinemcp.WithMaxBudget(max))
				cs := connectInMemory(t, newServer(t, srv, search), mcp.NewClient(impl, nil))
				_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search", Meta: mcp.Meta{deadlinemcp.MetaKey: tc.value}})

				require.Len(t, rec.list(), 1)
				a := rec.list()[0]
				assert.Equal(t, tc.present, a.Inbound.Present, "present")
				assert.Equal(t, tc.malformed, a.Malformed, "malformed")
				assert.Equal(t, tc.budget, a.Budget)
				assert.Equal(t, tc.limit, a.Limit)
				assert.Equal(t, tc.refusal, a.Refusal)
				if tc.refusal != admission.RefusalNone {
					var we *jsonrpc.Error
					require.ErrorAs(t, err, &we)
					assert.Equal(t, "deadline budget too small: budget-ms=0, floor-ms=0", we.Message)
					return
				}
				require.NoError(t, err)
				assert.Equal(t, tc.budget, search.arrivals()[0].Left)
			})
		})
	}
}

// The server middleware's refusal travels as JSON-RPC data a non-Go client
// can read.
func TestRefusalData(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, err := deadlinemcp.NewServer(deadlinemcp.WithFloor(10 * time.Millisecond))
		require.NoError(t, err)
		cs := connectInMemory(t, newServer(t, srv, &tool{name: "search"}), mcp.NewClient(impl, nil))
		_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search", Meta: mcp.Meta{deadlinemcp.MetaKey: 7}})
		var we *jsonrpc.Error
		require.ErrorAs(t, err, &we)
		var data struct{ Budget, Floor int64 }
		require.NoError(t, json.Unmarshal(we.Data, &struct {
			Budget *int64 `json:"budget_ms"`
			Floor  *int64 `json:"floor_ms"`
		}{&data.Budget, &data.Floor}))
		assert.Equal(t, int64(7), data.Budget)
		assert.Equal(t, int64(10), data.Floor)
	})
}

func TestNewServerOptions(t *testing.T) {
	cases := []struct {
		name string
		opts []deadlinemcp.ServerOption
	}{
		{"max 0", []deadlinemcp.ServerOption{deadlinemcp.WithMaxBudget(0)}},
		{"negative floor", []deadlinemcp.ServerOption{deadlinemcp.WithFloor(-1)}},
		{"floor at max", []deadlinemcp.ServerOption{deadlinemcp.WithMaxBudget(time.Second), deadlinemcp.WithFloor(time.Second)}},
		{"reserved key", []deadlinemcp.ServerOption{deadlinemcp.WithInboundMetaKey("io.modelcontextprotocol/budget-ms")}},
		{"key without prefix", []deadlinemcp.ServerOption{deadlinemcp.WithInboundMetaKey("budget-ms")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := deadlinemcp.NewServer(tc.opts...)
			assert.Nil(t, s)
			var pe *deadline.PolicyError
			require.ErrorAs(t, err, &pe)
			assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
		})
	}
	s, err := deadlinemcp.NewServer(nil, deadlinemcp.WithInboundMetaKey("com.example/budget-ms"))
	require.NoError(t, err)
	assert.NotNil(t, s)
}

func TestNewClientOptions(t *testing.T) {
	cases := []struct {
		name string
		opts []deadlinemcp.ClientOption
	}{
		{"default budget 0", []deadlinemcp.ClientOption{deadlinemcp.WithDefaultBudget(0)}},
		{"invalid policy", []deadlinemcp.ClientOption{deadlinemcp.WithPolicy(deadline.Policy{})}},
		{"reserved key", []deadlinemcp.ClientOption{deadlinemcp.WithMetaKey("dev.mcp/budget")}},
		{"empty tool", []deadlinemcp.ClientOption{deadlinemcp.WithIdempotentTools("")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := deadlinemcp.NewClient(tc.opts...)
			assert.Nil(t, c)
			require.ErrorIs(t, err, deadline.ErrInvalidPolicy)
		})
	}
}

// A client and a server agree on another key.
func TestCustomMetaKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &admissions{}
		search := &tool{name: "search"}
		mc, _, _ := newClient(t, deadlinemcp.WithMetaKey("com.example/budget-ms"))
		srv := newBudgetServer(t, rec, deadlinemcp.WithInboundMetaKey("com.example/budget-ms"))
		cs := connectInMemory(t, newServer(t, srv, search), mc)
		_, err := call(cs, 300*time.Millisecond, deadline.Policy{MaxAttempts: 1}, "search")
		require.NoError(t, err)
		assert.Nil(t, search.arrivals()[0].Meta, "nothing under the default key")
		assert.Equal(t, 300*time.Millisecond, rec.list()[0].Budget)
	})
}

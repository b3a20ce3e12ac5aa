package deadlinemcpgo_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/deadlinemcpgo"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
	"github.com/deadlinebudget/budget/deadline/mcpbudget/mcpbudgettest"
)

// admissions records what a Server decided for each tools/call.
type admissions struct{ mcpbudgettest.Admissions }

func (r *admissions) option() deadlinemcpgo.ServerOption {
	return deadlinemcpgo.WithAdmission(func(_ context.Context, method, _ string, a mcpbudget.Admission) {
		if method == "tools/call" {
			r.Record(a)
		}
	})
}

func (r *admissions) list() []mcpbudget.Admission { return r.List() }

func newBudgetServer(t *testing.T, rec *admissions, opts ...deadlinemcpgo.ServerOption) *deadlinemcpgo.Server {
	t.Helper()
	s, err := deadlinemcpgo.NewServer(append(opts, rec.option())...)
	require.NoError(t, err)
	return s
}

// The lease on the wire becomes the handler's context deadline.
func TestServerBudgetBecomesHandlerDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &admissions{}
		search := &tool{name: "search"}
		mc := connectInProcess(t, newBudgetClient(t), newServer(t, newBudgetServer(t, rec), search))
		_, err := call(mc, 500*time.Millisecond, deadline.Policy{MaxAttempts: 1, Floor: 20 * time.Millisecond}, "search")
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

// A budget larger than the server's maximum is clamped to it, over a bare
// mcp-go client too (which sends no budget: the maximum).
func TestServerClampsToMax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &admissions{}
		search := &tool{name: "search"}
		srv := newServer(t, newBudgetServer(t, rec, deadlinemcpgo.WithMaxBudget(200*time.Millisecond)), search)
		mc := connectInProcess(t, newBudgetClient(t), srv)
		_, err := call(mc, time.Second, deadline.Policy{MaxAttempts: 1}, "search")
		require.NoError(t, err)
		assert.Equal(t, 200*time.Millisecond, search.arrivals()[0].Left)
		a := rec.list()[0]
		assert.True(t, a.Clamped())
		assert.Equal(t, admission.ByMax, a.Limit)

		bare := connectInProcess(t, nil, srv)
		_, err = bare.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "search"}})
		require.NoError(t, err)
		assert.Equal(t, 200*time.Millisecond, search.arrivals()[1].Left, "no budget: the maximum")
		assert.False(t, rec.list()[1].Inbound.Present)
	})
}

// At or below the server's floor the request is refused with the
// JSON-RPC error the go-sdk adapter answers; the client does not retry
// it, even for a read-only tool, and the caller finds the same type as
// the go-sdk adapter's client returns.
func TestServerRefusesAtFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &admissions{}
		search := &tool{name: "search", annotations: readOnly()}
		srv := newBudgetServer(t, rec, deadlinemcpgo.WithFloor(50*time.Millisecond))
		mc := connectInProcess(t, newBudgetClient(t), newServer(t, srv, search))
		listTools(t, mc)
		p := deadline.Policy{MaxAttempts: 3, Floor: time.Millisecond, Retryable: func(error) bool { return true }}
		_, err := call(mc, 40*time.Millisecond, p, "search")

		refused, ok := errors.AsType[*mcpbudget.RefusedError](err)
		require.True(t, ok, "%v", err)
		assert.Equal(t, 39*time.Millisecond, refused.Budget)
		assert.Equal(t, 50*time.Millisecond, refused.Floor)
		assert.Equal(t, "deadline budget too small: budget-ms=39, floor-ms=50", refused.Message)
		stop, ok := errors.AsType[*deadline.StopError](err)
		require.True(t, ok)
		assert.Equal(t, deadline.ReasonNotRetryable, stop.Reason)
		assert.Equal(t, 1, stop.Attempts)
		assert.Empty(t, search.arrivals(), "the handler is not called")
		require.Len(t, rec.list(), 1)
		assert.Equal(t, admission.RefusalFloor, rec.list()[0].Refusal)

		// A bare mcp-go client gets the code and data on the wire; mcp-go
		// maps the code to a plain error with the message.
		bare := connectInProcess(t, nil, newServer(t, srv, &tool{name: "search"}))
		_, err = bare.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "search", Meta: mcp.NewMetaFromMap(map[string]any{mcpbudget.MetaKey: 7})}})
		require.EqualError(t, err, "deadline budget too small: budget-ms=7, floor-ms=50")
	})
}

// Every kind of hostile _meta value (the table both SDKs are tested
// with), sent raw through mcp-go's own message handler, where encoding/json
// keeps the last value of a repeated key.
func TestServerInboundMeta(t *testing.T) {
	for _, tc := range mcpbudgettestCases() {
		t.Run(tc.Name, func(t *testing.T) {
			rec := &admissions{}
			search := &tool{name: "search"}
			s := newServer(t, newBudgetServer(t, rec, deadlinemcpgo.WithMaxBudget(mcpbudgettestMax)), search)
			msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{` + tc.Members + `},"name":"search"}}`
			resp := s.HandleMessage(context.Background(), []byte(msg))
			require.Len(t, rec.list(), 1, "%#v", resp)
			checkOutcome(t, tc.Last(), rec.list()[0], resp, search)
		})
	}
}

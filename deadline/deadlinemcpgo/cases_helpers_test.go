package deadlinemcpgo_test

import (
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
	"github.com/deadlinebudget/budget/deadline/mcpbudget/mcpbudgettest"
)

var mcpbudgettestCases = mcpbudgettest.MetaCases

const mcpbudgettestMax = mcpbudgettest.Max

// checkOutcome checks a server's decision and its answer against want.
func checkOutcome(t *testing.T, want mcpbudgettest.Outcome, a mcpbudget.Admission, resp mcp.JSONRPCMessage, search *tool) {
	t.Helper()
	got := mcpbudgettest.Outcome{Present: a.Inbound.Present, Malformed: a.Malformed, Budget: a.Budget, Limit: a.Limit, Refusal: a.Refusal}
	assert.Equal(t, want, got)
	if want.Refusal != admission.RefusalNone {
		e, ok := resp.(mcp.JSONRPCError)
		require.True(t, ok, "%#v", resp)
		assert.Equal(t, mcpbudget.CodeBudgetRefused, e.Error.Code)
		assert.Equal(t, "deadline budget too small: budget-ms=0, floor-ms=0", e.Error.Message)
		assert.Empty(t, search.arrivals())
		return
	}
	_, ok := resp.(mcp.JSONRPCResponse)
	require.True(t, ok, "%#v", resp)
	require.Len(t, search.arrivals(), 1)
}

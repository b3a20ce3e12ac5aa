package deadlinemcpgo

import (
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Whatever params mcp-go hands the transport, the budget (and what
// SetMeta adds) lands in their _meta, and nothing of theirs is lost.
func TestBudgetParams(t *testing.T) {
	const k = `"io.github.deadlinebudget/budget-ms"`
	for _, tc := range []struct {
		name  string
		inner any
		want  string
	}{
		{"none", nil, `{"_meta":{` + k + `:870,"traceparent":"00-x"}}`},
		{"empty struct", mcp.PaginatedParams{}, `{"_meta":{` + k + `:870,"traceparent":"00-x"}}`},
		{"a tool call", mcp.CallToolParams{Name: "search"}, `{"_meta":{` + k + `:870,"traceparent":"00-x"},"name":"search"}`},
		{"with _meta", mcp.CallToolParams{Name: "s", Meta: mcp.NewMetaFromMap(map[string]any{"a": 1, "io.github.deadlinebudget/budget-ms": 5})}, `{"_meta":{"a":1,` + k + `:870,"traceparent":"00-x"},"name":"s"}`},
		{"modern map", map[string]json.RawMessage{"name": json.RawMessage(`"s"`), "_meta": json.RawMessage(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`)}, `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` + k + `:870,"traceparent":"00-x"},"name":"s"}`},
		{"an array", []int{1}, `[1]`},
	} {
		p := &budgetParams{inner: tc.inner, key: "io.github.deadlinebudget/budget-ms", ms: 870}
		p.SetMeta("traceparent", "00-x")
		p.SetMeta("io.github.deadlinebudget/budget-ms", "ignored")
		b, err := json.Marshal(p)
		require.NoError(t, err, tc.name)
		assert.JSONEq(t, tc.want, string(b), tc.name)
	}
	p := &budgetParams{key: "k/x", ms: 1}
	p.SetMeta("t", "\x00é")
	b, err := json.Marshal(p)
	require.NoError(t, err)
	assert.JSONEq(t, `{"_meta":{"k/x":1,"t":"\u0000é"}}`, string(b))
}

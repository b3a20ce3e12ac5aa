package deadlinemcpgo

import (
	"encoding/json"
	"strings"
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
		p := testParams(tc.inner, "io.github.deadlinebudget/budget-ms", 870)
		p.SetMeta("traceparent", "00-x")
		p.SetMeta("io.github.deadlinebudget/budget-ms", "ignored")
		b, err := json.Marshal(p)
		require.NoError(t, err, tc.name)
		assert.JSONEq(t, tc.want, string(b), tc.name)
	}
	p := testParams(nil, "k/x", 1)
	p.SetMeta("t", "\x00é")
	b, err := json.Marshal(p)
	require.NoError(t, err)
	assert.JSONEq(t, `{"_meta":{"k/x":1,"t":"\u0000é"}}`, string(b))
}

func testParams(inner any, key string, ms int64) *budgetParams {
	return &budgetParams{inner: inner, key: key, keyBytes: []byte(key), ms: ms}
}

// The params a Client reuses from one request to the next carry nothing
// of the previous request: not its members, its _meta or its SetMeta keys,
// whatever the size of either.
func TestBudgetParamsReused(t *testing.T) {
	c, err := NewClient()
	require.NoError(t, err)
	const k = `"io.github.deadlinebudget/budget-ms"`
	for _, tc := range []struct {
		inner any
		extra bool
		want  string
	}{
		{map[string]json.RawMessage{"name": json.RawMessage(`"first"`), "arguments": json.RawMessage(`{"q":"` + strings.Repeat("x", 300) + `"}`),
			"_meta": json.RawMessage(`{"a":1}`)}, true, `{"_meta":{` + k + `:9,"a":1,"traceparent":"00-x"},"arguments":{"q":"` + strings.Repeat("x", 300) + `"},"name":"first"}`},
		{map[string]json.RawMessage{"name": json.RawMessage(`"s"`)}, false, `{"_meta":{` + k + `:9},"name":"s"}`},
		{nil, false, `{"_meta":{` + k + `:9}}`},
		{mcp.CallToolParams{Name: "t"}, false, `{"_meta":{` + k + `:9},"name":"t"}`},
	} {
		p := c.getParams(tc.inner)
		p.ms = 9
		if tc.extra {
			p.SetMeta("traceparent", "00-x")
		}
		b, err := json.Marshal(p)
		require.NoError(t, err)
		assert.JSONEq(t, tc.want, string(b))
		c.putParams(p)
	}
}

func TestMetaObject(t *testing.T) {
	for in, want := range map[string]int{
		`{"_meta":{"a":1},"name":"s"}`:                 10,
		`{"name":"s","_meta":{}}`:                      21,
		`{"arguments":{"_meta":{"x":1}},"name":"s"}`:   -1,
		`{"name":"\"_meta\":{","x":1}`:                 -1,
		`{"_meta":null}`:                               -1,
		`{"a":["_meta",{"_meta":{}}],"_meta":{"b":2}}`: 37,
		`{"a\\":"_meta","_meta":{}}`:                   24,
	} {
		assert.Equal(t, want, metaObject([]byte(in)), in)
	}
}

// Whatever JSON object the params marshal to, the budget's params write
// valid JSON holding the budget once.
func FuzzBudgetParams(f *testing.F) {
	for _, s := range []string{`{"_meta":{"a":1},"name":"s"}`, `{"arguments":{"_meta":{}}}`, `{"_meta":{}}`, `{}`, `{"_meta":7}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var inner map[string]json.RawMessage
		if json.Unmarshal([]byte(s), &inner) != nil {
			return
		}
		p := testParams(inner, "k/x", 7)
		b, err := json.Marshal(p)
		if err != nil {
			return // a _meta that is not valid: encoding/json's own error
		}
		var out struct {
			Meta map[string]any `json:"_meta"`
		}
		if json.Unmarshal(b, &out) == nil && out.Meta != nil {
			assert.Equal(t, float64(7), out.Meta["k/x"], "%s", b)
		}
	})
}

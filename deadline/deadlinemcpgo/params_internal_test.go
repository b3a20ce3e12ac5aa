package deadlinemcpgo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unsafe"

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
	return &budgetParams{inner: inner, key: key, keyBytes: []byte(key), quoted: appendJSONString(nil, key), ms: ms}
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
		{mcp.CallToolParams{Name: "big", Arguments: map[string]any{"q": strings.Repeat("y", maxKeptParams)}}, true,
			`{"_meta":{` + k + `:9,"traceparent":"00-x"},"arguments":{"q":"` + strings.Repeat("y", maxKeptParams) + `"},"name":"big"}`},
		{mcp.CallToolParams{Name: "u", Meta: mcp.NewMetaFromMap(map[string]any{"a": 1})}, false, `{"_meta":{` + k + `:9,"a":1},"name":"u"}`},
		{mcp.CallToolParams{Name: "v"}, false, `{"_meta":{` + k + `:9},"name":"v"}`},
	} {
		p := c.getParams(tc.inner)
		p.ms = 9
		if tc.extra {
			p.SetMeta("traceparent", "00-x")
		}
		b, err := json.Marshal(p)
		require.NoError(t, err)
		assert.JSONEq(t, tc.want, string(b))
		p.tool = "named"
		c.putParams(p)
		assert.Empty(t, p.tool)
		assert.LessOrEqual(t, cap(p.buf), maxKeptParams, "a large request's buffer is not kept")
		assert.LessOrEqual(t, p.encBuf.Cap(), maxKeptParams, "a large request's buffer is not kept")
	}
}

// A tool named again takes its interned name: no conversion of the
// request's bytes per call. An escaped name, and names beyond
// maxToolNames, are converted each time, and every name is right.
func TestToolNameInterned(t *testing.T) {
	raw := func(name string) map[string]json.RawMessage {
		b, err := json.Marshal(name)
		require.NoError(t, err)
		return map[string]json.RawMessage{"name": b, "_meta": json.RawMessage(`{}`)}
	}
	var tr budgetTransport
	search := raw("search")
	first, again := tr.toolName(search), tr.toolName(search)
	assert.Equal(t, "search", again)
	assert.Same(t, unsafe.StringData(first), unsafe.StringData(again))
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = tr.toolName(search) }))
	assert.Equal(t, `say "hi"`, tr.toolName(raw(`say "hi"`)))
	assert.Equal(t, "", tr.toolName(map[string]json.RawMessage{"name": json.RawMessage(`7`)}))
	assert.Equal(t, "typed", tr.toolName(mcp.CallToolParams{Name: "typed"}))
	sent := &budgetParams{inner: raw("inner"), tool: "search"}
	assert.Equal(t, "search", ToolName(sent), "the params a transport sends give the name it read")
	sent.tool = ""
	assert.Equal(t, "inner", ToolName(sent))

	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range maxToolNames {
				name := fmt.Sprintf("tool-%d", (i*4+g)%(2*maxToolNames))
				assert.Equal(t, name, tr.toolName(raw(name)))
			}
		})
	}
	wg.Wait()
	assert.Len(t, *tr.names.Load(), maxToolNames)
	assert.Equal(t, "beyond", tr.toolName(raw("beyond")))
	assert.NotContains(t, *tr.names.Load(), "beyond")
}

// appendJSONString writes the JSON string encoding/json writes for s
// (byte for byte, up to encoding/json's escaping of <, > and &, which
// encoding/json applies when it copies a Marshaler's output).
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "io.github.deadlinebudget/budget-ms", `a"b\c`, "\x00\t\n", "é\u2028", "<&>", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		var got bytes.Buffer
		require.NoError(t, json.Compact(&got, appendJSONString(nil, s)))
		var compacted bytes.Buffer
		json.HTMLEscape(&compacted, got.Bytes())
		assert.Equal(t, string(want), compacted.String())
	})
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

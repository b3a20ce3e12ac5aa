package deadlinemcp

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBudgetMs(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{-time.Second, 1}, {0, 1}, {time.Microsecond, 1}, {time.Millisecond, 1},
		{time.Millisecond + 1, 2}, {870 * time.Millisecond, 870}, {MaxBudget, 9999999999}, {1 << 62, 9999999999},
	} {
		assert.Equal(t, tc.want, budgetMs(tc.d), "%v", tc.d)
	}
}

// parseBudget reads the forms a JSON decoder may hand it.
func TestParseBudget(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want time.Duration
		kind metaValue
	}{
		{float64(5), 5 * time.Millisecond, metaBudget},
		{json.Number("5"), 5 * time.Millisecond, metaBudget},
		{json.Number("5.0"), 5 * time.Millisecond, metaBudget},
		{json.Number("5e2"), 500 * time.Millisecond, metaBudget},
		{json.Number("5.5"), 0, metaMalformed},
		{json.Number("-1"), 0, metaMalformed},
		{json.Number("123456789012345678901234567890"), MaxBudget, metaHuge},
		{json.Number("1e400"), MaxBudget, metaHuge},
		{json.Number("-1e400"), 0, metaMalformed},
		{json.Number("x"), 0, metaMalformed},
		{7, 7 * time.Millisecond, metaBudget},
		{int64(-7), 0, metaMalformed},
		{"7", 0, metaMalformed},
	} {
		d, kind := parseBudget(tc.v, true)
		assert.Equal(t, tc.kind, kind, "%#v", tc.v)
		assert.Equal(t, tc.want, d, "%#v", tc.v)
	}
	_, kind := parseBudget(nil, false)
	assert.Equal(t, metaAbsent, kind)
}

func TestValidMetaKey(t *testing.T) {
	for k, want := range map[string]bool{
		MetaKey:                          true,
		"com.example/budget-ms":          true,
		"com.example.mcp/budget":         true, // second label "example"
		"a/b":                            true,
		"io.modelcontextprotocol/budget": false,
		"dev.mcp/budget":                 false,
		"budget-ms":                      false,
		"/budget":                        false,
		"com.example/":                   false,
		"com.example/-x":                 false,
		"1com.example/x":                 false,
		"com.example-/x":                 false,
		"com..example/x":                 false,
		"com.example/a/b":                false,
		"com.exa_mple/x":                 false,
		"com.example/budget_ms.v2":       true,
	} {
		assert.Equal(t, want, validMetaKey(k), k)
	}
}

// Whatever JSON a peer sends, parseBudget neither panics nor answers a
// budget outside [0, MaxBudget].
func FuzzParseBudget(f *testing.F) {
	for _, s := range []string{`5`, `0`, `-1`, `1.5`, `1e300`, `"7"`, `null`, `true`, `{}`, `[]`, `99999999999`, `5e2`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, useNumber := range []bool{false, true} {
			dec := json.NewDecoder(bytes.NewReader(data))
			if useNumber {
				dec.UseNumber()
			}
			var v any
			if dec.Decode(&v) != nil {
				return
			}
			d, kind := parseBudget(v, true)
			switch kind {
			case metaBudget:
				require.GreaterOrEqual(t, d, time.Duration(0))
				require.LessOrEqual(t, d, MaxBudget)
				require.Zero(t, d%time.Millisecond)
			case metaHuge:
				require.Equal(t, MaxBudget, d)
			case metaMalformed:
				require.Zero(t, d)
			default:
				t.Fatalf("kind %d for a present value", kind)
			}
		}
	})
}

package mcpbudget

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
		assert.Equal(t, tc.want, BudgetMs(tc.d), "%v", tc.d)
	}
}

// parseBudget reads the forms a JSON decoder may hand it.
func TestParseBudget(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want time.Duration
		kind Kind
	}{
		{float64(5), 5 * time.Millisecond, Budget},
		{json.Number("5"), 5 * time.Millisecond, Budget},
		{json.Number("5.0"), 5 * time.Millisecond, Budget},
		{json.Number("5e2"), 500 * time.Millisecond, Budget},
		{json.Number("5.5"), 0, Malformed},
		{json.Number("-1"), 0, Malformed},
		{json.Number("123456789012345678901234567890"), MaxBudget, Huge},
		{json.Number("1e400"), MaxBudget, Huge},
		{json.Number("-1e400"), 0, Malformed},
		{json.Number("x"), 0, Malformed},
		{7, 7 * time.Millisecond, Budget},
		{int64(-7), 0, Malformed},
		{"7", 0, Malformed},
	} {
		d, kind := Parse(tc.v, true)
		assert.Equal(t, tc.kind, kind, "%#v", tc.v)
		assert.Equal(t, tc.want, d, "%#v", tc.v)
	}
	_, kind := Parse(nil, false)
	assert.Equal(t, Absent, kind)
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
		assert.Equal(t, want, ValidKey(k), k)
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
			d, kind := Parse(v, true)
			switch kind {
			case Budget:
				require.GreaterOrEqual(t, d, time.Duration(0))
				require.LessOrEqual(t, d, MaxBudget)
				require.Zero(t, d%time.Millisecond)
			case Huge:
				require.Equal(t, MaxBudget, d)
			case Malformed:
				require.Zero(t, d)
			default:
				t.Fatalf("kind %d for a present value", kind)
			}
		}
	})
}

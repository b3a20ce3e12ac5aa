package mcpbudget

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSmallest(t *testing.T) {
	const k = `"` + MetaKey + `"`
	for _, tc := range []struct {
		name, in string
		changed  bool
		meta     string // the params' _meta after, when changed
	}{
		{"once", `{"method":"tools/call","params":{"_meta":{` + k + `:50},"name":"s"}}`, false, ""},
		{"no params", `{"method":"ping"}`, false, ""},
		{"twice", `{"method":"tools/call","params":{"_meta":{` + k + `:50,` + k + `:999999},"name":"s"}}`, true, `{` + k + `:50}`},
		{"none valid", `{"params":{"_meta":{` + k + `:"1",` + k + `:-5}}}`, false, ""},
		{"huge and small", `{"params":{"_meta":{` + k + `:1e300,` + k + `:7}}}`, true, `{` + k + `:7}`},
		{"merged _meta keeps other keys", `{"params":{"_meta":{"traceparent":"00-a",` + k + `:50},"_meta":{` + k + `:90,"x":1}}}`, true, `{"traceparent":"00-a","x":1,` + k + `:50}`},
		{"not JSON", `{"params":` + k + k, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, changed := Smallest([]byte(tc.in), MetaKey)
			assert.Equal(t, tc.changed, changed)
			if !tc.changed {
				assert.Equal(t, tc.in, string(out), "unchanged, byte for byte")
				return
			}
			var m struct {
				Params struct {
					Meta json.RawMessage `json:"_meta"`
				} `json:"params"`
			}
			require.NoError(t, json.Unmarshal(out, &m))
			assert.JSONEq(t, tc.meta, string(m.Params.Meta))
		})
	}
	t.Run("batch", func(t *testing.T) {
		in := `[{"id":1,"params":{"_meta":{` + k + `:999999,` + k + `:50}}},{"id":2,"params":{"_meta":{` + k + `:9}}}]`
		out, changed := Smallest([]byte(in), MetaKey)
		require.True(t, changed)
		assert.JSONEq(t, `[{"id":1,"params":{"_meta":{`+k+`:50}}},{"id":2,"params":{"_meta":{`+k+`:9}}}]`, string(out))
	})
}

// Whatever a POST body holds, smallestBudget does not panic, returns a
// body it leaves alone byte for byte, and writes only valid JSON.
func FuzzSmallest(f *testing.F) {
	const k = `"` + MetaKey + `"`
	for _, s := range []string{
		`{"params":{"_meta":{` + k + `:50,` + k + `:999999}}}`,
		`[{"params":{"_meta":{` + k + `:5}}},{"params":{"_meta":{` + k + `:"x",` + k + `:1e400}}}]`,
		`{"params":{"_meta":{` + k + `:7},"_meta":{"io.github.deadlinebudget\/budget-\u006ds":3}}}`,
		`{"params":[` + k + `,` + k + `]}`, `null`, `[`, `{"params":{"_meta":null,"_meta":{` + k + `:1}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, changed := Smallest(body, MetaKey)
		if !changed {
			require.Equal(t, body, out)
			return
		}
		require.True(t, json.Valid(out), "%s", out)
	})
}

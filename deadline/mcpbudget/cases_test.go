package mcpbudget_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
	"github.com/deadlinebudget/budget/deadline/mcpbudget/mcpbudgettest"
)

// The shared table of hostile _meta values holds what the rule says: each
// case's raw request, decoded as encoding/json decodes it (the last value
// of a repeated key), gives Last(); rewritten by Smallest first, Want.
func TestMetaCases(t *testing.T) {
	cases := mcpbudgettest.MetaCases()
	require.Len(t, cases, 28)
	limits := admission.Limits{MaxBudget: mcpbudgettest.Max}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{` + tc.Members + `},"name":"search"}}`)
			require.True(t, json.Valid(body))
			admit := func(body []byte) mcpbudgettest.Outcome {
				var m struct {
					Params struct {
						Meta map[string]any `json:"_meta"`
					} `json:"params"`
				}
				require.NoError(t, json.NewDecoder(bytes.NewReader(body)).Decode(&m))
				in, malformed := mcpbudget.Inbound(m.Params.Meta, mcpbudget.MetaKey)
				a := admission.Admit(in, deadline.Deadline{}, limits)
				return mcpbudgettest.Outcome{Present: in.Present, Malformed: malformed, Budget: a.Budget, Limit: a.Limit, Refusal: a.Refusal}
			}
			assert.Equal(t, tc.Last(), admit(body), "decoded as it is")
			out, _ := mcpbudget.Smallest(body, mcpbudget.MetaKey)
			assert.Equal(t, tc.Want, admit(out), "behind Smallest")
		})
	}
}

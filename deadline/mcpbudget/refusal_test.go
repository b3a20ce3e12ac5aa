package mcpbudget_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
)

func TestRefusalError(t *testing.T) {
	for _, tc := range []struct {
		refusal       admission.Refusal
		message, data string
		errorType     string // the same as an HTTP server's SERVER span for the same refusal
	}{
		{admission.RefusalFloor, "deadline budget too small: budget-ms=5, floor-ms=20", `{"budget_ms":5,"floor_ms":20}`, "deadline_refused"},
		{admission.RefusalSpent, "deadline budget too small: budget-ms=5, floor-ms=20", `{"budget_ms":5,"floor_ms":20}`, "deadline_refused"},
		{admission.RefusalLearned, "deadline budget too small: budget-ms=5, floor-ms=20, refusal=learned", `{"budget_ms":5,"floor_ms":20,"refusal":"learned"}`, "deadline_refused"},
		{admission.RefusalQueueTimeout, "deadline budget too small: budget-ms=5, floor-ms=20, refusal=queue_timeout", `{"budget_ms":5,"floor_ms":20,"refusal":"queue_timeout"}`, "deadline_refused"},
		{admission.RefusalQueueFull, "deadline: server overloaded, admission queue full: budget-ms=5", `{"budget_ms":5,"floor_ms":20,"refusal":"queue_full"}`, "queue_full"},
	} {
		code, msg, data := mcpbudget.RefusalError(admission.Decision{Budget: 4*time.Millisecond + 1, Floor: 20 * time.Millisecond, Refusal: tc.refusal})
		assert.Equal(t, int64(mcpbudget.CodeBudgetRefused), code)
		assert.Equal(t, tc.message, msg)
		assert.JSONEq(t, tc.data, string(data))

		// What the caller makes of it, from bytes (go-sdk) or decoded (mcp-go).
		var decoded any
		require.NoError(t, json.Unmarshal(data, &decoded))
		for _, d := range []any{data, decoded} {
			sdkErr := errors.New(msg)
			r, ok := mcpbudget.NewRefusedError(code, msg, d, sdkErr)
			require.True(t, ok)
			assert.Equal(t, 5*time.Millisecond, r.Budget)
			assert.Equal(t, 20*time.Millisecond, r.Floor)
			assert.Equal(t, msg, r.Error())
			err := fmt.Errorf("call: %w", r)
			assert.True(t, mcpbudget.IsRefused(err))
			assert.ErrorIs(t, err, sdkErr)
			assert.Equal(t, tc.errorType, r.ErrorType())
		}
	}
	_, ok := mcpbudget.NewRefusedError(-32603, "internal", nil, nil)
	assert.False(t, ok)
	r, ok := mcpbudget.NewRefusedError(mcpbudget.CodeBudgetRefused, "x", `not json`, nil)
	require.True(t, ok, "a refusal with data it cannot read")
	assert.Zero(t, r.Budget)
	assert.False(t, mcpbudget.IsRefused(errors.New("x")))
}

package otelbudget_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/otelbudget"
)

// Every admission refusal has one error.type, whichever server composition
// (HTTP, MCP, the propagator) records it: a full queue is overload, every
// other refusal a budget too small.
func TestServerRefusalErrorType(t *testing.T) {
	for _, tc := range []struct {
		refusal admission.Refusal
		want    string
	}{
		{admission.RefusalNone, ""},
		{admission.RefusalSpent, otelbudget.ErrorTypeServerRefused},
		{admission.RefusalFloor, otelbudget.ErrorTypeServerRefused},
		{admission.RefusalLearned, otelbudget.ErrorTypeServerRefused},
		{admission.RefusalQueueTimeout, otelbudget.ErrorTypeServerRefused},
		{admission.RefusalQueueFull, otelbudget.ErrorTypeServerQueueFull},
		{admission.RefusalQueueFull + 1, otelbudget.ErrorTypeServerRefused}, // a refusal this version does not know
	} {
		assert.Equal(t, tc.want, otelbudget.ServerRefusalErrorType(tc.refusal), "%s", tc.refusal)
	}
}

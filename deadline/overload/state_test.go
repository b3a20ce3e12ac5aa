package overload_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/deadlinebudget/budget/deadline/overload"
)

func TestStateString(t *testing.T) {
	assert.Equal(t, "closed", overload.Closed.String())
	assert.Equal(t, "open", overload.Open.String())
	assert.Equal(t, "half_open", overload.HalfOpen.String())
	assert.Equal(t, "unknown", overload.State(9).String())
}

package otelbudgetmcp_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetmcp"
)

// The tests that need no SDK. Those that record spans (with the
// OpenTelemetry SDK's span recorder) are in the test module beside this
// package, so that the SDK stays out of this module's go.mod.

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestInvalidOptions(t *testing.T) {
	c, err := otelbudgetmcp.ClientMiddleware(nil, []deadlinemcp.ClientOption{deadlinemcp.WithDefaultBudget(0)})
	assert.Nil(t, c)
	require.ErrorIs(t, err, deadline.ErrInvalidPolicy)
	s, err := otelbudgetmcp.ServerMiddleware(nil, []deadlinemcp.ServerOption{deadlinemcp.WithFloor(-1)})
	assert.Nil(t, s)
	require.ErrorIs(t, err, deadline.ErrInvalidPolicy)
}

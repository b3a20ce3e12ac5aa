package test

import "github.com/deadlinebudget/budget/otelbudget/agenttest"

// The fake provider and its in-memory transport are agenttest's, shared by
// every agent framework's tests.
type (
	provider     = agenttest.Provider
	callStart    = agenttest.CallStart
	memTransport = agenttest.MemTransport
)

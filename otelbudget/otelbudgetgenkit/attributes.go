package otelbudgetgenkit

import "github.com/deadlinebudget/budget/otelbudget/agentrun"

// The deadline.* keys an agent run adds beside the GenAI keys (package
// otelbudget/genai) and otelbudget's: agentrun's, the same for every
// framework; docs/attributes.md lists them.
const (
	// AttrReserveMs is agentrun.AttrReserveMs.
	AttrReserveMs = agentrun.AttrReserveMs
	// AttrFinalCall is agentrun.AttrFinalCall, on the final call's chat
	// span.
	AttrFinalCall = agentrun.AttrFinalCall
	// AttrReserveFinal is AttrFinalCall, under its earlier name.
	AttrReserveFinal = agentrun.AttrFinalCall
	// AttrReserveAnswered is agentrun.AttrFinalAnswer, on the invoke_agent
	// span of a run the final call answered.
	AttrReserveAnswered = agentrun.AttrFinalAnswer
	// AttrToolAbandoned is agentrun.AttrToolAbandoned.
	AttrToolAbandoned = agentrun.AttrToolAbandoned
	// AttrAbandonedTools is agentrun.AttrAbandonedTools.
	AttrAbandonedTools = agentrun.AttrAbandonedTools
	// AttrModelCalls and AttrToolCalls are agentrun's.
	AttrModelCalls = agentrun.AttrModelCalls
	AttrToolCalls  = agentrun.AttrToolCalls
)

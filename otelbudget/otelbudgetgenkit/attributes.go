package otelbudgetgenkit

import "go.opentelemetry.io/otel/attribute"

// The attribute keys of this package's own, beside the GenAI keys (package
// otelbudget/genai) and otelbudget's deadline.* keys on the same spans;
// docs/attributes.md lists them.
const (
	// AttrReserveMs is the run's reserve ([Config.Reserve]) in
	// milliseconds, on the invoke_agent span; absent without one.
	AttrReserveMs = attribute.Key("deadline.reserve_ms")
	// AttrReserveFinal is true on the chat span of the final model call
	// the reserve paid for.
	AttrReserveFinal = attribute.Key("deadline.reserve.final")
	// AttrReserveAnswered is true on the invoke_agent span of a run the
	// budget cut short that answered from the reserve.
	AttrReserveAnswered = attribute.Key("deadline.reserve.answered")
	// AttrToolAbandoned is true on an execute_tool span whose tool did not
	// return when its lease ended: the run went on without it.
	AttrToolAbandoned = attribute.Key("deadline.tool.abandoned")
	// AttrToolsAbandoned counts, on the invoke_agent span, the tool calls
	// the run abandoned; absent when none.
	AttrToolsAbandoned = attribute.Key("deadline.tools_abandoned")
	// AttrModelCalls and AttrToolCalls count, on the invoke_agent span,
	// the model and tool calls the run started.
	AttrModelCalls = attribute.Key("deadline.model_calls")
	AttrToolCalls  = attribute.Key("deadline.tool_calls")
)

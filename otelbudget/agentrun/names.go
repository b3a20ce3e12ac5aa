package agentrun

import (
	"go.opentelemetry.io/otel/attribute"

	"github.com/deadlinebudget/budget/otelbudget/genai"
)

// ScopeName is the instrumentation scope of the chat and execute_tool
// attempt spans both adapters start.
const ScopeName = "github.com/deadlinebudget/budget/otelbudget/agentrun"

// ChatStep is the step (policy name, call span name) of a model call:
// "chat {model}", "chat" when the model is not named.
func ChatStep(model string) string { return genai.ChatSpanName(model) }

// ToolStep is the step of a tool call: "execute_tool {tool}".
func ToolStep(tool string) string { return genai.ExecuteToolSpanName(tool) }

// RunSpanName is the run span's name: "invoke_agent {agent}", or
// "invoke_agent" when the agent has no name.
func RunSpanName(agent string) string { return genai.InvokeAgentSpanName(agent) }

// The deadline.* attributes an agent run adds to the GenAI spans, beside
// the observer's (docs/attributes.md, "Agent runs").
const (
	// AttrToolAbandoned is true on an execute_tool attempt span whose tool
	// did not return within its lease nor the grace after it, and was
	// abandoned: the run went on without it. Absent otherwise.
	AttrToolAbandoned = attribute.Key("deadline.tool.abandoned")
	// AttrAbandonedTools counts, on the invoke_agent span, the tool calls
	// the run abandoned; absent when none.
	AttrAbandonedTools = attribute.Key("deadline.run.abandoned_tools")
	// AttrFinalCall is true on the chat attempt span of the final model
	// call, the one made in the reserve without tools; absent otherwise.
	AttrFinalCall = attribute.Key("deadline.agent.final_call")
	// AttrFinalAnswer is true on the invoke_agent span of a run whose
	// answer came from the final call in the reserve; absent otherwise.
	AttrFinalAnswer = attribute.Key("deadline.run.final_answer")
	// AttrModelCalls and AttrToolCalls count, on the invoke_agent span,
	// the model and tool calls the run started.
	AttrModelCalls = attribute.Key("deadline.run.model_calls")
	AttrToolCalls  = attribute.Key("deadline.run.tool_calls")
	// AttrReserveMs is the run's reserve in milliseconds, on the
	// invoke_agent span; absent without one.
	AttrReserveMs = attribute.Key("deadline.reserve_ms")
	// AttrToolLatePanics counts, on the invoke_agent span, the abandoned
	// tools that had panicked when the run ended (a tool that panics
	// later is reported through otel.Handle and the run's Result);
	// absent when none.
	AttrToolLatePanics = attribute.Key("deadline.run.tool_late_panics")
)

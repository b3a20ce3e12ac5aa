// Package agentrun decides, once for every agent-framework integration, what
// an agent run under one deadline looks like: its step and span names, its
// span layout and kinds, its attribute keys, the reserve rule, how a tool is
// run (leased, abandoned, never crashing the host) and what the caller gets
// back. Each framework's module (otelbudget/otelbudgeteino for Eino,
// otelbudget/otelbudgetgenkit for Genkit) is an adapter over it: a third
// framework costs an adapter, not a design.
//
// # The shape of a run
//
//   - The run: "invoke_agent {agent}" (INTERNAL), otelbudget's run span
//     (Observer.StartRun), the root of every span below.
//   - A model call: a call span named by its step, "chat {model}"
//     ([ChatStep]), INTERNAL, with the call's deadline.* attributes (step,
//     budget, floor, attempts, stop reason, verdict); one child per attempt,
//     "chat {model}" of kind CLIENT (the GenAI conventions' kind for a
//     remote model), with the gen_ai.* chat keys and the attempt's
//     deadline.attempt.* keys. The HTTP requests the attempt makes are its
//     children (otelhttp's CLIENT spans, through the transport recipe).
//   - A tool call: a call span named by its step, "execute_tool {tool}"
//     ([ToolStep]), INTERNAL, with the call's deadline.* attributes; one
//     child per attempt, "execute_tool {tool}" (INTERNAL), with the gen_ai.*
//     tool keys, carried in the tool's context (genai.ContextWithToolCall)
//     so that an MCP client under it joins it.
//   - The attribute keys this package adds are [AttrToolAbandoned],
//     [AttrAbandonedTools], [AttrFinalCall], [AttrModelCalls],
//     [AttrToolCalls] and [AttrToolLatePanics] (docs/attributes.md).
//
// # The reserve rule
//
// A run may keep a reserve back for one final model call, made without
// tools so that the model answers with what it has. A normal model call is
// started only when its need (the longest model call of the run so far, or
// the configured need when longer) fits in what is left above the floor and
// the reserve ([Run.NextModelCall]); otherwise the final call is made now,
// leased everything left above the floor. Tools and normal model calls are
// leased as if the deadline came Reserve earlier, and a call the budget
// stops turns the next model call into the final one.
//
// # Tools
//
// [CallTool] runs a tool function on a goroutine of its own, under its
// lease: a tool that ignores its context is abandoned once the lease has
// ended and a grace has passed (the run goes on; [Result.WaitTools] waits
// for it). The goroutine always recovers: a panic before abandonment is
// handed back as a [*PanicError] for the adapter to report the way its
// framework reports a panicking tool; a panic after abandonment is
// recorded ([Abandoned.Panic], [AttrToolLatePanics], otel.Handle) and
// never re-raised on a goroutine nobody waits for.
package agentrun

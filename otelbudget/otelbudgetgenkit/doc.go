// Package otelbudgetgenkit puts a whole Genkit Go agent run (one
// genkit.Generate with its tool loop) inside one deadline budget, and
// traces it in the OpenTelemetry GenAI semantic conventions.
//
// Genkit caps a run's turns (ai.WithMaxTurns) but not its time: it does not
// look at the context between turns, waits for every tool goroutine, and
// wraps a tool's error with %v. This package uses Genkit's own extension
// points, without forking it:
//
//   - [Agent.Run] is the run's entry: it decides the run's
//     [deadline.Deadline] once (the context's, else [Config.Budget]), starts
//     the "invoke_agent {agent}" span, and calls genkit.Generate with a model
//     middleware (ai.WithMiddleware) of its own;
//   - the middleware runs every model call under [deadline.Do] with
//     [Config.ModelPolicy]: a lease per attempt, refusal below the floor (so
//     no turn starts with less than the floor left), a "chat {model}" call
//     span with one CLIENT span per attempt; a 429 is retried within the
//     budget, after the provider's retry-after-ms, when the model plugin's
//     HTTP client uses [Transport];
//   - tools defined with [DefineTool] run every call under [deadline.Do] with
//     [Config.ToolPolicy] (or the tool's own, [WithToolPolicy]): a lease,
//     refusal below the floor, retries only for tools marked [ReadOnly] or
//     [Idempotent], an "execute_tool {tool}" span. A tool that does not
//     return when its lease ends is abandoned (its goroutine is left to
//     finish, reported in Result.Abandoned and on its span), so the run
//     does not wait for it; a tool's panic never crashes the host (Genkit
//     alone does not recover it): it is the tool's error, which Genkit
//     wraps in its INTERNAL *core.GenkitError;
//   - a step stopped by the budget ends the run with that step's
//     *[deadline.StopError] (errors.Is context.DeadlineExceeded, errors.As
//     *deadline.StopError, Name the step), returned by Run itself, so
//     nothing Genkit wraps hides it. With [Config.Reserve], tools and model
//     calls leave that much untouched, and when the budget stops a step
//     the run spends the reserve on one final model call without tools, so
//     that it returns an answer (Result.Stop says why it was cut short). A
//     normal model call whose need does not fit above the floor and the
//     reserve is not started: the final call is made at once.
//
// What a run looks like (names, spans, keys, the reserve rule, the
// [Result]) is package otelbudget/agentrun's, the same for every framework
// (Eino's adapter is otelbudget/otelbudgeteino).
//
// Genkit v1.4.0 emits spans of its own (the "generate" util span and one
// span per model and tool action, with genkit:* attributes and no GenAI
// keys) through the global tracer provider, which it replaces with an SDK
// provider when the global one is not. This package's spans join them
// rather than duplicate them: they carry the GenAI names and keys Genkit's
// lack, and are started in the same contexts, so that one run is one
// trace ("generate" the parent of a model call's spans, "chat {model}" the
// parent of Genkit's model action span, Genkit's tool action span the
// parent of the tool call's spans). The GenAI keys and names are those of
// package otelbudget/genai, at its pinned conventions version
// ([genai.ConventionsVersion]); docs/attributes.md lists every attribute.
//
// The package is its own module, so that programs that do not use Genkit
// never download it.
package otelbudgetgenkit

import (
	"github.com/deadlinebudget/budget/otelbudget/agentrun"
	"github.com/deadlinebudget/budget/otelbudget/genai"
)

// ConventionsVersion is the commit of the GenAI semantic conventions the
// spans follow ([genai.ConventionsVersion]).
const ConventionsVersion = genai.ConventionsVersion

// ScopeName is the instrumentation scope of the spans this package starts
// (the run and call spans are otelbudget's).
const ScopeName = agentrun.ScopeName

// Package otelbudgeteino runs an Eino agent (github.com/cloudwego/eino) inside
// one deadline budget, and traces it in the OpenTelemetry GenAI semantic
// conventions.
//
// Eino caps an agent's iterations (ChatModelAgent's MaxIterations) and
// retries a model with a sleep that never looks at the time left; nothing in
// it knows how long a whole run may take. This package adds that without
// forking Eino, through the extension points Eino offers:
//
//   - [Budget.Model] wraps the agent's model.ToolCallingChatModel: every model
//     call runs under [deadline.Do] with the model policy ([Config.Model]),
//     leased out of the run's deadline, refused at or below the floor,
//     retried only when the provider's answer says so (through
//     [Budget.Transport], which reads the status and retry-after-ms of each
//     answer), never waiting past the deadline;
//   - [Budget.ToolMiddleware] is a compose.ToolMiddleware for
//     ToolsNodeConfig.ToolCallMiddlewares (ADK ChatModelAgent and the react
//     agent both take one): every tool call runs under [deadline.Do] with its
//     tool's policy ([Config.Tools]), retried only when the tool is marked
//     read-only; a tool that ignores its context is abandoned when its lease
//     ends, and reported ([Result.Abandoned]);
//   - [Budget.ModelRetryConfig] is an adk.ModelRetryConfig whose IsRetryAble
//     and BackoffFunc consult the budget: a context error or a stop of the
//     budget is not retried, and a wait that cannot fit is not slept;
//   - [Budget.Run] (ADK) or [Budget.Start] and [Run.End] (any entry point,
//     the react agent's Generate included) decide the run's
//     [deadline.Deadline] once, at the run's entry, and make sure the error
//     the caller gets is the project's typed stop: whatever Eino wrapped,
//     errors.As finds the [*deadline.StopError] that names the step
//     ("execute_tool search", "chat gpt-4o") and errors.Is matches
//     context.DeadlineExceeded.
//
// A reserve ([Config.Reserve]) keeps time back for one last model call: tools
// and ordinary model calls are leased as if the deadline came Reserve
// earlier, and once the budget cannot fit another turn (a tool stopped by the
// budget, or too little left for a model call above the reserve) the next
// model call is the final one: it runs in the reserve, without tools, so the
// model answers with what it has.
//
// # One shape
//
// What a run looks like is package otelbudget/agentrun's, the same for
// every framework (Genkit's adapter is otelbudget/otelbudgetgenkit): the
// step names ("chat {model}", "execute_tool {tool}"), the spans, the
// deadline.* keys, the reserve rule, the tool runner (a tool's panic never
// crashes the host: before abandonment it is raised again on Eino's
// goroutine, which Eino recovers into its own "panic error", as for a tool
// not wrapped; after, it is recorded and reported), the [Result] and the
// transport recipe ([Budget.Transport]).
//
// # Spans
//
// Eino's core emits no OpenTelemetry spans, so these are the run's GenAI
// spans, in the semantic conventions pinned by package otelbudget/genai
// ([genai.ConventionsVersion]): the run is "invoke_agent {agent}"
// (otelbudget.Observer.StartRun, with the run's deadline.* attributes);
// each model call is the call span "chat {model}" with the call's deadline.*
// attributes and one CLIENT "chat {model}" span per attempt with the GenAI
// chat keys and the attempt's (the HTTP requests below it); each tool call
// the call span "execute_tool {tool}" with one INTERNAL "execute_tool
// {tool}" span per attempt. docs/attributes.md lists them.
package otelbudgeteino

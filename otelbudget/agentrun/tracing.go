package agentrun

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/genai"
)

// Tracing starts an agent run's spans in the shape the package doc
// describes, for one agent (its provider and model). Build one per agent
// with [NewTracing]; safe for concurrent use.
type Tracing struct {
	obs        *otelbudget.Observer
	tracer     trace.Tracer
	latePanics metric.Int64Counter
	provider   string
	model      string
}

// NewTracing returns the Tracing of an agent whose model is model
// (gen_ai.request.model; "" leaves it out) at provider
// (gen_ai.provider.name; "" leaves it out), recorded by obs (nil:
// otelbudget.New(), the global providers).
func NewTracing(obs *otelbudget.Observer, provider, model string) *Tracing {
	if obs == nil {
		obs = otelbudget.New()
	}
	t := &Tracing{
		obs:      obs,
		tracer:   obs.RPCClientTracerProvider().Tracer(ScopeName, trace.WithInstrumentationVersion(otelbudget.Version())),
		provider: provider, model: model,
	}
	meter := obs.MeterProvider().Meter(ScopeName, metric.WithInstrumentationVersion(otelbudget.Version()))
	c, err := meter.Int64Counter(MetricToolLatePanics, metric.WithUnit("{panic}"),
		metric.WithDescription("Tool calls that panicked after the run had abandoned them (recovered, never raised again)."))
	if err != nil {
		otel.Handle(err)
	}
	t.latePanics = c
	return t
}

// MetricToolLatePanics counts the tool calls that panicked after their run
// had abandoned them: recovered, never raised again (Int64Counter,
// {panic}, attribute deadline.step).
const MetricToolLatePanics = "deadline.agent.tool_late_panics"

// Observer returns the observer the spans are recorded by.
func (t *Tracing) Observer() *otelbudget.Observer { return t.obs }

// Hooks returns the hooks to compose into every model and tool call's
// policy: the observer's client hooks, under which the call span is the
// observer's and each attempt's span is the chat or execute_tool span
// [Tracing.StartChat] or [Tracing.StartTool] starts in the attempt's
// context.
func (t *Tracing) Hooks() *deadline.Hooks { return t.obs.ClientHooks() }

// StartRun starts the run span, "invoke_agent {agent}", of run r under d
// (otelbudget's run span, with the GenAI keys and extra), and returns the
// context the run's calls are made in and the span to end with
// [Tracing.EndRun].
func (t *Tracing) StartRun(ctx context.Context, r *Run, agent string, extra ...attribute.KeyValue) (context.Context, *otelbudget.Run) {
	attrs := genai.InvokeAgentAttributes(t.provider, agent)
	if t.model != "" {
		attrs = append(attrs, genai.RequestModelKey.String(t.model))
	}
	if r.cfg.Reserve > 0 {
		attrs = append(attrs, AttrReserveMs.Int64(r.cfg.Reserve.Round(time.Millisecond).Milliseconds()))
	}
	attrs = append(attrs, extra...)
	ctx, span := t.obs.StartRun(ctx, RunSpanName(agent), r.d, trace.WithAttributes(attrs...))
	r.mu.Lock()
	r.span = span.Span()
	r.latePanics = t.latePanics
	r.mu.Unlock()
	return ctx, span
}

// EndRun records the run's counts, abandoned tools, whether the final call
// answered, and error.type on its span, and ends it.
func (t *Tracing) EndRun(span *otelbudget.Run, r *Run, finalAnswer bool, err error) {
	r.mu.Lock()
	kvs := []attribute.KeyValue{AttrModelCalls.Int(r.modelCalls), AttrToolCalls.Int(r.toolCalls)}
	if finalAnswer {
		kvs = append(kvs, AttrFinalAnswer.Bool(true))
	}
	if n := len(r.abandoned); n > 0 {
		kvs = append(kvs, AttrAbandonedTools.Int(n))
	}
	late := 0
	for _, a := range r.abandoned {
		if a.Panic != nil {
			late++
		}
	}
	if late > 0 {
		kvs = append(kvs, AttrToolLatePanics.Int(late))
	}
	r.mu.Unlock()
	if err != nil {
		kvs = append(kvs, genai.ErrorTypeKey.String(ErrorType(err)))
	}
	span.Span().SetAttributes(kvs...)
	span.End(err)
}

// StartChat starts the span of one model call attempt, "chat {model}"
// (CLIENT), with the GenAI chat keys, and [AttrFinalCall] when final. Start
// it in the attempt's context, end it when the attempt ends.
func (t *Tracing) StartChat(ctx context.Context, final bool) (context.Context, trace.Span) {
	attrs := genai.ChatAttributes(t.provider, t.model)
	if final {
		attrs = append(attrs, AttrFinalCall.Bool(true))
	}
	return t.tracer.Start(ctx, ChatStep(t.model), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// Response is what a model's answer says, for the chat span: each field is
// set only when the provider returned it.
type Response struct {
	ID, Model                 string
	FinishReasons             []string
	InputTokens, OutputTokens int
}

// RecordResponse sets resp's GenAI keys on a chat span: the response id and
// model, the finish reasons and the token usage, each when present.
func RecordResponse(s trace.Span, resp Response) {
	var attrs []attribute.KeyValue
	if resp.ID != "" {
		attrs = append(attrs, genai.ResponseIDKey.String(resp.ID))
	}
	if resp.Model != "" {
		attrs = append(attrs, genai.ResponseModelKey.String(resp.Model))
	}
	if len(resp.FinishReasons) > 0 {
		attrs = append(attrs, genai.ResponseFinishReasonsKey.StringSlice(resp.FinishReasons))
	}
	if resp.InputTokens > 0 || resp.OutputTokens > 0 {
		attrs = append(attrs, genai.UsageInputTokensKey.Int(resp.InputTokens), genai.UsageOutputTokensKey.Int(resp.OutputTokens))
	}
	s.SetAttributes(attrs...)
}

// StartTool starts the span of one tool call attempt, "execute_tool
// {tool}" (INTERNAL), with the GenAI tool keys, and returns a context that
// carries it as the tool call (genai.ContextWithToolCall), for an MCP
// client under the tool to join. toolType "" is genai.ToolTypeFunction.
func (t *Tracing) StartTool(ctx context.Context, name, callID, toolType string) (context.Context, trace.Span) {
	if toolType == "" {
		toolType = genai.ToolTypeFunction
	}
	ctx, span := t.tracer.Start(ctx, ToolStep(name), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(genai.ExecuteToolAttributes(name, callID, toolType)...))
	return genai.ContextWithToolCall(ctx, genai.ToolCall{Span: span, Name: name, CallID: callID}), span
}

// ErrorType is the low-cardinality error.type of err: its own ErrorType
// when it has one (every deadline error does), "canceled" or
// "deadline_exceeded" for a context's error, else semconv's "_OTHER".
func ErrorType(err error) string {
	if typed, ok := errors.AsType[interface {
		error
		ErrorType() string
	}](err); ok {
		return typed.ErrorType()
	}
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	}
	return semconv.ErrorTypeOther.Value.AsString()
}

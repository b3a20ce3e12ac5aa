package otelbudgeteino

import (
	"context"
	"errors"
	"io"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/genai"
)

// Model wraps m so that each of its calls made under a run ([Budget.Start],
// [Budget.Run]) is leased out of the run's deadline with the model policy:
// refused at or below the floor (the floor raised by the reserve, but for
// the final call), cut at its lease's end (the client must honour its
// context: a model call is never abandoned, see below), retried when the provider's answer allows it (see
// [Budget.Transport]) after the wait it asked for, never past the deadline.
// A call stopped by the budget returns the [*deadline.StopError] that names
// the step ("chat {model}"). The final call, once the budget cannot fit
// another turn, is made to m without the tools bound by WithTools, so that
// the model answers.
//
// Unlike a tool, a model call whose client ignores its context is waited
// for: model clients fire Eino's callbacks themselves, and a callback that
// fires after the run has ended makes Eino panic (it sends to the agent's
// closed event generator), so abandoning one is not safe. eino-ext's
// clients, over net/http, return as soon as the lease's context ends.
//
// Outside a run (no [Run] in the context) the calls go to m unchanged.
// Stream is served by Generate, within the lease, and returned as a
// one-message stream: a lease cannot outlive the call that took it.
func (b *Budget) Model(m model.ToolCallingChatModel) model.ToolCallingChatModel {
	return &budgetModel{b: b, base: m, bound: m}
}

type budgetModel struct {
	b     *Budget
	base  model.ToolCallingChatModel // without the tools: the final call
	bound model.ToolCallingChatModel // with the tools
}

// WithTools binds tools to the wrapped model and keeps the model without
// them for the final call.
func (m *budgetModel) WithTools(tools []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	bound, err := m.base.WithTools(tools)
	if err != nil {
		return nil, err
	}
	return &budgetModel{b: m.b, base: m.base, bound: bound}, nil
}

// Generate makes one model call under the run's budget.
func (m *budgetModel) Generate(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.Message, error) {
	r := runFrom(ctx)
	if r == nil {
		return m.bound.Generate(ctx, input, opts...)
	}
	return m.b.callModel(ctx, r, func(ctx context.Context, final bool) (*schema.Message, error) {
		mm := m.bound
		if final {
			mm = m.base
		}
		return mm.Generate(ctx, input, opts...)
	})
}

// Stream makes one model call under the run's budget, reads its stream
// within the lease and returns it as a one-message stream.
func (m *budgetModel) Stream(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	r := runFrom(ctx)
	if r == nil {
		return m.bound.Stream(ctx, input, opts...)
	}
	msg, err := m.b.callModel(ctx, r, func(ctx context.Context, final bool) (*schema.Message, error) {
		mm := m.bound
		if final {
			mm = m.base
		}
		sr, err := mm.Stream(ctx, input, opts...)
		if err != nil {
			return nil, err
		}
		defer sr.Close()
		var chunks []*schema.Message
		for {
			c, err := sr.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, err
			}
			chunks = append(chunks, c)
		}
		return schema.ConcatMessages(chunks)
	})
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
}

// callHooks returns the hooks that give the observer's call span of a step
// its GenAI attributes, and keep the span for the attempt to add what the
// answer says.
// With a tool (not nil), the context below the span carries it
// (genai.ContextWithToolCall), for an MCP client to find.
func (b *Budget) callHooks(p deadline.Policy, attrs []attribute.KeyValue, span *trace.Span, tool *genai.ToolCall) *deadline.Hooks {
	own := &deadline.Hooks{CallStart: func(ctx context.Context, _ deadline.CallInfo) context.Context {
		s := trace.SpanFromContext(ctx)
		s.SetAttributes(attrs...)
		*span = s
		if tool != nil {
			tc := *tool
			tc.Span = s
			return genai.ContextWithToolCall(ctx, tc)
		}
		return nil
	}}
	return deadline.Compose(b.obs.Hooks(), own, p.Hooks)
}

func (b *Budget) callModel(ctx context.Context, r *Run, call func(context.Context, bool) (*schema.Message, error)) (*schema.Message, error) {
	p := b.model
	final := r.final.Load()
	if !final && b.cfg.Reserve > 0 {
		if r.d.Remaining() <= p.Floor+b.cfg.Reserve {
			final = true // no room for another turn above the reserve
			r.final.Store(true)
		} else {
			p.Floor += b.cfg.Reserve
		}
	}
	attrs := genai.ChatAttributes(b.cfg.Provider, b.cfg.ModelName)
	if final {
		attrs = append(attrs, AttrFinalCall.Bool(true))
	}
	span := trace.SpanFromContext(context.Background()) // a no-op span until CallStart
	p.Hooks = b.callHooks(p, attrs, &span, nil)
	defer r.enter(p.Name)()
	msg, err := deadline.Do(ctx, r.d, p, func(ctx context.Context, _ deadline.AttemptInfo) (*schema.Message, error) {
		// The model call is waited for, never abandoned: model clients
		// run Eino's callbacks themselves (eino-ext's do), and a callback
		// fired after the run has ended sends to the agent's closed event
		// generator, which panics. The lease's context ends the call: an
		// HTTP model client returns as soon as it is canceled.
		a := &answer{}
		msg, err := call(withAnswer(ctx, a), final)
		if err != nil {
			return nil, a.classify(err)
		}
		if msg == nil {
			return nil, errors.New("otelbudgeteino: the model returned neither a message nor an error")
		}
		span.SetAttributes(responseAttributes(msg)...)
		return msg, nil
	})
	if err != nil {
		r.endsRun(err)
		return nil, err
	}
	r.resetRetries()
	return msg, nil
}

// responseAttributes reads what the conventions record of a model's answer.
func responseAttributes(msg *schema.Message) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	if rm := msg.ResponseMeta; rm != nil {
		if rm.FinishReason != "" {
			attrs = append(attrs, genai.ResponseFinishReasonsKey.StringSlice([]string{rm.FinishReason}))
		}
		if u := rm.Usage; u != nil {
			attrs = append(attrs, genai.UsageInputTokensKey.Int(u.PromptTokens), genai.UsageOutputTokensKey.Int(u.CompletionTokens))
		}
	}
	return attrs
}

package otelbudgeteino

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/agentrun"
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

func (b *Budget) callModel(ctx context.Context, r *Run, call func(context.Context, bool) (*schema.Message, error)) (*schema.Message, error) {
	final := r.ar.NextModelCall(b.model.Floor)
	p := b.model
	p.Floor = r.ar.ModelFloor(p.Floor, final)
	p.Hooks = deadline.Compose(b.tr.Hooks(), p.Hooks)
	defer r.enter(p.Name)()
	msg, err := deadline.Do(ctx, r.d, p, func(ctx context.Context, info deadline.AttemptInfo) (*schema.Message, error) {
		if info.Number == 1 {
			r.ar.ModelCallStarted()
		}
		// The model call is waited for, never abandoned: model clients
		// run Eino's callbacks themselves (eino-ext's do), and a callback
		// fired after the run has ended sends to the agent's closed event
		// generator, which panics. The lease's context ends the call: an
		// HTTP model client returns as soon as it is canceled.
		start := time.Now()
		ctx, span := b.tr.StartChat(ctx, final)
		defer span.End()
		ctx, a := agentrun.WithAnswer(ctx)
		msg, err := call(ctx, final)
		if err == nil && msg == nil {
			err = errors.New("otelbudgeteino: the model returned neither a message nor an error")
		}
		if err != nil {
			err = a.Classify(err)
			agentrun.RecordError(span, err)
			return nil, err
		}
		agentrun.RecordResponse(span, responseOf(msg))
		r.ar.ModelCallDone(time.Since(start))
		return msg, nil
	})
	if err == nil {
		r.resetRetries()
		return msg, nil
	}
	if stop, ok := errors.AsType[*deadline.StopError](err); ok && stop.Reason.Budget() && !final && b.cfg.Reserve > 0 {
		// The budget cut a normal call: the reserve pays for the final
		// one, now.
		r.ar.NoteStop(err)
		r.ar.SetFinal()
		return b.callModel(ctx, r, call)
	}
	r.endsRun(err)
	return nil, err
}

// einoExtOpenAIRequestID is the key under which eino-ext's OpenAI model
// keeps the response's id in schema.Message.Extra.
const einoExtOpenAIRequestID = "openai-request-id"

// responseOf reads what the conventions record of a model's answer: each
// part only when the provider returned it.
func responseOf(msg *schema.Message) agentrun.Response {
	var resp agentrun.Response
	// eino-ext's OpenAI model keeps the response's id in the message's
	// Extra; it keeps no response model.
	if v, ok := msg.Extra[einoExtOpenAIRequestID]; ok {
		if id := fmt.Sprint(v); id != "" {
			resp.ID = id
		}
	}
	if rm := msg.ResponseMeta; rm != nil {
		if rm.FinishReason != "" {
			resp.FinishReasons = []string{rm.FinishReason}
		}
		if u := rm.Usage; u != nil {
			resp.InputTokens, resp.OutputTokens = u.PromptTokens, u.CompletionTokens
		}
	}
	return resp
}

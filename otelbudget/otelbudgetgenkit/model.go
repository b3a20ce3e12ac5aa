package otelbudgetgenkit

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/firebase/genkit/go/ai"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/otelbudget/genai"
)

// middleware is the run's ai.ModelMiddleware: Genkit calls it for every
// turn, without looking at the context between turns.
func (r *run) middleware(next ai.ModelFunc) ai.ModelFunc {
	r.mu.Lock()
	r.next = next
	r.mu.Unlock()
	return func(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
		r.mu.Lock()
		r.lastReq = req
		final := r.finalUsed
		r.mu.Unlock()
		if final {
			// The final call answered with tool requests anyway and Genkit
			// ran them: nothing is left to spend.
			if s := r.firstStop(); s != nil {
				return nil, s
			}
		}
		resp, err := r.modelCall(ctx, req, cb, next, r.a.cfg.Reserve, false)
		if err == nil {
			r.remember(resp)
			return resp, nil
		}
		var stop *deadline.StopError
		if errors.As(err, &stop) && stop.Reason.Budget() {
			r.noteStop(stop)
			if r.a.cfg.Reserve > 0 {
				return r.finalCall(ctx, req, cb, next)
			}
			return nil, stop
		}
		return nil, err
	}
}

// remember keeps resp as the run's last response and its tool requests for
// the tools to find their call ids.
func (r *run) remember(resp *ai.ModelResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastResp = resp
	r.pending = nil
	if resp == nil || resp.Message == nil {
		return
	}
	for _, p := range resp.Message.Content {
		if p.IsToolRequest() && p.ToolRequest != nil {
			if r.pending == nil {
				r.pending = map[string][]pendingCall{}
			}
			tr := p.ToolRequest
			r.pending[tr.Name] = append(r.pending[tr.Name], pendingCall{ref: tr.Ref, input: tr.Input})
		}
	}
}

// finalCall spends the reserve on one model call without tools.
func (r *run) finalCall(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback, next ai.ModelFunc) (*ai.ModelResponse, error) {
	r.mu.Lock()
	if r.finalUsed {
		r.mu.Unlock()
		return nil, r.firstStop()
	}
	r.finalUsed = true
	stop := r.stop
	r.mu.Unlock()
	final := *req
	final.Tools = nil
	final.ToolChoice = ""
	final.Messages = append(slices.Clone(req.Messages), ai.NewUserTextMessage(FinalPrompt))
	resp, err := r.modelCall(ctx, &final, cb, next, 0, true)
	if err != nil {
		var s *deadline.StopError
		if errors.As(err, &s) && s.Reason.Budget() {
			return nil, stop
		}
		return nil, err
	}
	if resp.Message != nil {
		// The answer is the answer: tool requests in it are dropped, so
		// that Genkit ends the loop.
		resp.Message.Content = slices.DeleteFunc(slices.Clone(resp.Message.Content), (*ai.Part).IsToolRequest)
	}
	r.remember(resp)
	return resp, nil
}

// modelCall runs next once under the model policy, its floor raised by
// reserve, as the "chat {model}" CLIENT span.
func (r *run) modelCall(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback, next ai.ModelFunc, reserve time.Duration, final bool) (*ai.ModelResponse, error) {
	a := r.a
	p := a.modelPolicy
	httpPolicy := p
	httpPolicy.Name, httpPolicy.Floor = p.Name+" http", 0
	httpPolicy.LearnedFloor = nil
	httpPolicy.Hooks = deadline.Compose(p.Hooks, a.hooks)
	p.Floor += reserve
	// The call is one attempt bounded by the budget alone: the ceiling,
	// the retries and their waits are the HTTP request's, inside it.
	p.MaxAttempts, p.Backoff, p.RetryBudget, p.Hedge = 1, deadline.Backoff{}, nil, nil
	p.AttemptTimeout, p.Ceiling, p.LearnedFloor = 0, nil, nil
	p.Hooks = deadline.Compose(p.Hooks, a.hooks)
	var inner *deadline.StopError // the HTTP request's budget stop
	catch := &deadline.Hooks{CallEnd: func(_ context.Context, cr deadline.CallResult) {
		if s, ok := cr.Err.(*deadline.StopError); ok && cr.Name == httpPolicy.Name && s.Reason.Budget() {
			inner = s
		}
	}}
	resp, err := deadline.Do(ctx, r.d, p, func(ctx context.Context, info deadline.AttemptInfo) (*ai.ModelResponse, error) {
		r.mu.Lock()
		r.modelCalls++
		r.mu.Unlock()
		attrs := genai.ChatAttributes(a.cfg.Provider, a.modelName)
		if final {
			attrs = append(attrs, AttrReserveFinal.Bool(true))
		}
		ctx, span := a.tracer.Start(ctx, genai.ChatSpanName(a.modelName), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
		defer span.End()
		ctx = deadline.WithHooks(deadlinehttp.WithRequestPolicy(ctx, httpPolicy), catch)
		resp, err := next(ctx, req, cb)
		if err != nil {
			span.SetAttributes(genai.ErrorTypeKey.String(errorType(err)))
			span.SetStatus(codes.Error, err.Error())
			return nil, err
		}
		recordResponse(span, resp)
		return resp, nil
	})
	if err != nil && inner != nil {
		// The provider's SDK turned the transport's stop (a Retry-After
		// that does not fit, a retry refused below the floor) into its
		// own error: the model step stopped for that reason.
		s := *inner
		s.Name = p.Name
		return nil, &s
	}
	return resp, err
}

// recordResponse sets the response's GenAI attributes on the chat span,
// those the model plugin gave: compat_oai puts the model and the id in
// Custom, and the tokens in Usage.
func recordResponse(span trace.Span, resp *ai.ModelResponse) {
	if resp == nil {
		return
	}
	if m, ok := resp.Custom.(map[string]any); ok {
		if s, ok := m["model"].(string); ok && s != "" {
			span.SetAttributes(genai.ResponseModelKey.String(s))
		}
		if s, ok := m["id"].(string); ok && s != "" {
			span.SetAttributes(genai.ResponseIDKey.String(s))
		}
	}
	if u := resp.Usage; u != nil && (u.InputTokens > 0 || u.OutputTokens > 0) {
		span.SetAttributes(genai.UsageInputTokensKey.Int(u.InputTokens), genai.UsageOutputTokensKey.Int(u.OutputTokens))
	}
}

// errorType is error.type for err: its own ErrorType when it has one
// (every deadline error does), else semconv's "_OTHER".
func errorType(err error) string {
	var typed interface{ ErrorType() string }
	if errors.As(err, &typed) {
		return typed.ErrorType()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "deadline_exceeded"
	}
	return semconv.ErrorTypeOther.Value.AsString()
}

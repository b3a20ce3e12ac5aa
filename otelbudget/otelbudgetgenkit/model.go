package otelbudgetgenkit

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/firebase/genkit/go/ai"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/agentrun"
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
		used := r.finalUsed
		r.mu.Unlock()
		if used {
			// The final call answered with tool requests anyway and Genkit
			// ran them: nothing is left to spend.
			if s := r.firstStop(); s != nil {
				return nil, s
			}
		}
		if r.a.cfg.Reserve > 0 && r.ar.NextModelCall(r.a.modelPolicy.Floor) {
			// The reserve rule: the call's need does not fit above the
			// floor and the reserve, so the final call is made now.
			return r.finalCall(ctx, req, cb, next)
		}
		resp, err := r.modelCall(ctx, req, cb, next, false)
		if err == nil {
			r.remember(resp)
			return resp, nil
		}
		stop := r.ar.NoteStop(err)
		if stop != nil && stop.Reason.Budget() && r.a.cfg.Reserve > 0 {
			r.ar.SetFinal()
			return r.finalCall(ctx, req, cb, next)
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
	r.mu.Unlock()
	stop := r.firstStop()
	final := *req
	final.Tools = nil
	final.ToolChoice = ""
	final.Messages = append(slices.Clone(req.Messages), ai.NewUserTextMessage(FinalPrompt))
	resp, err := r.modelCall(ctx, &final, cb, next, true)
	if err != nil {
		var s *deadline.StopError
		if errors.As(err, &s) && s.Reason.Budget() && stop != nil {
			return nil, stop // the stop that cut the run short, not the final call's
		}
		r.ar.NoteStop(err)
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

// modelCall runs next under the model policy, its floor raised by the
// reserve unless final, in agentrun's shape: the call span "chat {model}"
// and one CLIENT "chat {model}" span per attempt. An attempt's error is
// retried when the provider's answer, read by [Transport], allows it.
func (r *run) modelCall(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback, next ai.ModelFunc, final bool) (*ai.ModelResponse, error) {
	a := r.a
	p := a.modelPolicy
	p.Floor = r.ar.ModelFloor(p.Floor, final)
	p.Hooks = deadline.Compose(a.tr.Hooks(), p.Hooks)
	return deadline.Do(ctx, r.d, p, func(ctx context.Context, info deadline.AttemptInfo) (*ai.ModelResponse, error) {
		if info.Number == 1 {
			r.ar.ModelCallStarted()
		}
		start := time.Now()
		ctx, span := a.tr.StartChat(ctx, final)
		defer span.End()
		ctx, ans := agentrun.WithAnswer(ctx)
		resp, err := next(ctx, req, cb)
		if err != nil {
			err = ans.Classify(err)
			agentrun.RecordError(span, err)
			return nil, err
		}
		agentrun.RecordResponse(span, responseOf(resp))
		r.ar.ModelCallDone(time.Since(start))
		return resp, nil
	})
}

// responseOf reads the GenAI keys of a response, those the model plugin
// gave: compat_oai puts the model and the id in Custom (only when the
// provider's answer carries a system_fingerprint), and the tokens in Usage.
func responseOf(resp *ai.ModelResponse) agentrun.Response {
	var out agentrun.Response
	if resp == nil {
		return out
	}
	if m, ok := resp.Custom.(map[string]any); ok {
		out.Model, _ = m["model"].(string)
		out.ID, _ = m["id"].(string)
	}
	if u := resp.Usage; u != nil {
		out.InputTokens, out.OutputTokens = u.InputTokens, u.OutputTokens
	}
	if resp.FinishReason != "" {
		out.FinishReasons = []string{string(resp.FinishReason)}
	}
	return out
}

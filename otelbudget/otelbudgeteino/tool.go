package otelbudgeteino

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/agentrun"
)

// ToolMiddleware returns the middleware that puts each tool call of a run
// inside its budget. Give it to Eino in ToolsNodeConfig.ToolCallMiddlewares
// (adk.ToolsConfig embeds one; so does the react agent's ToolsConfig).
//
// Each call runs under deadline.Do with its tool's policy ([Config.Tools],
// else [Config.Tool]), its floor raised by the reserve: refused at or below
// the floor, cut at its lease's end, retried only when the tool is marked
// ReadOnly. A tool that ignores its context is abandoned once its lease has
// ended and Config.AbandonGrace has passed: the call returns, the tool's
// goroutine is left to finish on its own, and the run's [Result.Abandoned]
// and the span's deadline.abandoned say so.
//
// A call the budget stops ends the run with the [*deadline.StopError] that
// names the step ("execute_tool {tool}") when there is no reserve. With a
// reserve, the call answers the model instead, with a result saying the tool
// was stopped and why, and the model's next call is the final one, made in
// the reserve without tools. Any other failure of the tool is returned as
// Eino would have it, wrapped in the StopError that says the tool was not
// retried (errors.Is finds the tool's error).
//
// Outside a run (no [Run] in the context) the calls go to the tool unchanged.
// A streaming tool's stream is read within the lease and returned whole.
func (b *Budget) ToolMiddleware() compose.ToolMiddleware {
	return compose.ToolMiddleware{
		Invokable: func(next compose.InvokableToolEndpoint) compose.InvokableToolEndpoint {
			return func(ctx context.Context, in *compose.ToolInput) (*compose.ToolOutput, error) {
				r := runFrom(ctx)
				if r == nil {
					return next(ctx, in)
				}
				s, err := b.callTool(ctx, r, in, func(ctx context.Context) (string, error) {
					out, err := next(ctx, in)
					if err != nil {
						return "", err
					}
					return out.Result, nil
				})
				if err != nil {
					return nil, err
				}
				return &compose.ToolOutput{Result: s}, nil
			}
		},
		Streamable: func(next compose.StreamableToolEndpoint) compose.StreamableToolEndpoint {
			return func(ctx context.Context, in *compose.ToolInput) (*compose.StreamToolOutput, error) {
				r := runFrom(ctx)
				if r == nil {
					return next(ctx, in)
				}
				s, err := b.callTool(ctx, r, in, func(ctx context.Context) (string, error) {
					out, err := next(ctx, in)
					if err != nil {
						return "", err
					}
					defer out.Result.Close()
					var sb strings.Builder
					for {
						c, err := out.Result.Recv()
						if errors.Is(err, io.EOF) {
							return sb.String(), nil
						}
						if err != nil {
							return "", err
						}
						sb.WriteString(c)
					}
				})
				if err != nil {
					return nil, err
				}
				return &compose.StreamToolOutput{Result: schema.StreamReaderFromArray([]string{s})}, nil
			}
		},
	}
}

func (b *Budget) toolPolicy(name string) (deadline.Policy, bool) {
	tp, ok := b.cfg.Tools[name]
	p := b.tool
	if ok && tp.Policy.MaxAttempts != 0 {
		p = tp.Policy
	}
	p.Name = agentrun.ToolStep(name)
	if !tp.ReadOnly {
		p.Retryable = func(error) bool { return false }
	}
	return p, tp.ReadOnly
}

func (b *Budget) callTool(ctx context.Context, r *Run, in *compose.ToolInput, call func(context.Context) (string, error)) (string, error) {
	p, _ := b.toolPolicy(in.Name)
	p.Floor = r.ar.ToolFloor(p.Floor)
	p.Hooks = deadline.Compose(b.tr.Hooks(), p.Hooks)
	defer r.enter(p.Name)()
	s, err := deadline.Do(ctx, r.d, p, func(ctx context.Context, a deadline.AttemptInfo) (string, error) {
		ctx, span := b.tr.StartTool(ctx, in.Name, in.CallID, "")
		defer span.End()
		s, _, err := agentrun.CallTool(ctx, r.ar, agentrun.ToolCall{Name: in.Name, CallID: in.CallID, Lease: a.Granted, Span: span}, call)
		if pe, ok := errors.AsType[*agentrun.PanicError](err); ok {
			// Raised again on Eino's goroutine, which recovers it into
			// its own "panic error", as it does for a tool not wrapped.
			agentrun.RecordError(span, pe)
			panic(pe.Value)
		}
		agentrun.RecordError(span, err)
		return s, err
	})
	if err == nil {
		return s, nil
	}
	var stop *deadline.StopError
	if b.cfg.Reserve > 0 && errors.As(err, &stop) && stop.Reason.Budget() {
		r.ar.NoteStop(err)
		r.ar.SetFinal()
		return fmt.Sprintf("The tool %s was stopped before it finished (%s): the run's time is nearly spent. Answer now with what you have.", in.Name, stop.Reason), nil
	}
	r.endsRun(err)
	return "", err
}

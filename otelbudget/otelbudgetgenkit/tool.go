package otelbudgetgenkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/agentrun"
	"github.com/deadlinebudget/budget/otelbudget/genai"
)

// AbandonGrace is how long a tool call whose lease has ended is given to
// return before the run abandons it: long enough for a tool that honours
// its context to return its error, short against any floor.
const AbandonGrace = agentrun.DefaultGrace

// ToolOption configures a tool defined with [DefineTool].
type ToolOption interface{ applyTool(*toolConfig) }

type toolOptionFunc func(*toolConfig)

func (f toolOptionFunc) applyTool(c *toolConfig) { f(c) }

type toolConfig struct {
	retry    bool
	policy   *deadline.Policy
	genkit   []ai.ToolOption
	toolType string
}

// ReadOnly marks the tool as reading only: a failed call may be retried,
// within its policy's MaxAttempts and the budget.
func ReadOnly() ToolOption { return toolOptionFunc(func(c *toolConfig) { c.retry = true }) }

// Idempotent marks the tool as safe to repeat: a failed call may be
// retried, within its policy's MaxAttempts and the budget.
func Idempotent() ToolOption { return toolOptionFunc(func(c *toolConfig) { c.retry = true }) }

// WithToolPolicy gives the tool a policy of its own instead of
// [Config.ToolPolicy]; an empty Name becomes the tool's name, and
// MaxAttempts 0 is filled as for [Config.ModelPolicy]. As with the
// agent's, MaxAttempts above 1 applies only to a tool marked [ReadOnly] or
// [Idempotent].
func WithToolPolicy(p deadline.Policy) ToolOption {
	return toolOptionFunc(func(c *toolConfig) { c.policy = &p })
}

// WithToolType sets gen_ai.tool.type on the tool's spans (default
// genai.ToolTypeFunction).
func WithToolType(t string) ToolOption {
	return toolOptionFunc(func(c *toolConfig) { c.toolType = t })
}

// WithGenkitToolOptions passes Genkit's own tool options (ai.WithInputSchema)
// to genkit.DefineTool.
func WithGenkitToolOptions(opts ...ai.ToolOption) ToolOption {
	return toolOptionFunc(func(c *toolConfig) { c.genkit = append(c.genkit, opts...) })
}

// AbandonedError is the error of a tool call attempt that did not return
// when its lease ended: agentrun's, the same for every framework.
type AbandonedError = agentrun.AbandonedError

// DefineTool defines a Genkit tool (genkit.DefineTool) whose every call,
// made inside an [Agent.Run], runs under the run's deadline:
//
//   - under [deadline.Do] with the tool's policy ([WithToolPolicy], else
//     [Config.ToolPolicy]), named by the tool, its floor raised by
//     [Config.Reserve]: a lease, refusal below the floor;
//   - retried only when marked [ReadOnly] or [Idempotent] (else one
//     attempt), for the errors the policy's classifier retries;
//   - as the "execute_tool {name}" span, with gen_ai.tool.name,
//     gen_ai.tool.call.id (the model's id, when found), gen_ai.tool.type,
//     carried in fn's context (genai.ContextWithToolCall) so that an MCP
//     client under it (otelbudgetmcp) joins it;
//   - fn runs on a goroutine of its own with the attempt's context; if it
//     has not returned [AbandonGrace] after its lease ended it is
//     abandoned: the call fails with an [*AbandonedError], the span carries
//     deadline.tool.abandoned, and Result.Abandoned lists it. Its
//     goroutine ends when fn returns. A panic in fn never crashes the
//     host: before abandonment it is the call's error (a
//     *agentrun.PanicError, which Genkit wraps in its INTERNAL
//     *core.GenkitError "tool ... failed", as for any failing tool); after,
//     it is recovered and reported (Abandoned.Panic, otel.Handle);
//   - a call the budget stops (refused, or cut at the run's deadline)
//     interrupts Genkit's turn (ToolContext.Interrupt), which makes Genkit
//     wait for the turn's other tools and return, and [Agent.Run] ends the
//     run with the stop, or with the reserve's answer.
//
// Outside an Agent.Run the tool is fn itself. A tool's own error is
// returned as Genkit returns it. An invalid option (policy) is an error;
// Genkit's own checks (a duplicate name) panic as in genkit.DefineTool.
func DefineTool[In, Out any](g *genkit.Genkit, name, description string, fn ai.ToolFunc[In, Out], opts ...ToolOption) (*ai.ToolDef[In, Out], error) {
	if g == nil {
		return nil, errors.New("otelbudgetgenkit: DefineTool: nil *genkit.Genkit")
	}
	if fn == nil {
		return nil, fmt.Errorf("otelbudgetgenkit: DefineTool %q: nil function", name)
	}
	var c toolConfig
	for _, o := range opts {
		if o != nil {
			o.applyTool(&c)
		}
	}
	if c.toolType == "" {
		c.toolType = genai.ToolTypeFunction
	}
	var own *deadline.Policy
	if c.policy != nil {
		p, err := toolPolicyOf(*c.policy, fmt.Sprintf("tool %q policy", name))
		if err != nil {
			return nil, err
		}
		own = &p
	}
	wrapped := func(tc *ai.ToolContext, in In) (Out, error) {
		r := runOf(tc)
		if r == nil {
			return fn(tc, in)
		}
		return runTool(tc, r, name, c, own, fn, in)
	}
	return genkit.DefineTool(g, name, description, wrapped, c.genkit...), nil
}

// runTool is one tool call inside a run.
func runTool[In, Out any](tc *ai.ToolContext, r *run, name string, c toolConfig, own *deadline.Policy, fn ai.ToolFunc[In, Out], in In) (Out, error) {
	a := r.a
	p := a.toolPolicy
	if own != nil {
		p = *own
	}
	p.Name = agentrun.ToolStep(name)
	if !c.retry {
		p.MaxAttempts = 1
	}
	p.Floor = r.ar.ToolFloor(p.Floor)
	p.Hooks = deadline.Compose(p.Hooks, a.tr.Hooks())
	callID := takeCallID(r, name, in)
	out, err := deadline.Do(tc.Context, r.d, p, func(ctx context.Context, info deadline.AttemptInfo) (Out, error) {
		ctx, span := a.tr.StartTool(ctx, name, callID, c.toolType)
		defer span.End()
		atc := &ai.ToolContext{Context: ctx, Resumed: tc.Resumed, OriginalInput: tc.OriginalInput}
		// A panic comes back as a *agentrun.PanicError: returned as the
		// tool's error, Genkit reports it as it reports a failed tool (an
		// INTERNAL GenkitError) instead of crashing on its goroutine.
		out, _, err := agentrun.CallTool(ctx, r.ar, agentrun.ToolCall{Name: name, CallID: callID, Lease: info.Granted, Span: span},
			func(context.Context) (Out, error) { return fn(atc, in) })
		agentrun.RecordError(span, err)
		return out, err
	})
	if err == nil {
		return out, nil
	}
	var stop *deadline.StopError
	if errors.As(err, &stop) {
		if ok, _ := ai.IsToolInterruptError(stop.Last); ok {
			return out, stop.Last // the tool's own interrupt, for Genkit
		}
		r.ar.NoteStop(stop)
		if stop.Reason.Budget() {
			return out, tc.Interrupt(&ai.InterruptOptions{Metadata: map[string]any{
				"deadline.step":        stop.Name,
				"deadline.stop_reason": stop.Reason.String(),
			}})
		}
	}
	return out, err
}

// takeCallID finds the model's id of this call among the tool requests of
// the last response: the first request for name whose input, decoded as
// In, encodes as in does.
func takeCallID[In any](r *run, name string, in In) string {
	want, err := json.Marshal(in)
	if err != nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	calls := r.pending[name]
	for i, pc := range calls {
		if sameInput(pc.input, want, in) {
			r.pending[name] = append(calls[:i:i], calls[i+1:]...)
			return pc.ref
		}
	}
	return ""
}

// sameInput reports whether a tool request's raw input, decoded as In,
// encodes as want.
func sameInput[In any](raw any, want []byte, _ In) bool {
	b, err := json.Marshal(raw)
	if err != nil {
		return false
	}
	var v In
	if json.Unmarshal(b, &v) != nil {
		return string(b) == string(want)
	}
	got, err := json.Marshal(v)
	return err == nil && string(got) == string(want)
}

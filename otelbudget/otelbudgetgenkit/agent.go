package otelbudgetgenkit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/agentrun"
)

// DefaultModelStep is the operation of the model calls' step: the step
// itself is "chat {model}" (agentrun.ChatStep), the same for every
// framework.
const DefaultModelStep = "chat"

// FinalPrompt is the text of the user message appended to the final model
// call that [Config.Reserve] pays for, the call made without tools.
const FinalPrompt = "The time budget for this task is spent: answer now with what you have, without calling tools."

// ErrNoBudget is returned by [Agent.Run] when neither the context (a
// deadline.NewContext deadline or a context deadline) nor [Config.Budget]
// gives the run a budget.
var ErrNoBudget = errors.New("otelbudgetgenkit: the run has no budget: give the context a deadline (deadline.NewContext or context.WithTimeout) or set Config.Budget")

// Config configures an [Agent]. The zero value of each field but Model is
// usable.
type Config struct {
	// Agent names the agent: the run span is "invoke_agent {Agent}" and
	// carries gen_ai.agent.name. Empty: "invoke_agent" and no name.
	Agent string

	// Model is the Genkit model every call of the run uses, as
	// ai.WithModelName takes it ("provider/model"); required. Run passes
	// it to Genkit itself, so the caller's options must not set a model.
	// gen_ai.request.model is the part after the first "/".
	Model string

	// Provider is gen_ai.provider.name on the run and chat spans (e.g.
	// genai.ProviderOpenAI for the compat_oai plugin). The conventions
	// require it; empty leaves it out.
	Provider string

	// Budget is the run's budget when the context carries no deadline.
	// Zero: the context must carry one ([ErrNoBudget]).
	Budget time.Duration

	// ModelPolicy is the policy of each model call, as for every
	// framework (agentrun): its Name is replaced by the step, "chat
	// {model}"; each attempt is leased out of the run's deadline (its
	// floor raised by the reserve but for the final call), under its
	// ceiling (AttemptTimeout, Ceiling), and retried, after Backoff or the
	// wait the provider asked for, when the provider's answer allows it:
	// the model plugin's HTTP client must use [Transport] (with the SDK's
	// own retries off) for the answer to be read. MaxAttempts 0 takes
	// deadline.DefaultPolicy()'s MaxAttempts, and its Floor and Backoff
	// where those are zero.
	ModelPolicy deadline.Policy

	// ToolPolicy is the policy of each tool call of a tool without one of
	// its own ([WithToolPolicy]); its Name is replaced by the step,
	// "execute_tool {tool}".
	// MaxAttempts above 1 applies only to tools marked [ReadOnly] or
	// [Idempotent]; the others get one attempt. The zero Policy means
	// deadline.DefaultPolicy().
	ToolPolicy deadline.Policy

	// Reserve is kept back for a final model call: every tool call and
	// every model call but the final one is refused or cut that much
	// earlier than its floor alone would, and when the budget stops a
	// step, the run makes one model call without tools, with
	// [FinalPrompt] appended, under ModelPolicy and the whole remaining
	// budget, and returns its answer (with [Result.Stop] set). Zero: no
	// final call; a stop ends the run with the stop. Must be >= 0.
	Reserve time.Duration

	// ModelNeed is how long a model call is known to take, for the reserve
	// rule before the run has seen one: a normal model call starts only
	// when the longer of ModelNeed and the longest model call of the run
	// so far fits in what is left above the floor and the reserve;
	// otherwise the final call is made now. 0: learned only. Must be >= 0.
	ModelNeed time.Duration

	// Observer records the spans and metrics; nil means otelbudget.New()
	// (the global providers).
	Observer *otelbudget.Observer

	// Middleware is the caller's own model middleware, run inside this
	// package's (Genkit accepts ai.WithMiddleware once per Generate, and
	// Run uses it).
	Middleware []ai.ModelMiddleware
}

// Agent runs Genkit generations inside a deadline budget. Build one with
// [New]; it is safe for concurrent use by any number of runs.
type Agent struct {
	cfg         Config
	obs         *otelbudget.Observer
	tr          *agentrun.Tracing
	modelPolicy deadline.Policy
	toolPolicy  deadline.Policy
	modelName   string
}

// New returns an Agent for cfg, or an error naming the field that is
// wrong: an empty Model, a negative Budget or Reserve, or an invalid
// policy (its *deadline.PolicyError).
func New(cfg Config) (*Agent, error) {
	if cfg.Model == "" {
		return nil, errors.New("otelbudgetgenkit: Config.Model is empty: name the Genkit model of the run (\"provider/model\")")
	}
	if cfg.Budget < 0 {
		return nil, fmt.Errorf("otelbudgetgenkit: Config.Budget is %v: it must be >= 0 (0: the context's deadline)", cfg.Budget)
	}
	if cfg.Reserve < 0 {
		return nil, fmt.Errorf("otelbudgetgenkit: Config.Reserve is %v: it must be >= 0", cfg.Reserve)
	}
	mp := cfg.ModelPolicy
	if mp.MaxAttempts == 0 {
		mp = withDefaults(mp)
	}
	if err := mp.Validate(); err != nil {
		return nil, fmt.Errorf("otelbudgetgenkit: Config.ModelPolicy: %w", err)
	}
	tp, err := toolPolicyOf(cfg.ToolPolicy, "Config.ToolPolicy")
	if err != nil {
		return nil, err
	}
	obs := cfg.Observer
	if obs == nil {
		obs = otelbudget.New()
	}
	if cfg.ModelNeed < 0 {
		return nil, fmt.Errorf("otelbudgetgenkit: Config.ModelNeed is %v: it must be >= 0", cfg.ModelNeed)
	}
	a := &Agent{cfg: cfg, obs: obs, modelPolicy: mp, toolPolicy: tp, modelName: cfg.Model}
	if _, name, ok := strings.Cut(cfg.Model, "/"); ok {
		a.modelName = name
	}
	a.modelPolicy.Name = agentrun.ChatStep(a.modelName)
	a.tr = agentrun.NewTracing(obs, cfg.Provider, a.modelName)
	return a, nil
}

// withDefaults fills a policy given without MaxAttempts from
// deadline.DefaultPolicy(): MaxAttempts, and Floor and Backoff when zero.
func withDefaults(p deadline.Policy) deadline.Policy {
	d := deadline.DefaultPolicy()
	p.MaxAttempts = d.MaxAttempts
	if p.Floor == 0 {
		p.Floor = d.Floor
	}
	if p.Backoff == (deadline.Backoff{}) {
		p.Backoff = d.Backoff
	}
	return p
}

// toolPolicyOf is p, filled by withDefaults when MaxAttempts is 0,
// validated.
func toolPolicyOf(p deadline.Policy, field string) (deadline.Policy, error) {
	if p.MaxAttempts == 0 {
		p = withDefaults(p)
	}
	if err := p.Validate(); err != nil {
		return p, fmt.Errorf("otelbudgetgenkit: %s: %w", field, err)
	}
	return p, nil
}

// Result is what a run gives back besides its error: the answer (Genkit's
// last response), whether it came from the final call in the reserve, the
// stop, the abandoned tools, the calls made, and WaitTools. The shape is
// agentrun's, shared by every framework: see [agentrun.Result] for each
// field's contract.
type Result = agentrun.Result[*ai.ModelResponse]

// AbandonedTool is a tool call the run stopped waiting for.
type AbandonedTool = agentrun.Abandoned

// runKey is the context key of a run's state.
type runKey struct{}

// run is the state of one Run, shared by its middleware and tools.
type run struct {
	a  *Agent
	d  deadline.Deadline
	ar *agentrun.Run

	mu        sync.Mutex
	finalUsed bool
	next      ai.ModelFunc
	lastReq   *ai.ModelRequest
	lastResp  *ai.ModelResponse
	pending   map[string][]pendingCall // tool name -> tool requests of the last response
}

type pendingCall struct {
	ref   string
	input any
}

func runOf(ctx context.Context) *run {
	r, _ := ctx.Value(runKey{}).(*run)
	return r
}

func (r *run) firstStop() *deadline.StopError { return r.ar.Stop() }

// Run runs one Genkit generation (genkit.Generate(ctx, g, opts...), with
// the model [Config.Model] and this package's model middleware) as an
// agent run inside one deadline budget, and returns its [Result].
//
// The deadline is decided once, here: the one ctx carries
// (deadline.FromContext: deadline.NewContext's or ctx's own deadline,
// the earlier), else a new one of [Config.Budget], else [ErrNoBudget]. Every
// model call and every tool defined with [DefineTool] gets a lease from it.
// The "invoke_agent {agent}" span (otelbudget's run span, with the GenAI
// keys) is the parent of every span of the run.
//
// The error is nil when the run answered (possibly from the reserve:
// Result.Final, Result.Stop); the *deadline.StopError of the step that
// stopped, itself, whatever Genkit wrapped around it: a stop of the budget
// (errors.Is context.DeadlineExceeded), retries that ran out
// (attempts_exhausted, with the attempts made), the caller's cancel
// (ReasonCanceled, errors.Is context.Canceled); or Genkit's or a tool's own
// error unchanged (a tool's panic is Genkit's INTERNAL *core.GenkitError). The options must not set a model or middleware (Genkit
// refuses either twice: use [Config.Model], [Config.Middleware]).
func (a *Agent) Run(ctx context.Context, g *genkit.Genkit, opts ...ai.GenerateOption) (*Result, error) {
	if ctx == nil {
		return nil, errors.New("otelbudgetgenkit: Run: nil context")
	}
	if g == nil {
		return nil, errors.New("otelbudgetgenkit: Run: nil *genkit.Genkit")
	}
	d, ok := deadline.FromContext(ctx)
	if !ok {
		if a.cfg.Budget <= 0 {
			return nil, ErrNoBudget
		}
		d = deadline.New(a.cfg.Budget)
	}
	caller := ctx
	r := &run{a: a, d: d, ar: agentrun.NewRun(d, agentrun.Config{Reserve: a.cfg.Reserve, ModelNeed: a.cfg.ModelNeed, Grace: AbandonGrace})}
	ctx, span := a.tr.StartRun(ctx, r.ar, a.cfg.Agent)
	ctx, cancel := d.Scope(ctx)
	defer cancel()
	ctx = context.WithValue(ctx, runKey{}, r)

	mws := append([]ai.ModelMiddleware{r.middleware}, a.cfg.Middleware...)
	all := make([]ai.GenerateOption, 0, len(opts)+2)
	all = append(all, ai.WithModelName(a.cfg.Model), ai.WithMiddleware(mws...))
	all = append(all, opts...)
	resp, err := genkit.Generate(ctx, g, all...)

	stop := r.firstStop()
	switch {
	case err != nil && caller.Err() != nil && errors.Is(context.Cause(caller), context.Canceled):
		// The caller's cancel, whatever Genkit wrapped it in (a tool's
		// "canceled by the caller" is a GenkitError that hides it).
		if stop == nil || stop.Reason != deadline.ReasonCanceled {
			stop = agentrun.CanceledStop(caller, a.modelPolicy.Name, d.Remaining(), err)
			r.ar.NoteStop(stop)
		}
		resp, err = nil, stop
	case err == nil && resp != nil && resp.FinishReason == ai.FinishReasonInterrupted && stop != nil && stop.Reason.Budget():
		// A tool was stopped by the budget: Genkit returned the turn as
		// interrupted (DefineTool's tools interrupt on a stop).
		resp, err = r.afterToolStop(ctx, resp, stop)
	case err != nil && stop != nil:
		// The stop, whatever Genkit made of it.
		err = stop
	}
	r.mu.Lock()
	final := r.finalUsed
	r.mu.Unlock()
	if err != nil {
		resp = nil
	}
	res := agentrun.NewResult(r.ar, resp, err == nil && final, nil)
	if err != nil || final {
		res.Stop = r.firstStop()
	}
	a.tr.EndRun(span, r.ar, res.Final, err)
	return res, err
}

// afterToolStop finishes a run whose tool turn the budget stopped: with a
// reserve, one final model call on the history and the tools' results so
// far; without, the stop.
func (r *run) afterToolStop(ctx context.Context, resp *ai.ModelResponse, stop *deadline.StopError) (*ai.ModelResponse, error) {
	r.mu.Lock()
	next, req, used := r.next, r.lastReq, r.finalUsed
	r.lastResp = resp
	r.mu.Unlock()
	if r.a.cfg.Reserve <= 0 || used || next == nil || req == nil || resp.Message == nil {
		return nil, stop
	}
	toolMsg := &ai.Message{Role: ai.RoleTool}
	model := &ai.Message{Role: resp.Message.Role, Metadata: resp.Message.Metadata}
	for _, p := range resp.Message.Content {
		if !p.IsToolRequest() {
			model.Content = append(model.Content, p)
			continue
		}
		tr := p.ToolRequest
		model.Content = append(model.Content, ai.NewToolRequestPart(&ai.ToolRequest{Name: tr.Name, Ref: tr.Ref, Input: tr.Input}))
		var out any
		if v, ok := p.Metadata["pendingOutput"]; ok {
			out = v
		} else {
			out = fmt.Sprintf("the tool did not finish within the run's time budget (%s)", stop.Reason)
		}
		toolMsg.Content = append(toolMsg.Content, ai.NewToolResponsePart(&ai.ToolResponse{Name: tr.Name, Ref: tr.Ref, Output: out}))
	}
	final := *req
	final.Messages = append(append(append([]*ai.Message(nil), req.Messages...), model), toolMsg)
	return r.finalCall(ctx, &final, nil, next)
}

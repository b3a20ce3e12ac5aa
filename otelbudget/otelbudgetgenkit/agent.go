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
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/genai"
)

// DefaultModelStep is the step name of model calls when
// [Config.ModelPolicy] has none.
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

	// ModelPolicy is the policy of each model call: its step name (default
	// [DefaultModelStep]), floor and hooks are the call's, which is one
	// attempt leased the time left less the floor (and the reserve). The
	// policy, with Floor 0 (the call's lease already keeps it) and Name
	// "{step} http", is handed to the HTTP request under it
	// (deadlinehttp.WithRequestPolicy): a deadlinehttp.Transport under the
	// provider's SDK makes its MaxAttempts, each under the ceiling
	// (AttemptTimeout, Ceiling), with Backoff and Retry-After waits, all
	// within the call's lease, under the transport's rules (a POST is
	// retried when the provider answers that it did not act on it, as
	// OpenAI's x-should-retry does with a 429, or when it carries an
	// Idempotency-Key). Without such a transport, MaxAttempts and the
	// ceiling have no effect.
	// MaxAttempts 0 takes deadline.DefaultPolicy()'s MaxAttempts, and its
	// Floor and Backoff where those are zero.
	ModelPolicy deadline.Policy

	// ToolPolicy is the policy of each tool call of a tool without one of
	// its own ([WithToolPolicy]); its Name is replaced by the tool's name.
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
	hooks       *deadline.Hooks
	tracer      trace.Tracer
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
	if mp.Name == "" {
		mp.Name = DefaultModelStep
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
	a := &Agent{
		cfg:         cfg,
		obs:         obs,
		hooks:       obs.ClientHooks(),
		tracer:      obs.RPCClientTracerProvider().Tracer(ScopeName, trace.WithInstrumentationVersion(otelbudget.Version())),
		modelPolicy: mp,
		toolPolicy:  tp,
		modelName:   cfg.Model,
	}
	if _, name, ok := strings.Cut(cfg.Model, "/"); ok {
		a.modelName = name
	}
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

// Result is what a run produced. [Agent.Run] returns one with every error
// but a configuration error.
type Result struct {
	// Response is the run's answer when Run's error is nil. When the run
	// stopped, it is the last model response received (nil if none): what
	// the run has, not an answer.
	Response *ai.ModelResponse
	// Stop is the stop that cut the run short, when the reserve's final
	// model call answered in its place (Response is that answer); nil when
	// the run completed, and when Run returns the stop as its error.
	Stop *deadline.StopError
	// Abandoned lists the tool calls whose function did not return when
	// their lease ended: the run went on without them; their goroutines
	// finish on their own.
	Abandoned []AbandonedTool
	// ModelCalls and ToolCalls count the calls started (attempts are
	// counted on the spans).
	ModelCalls, ToolCalls int

	tools *sync.WaitGroup
}

// WaitTools blocks until every tool function the run started has returned,
// the abandoned ones included (a program that shuts down waits here for
// them, a test to leave no goroutine behind). It returns at once when none
// is running; a nil Result has none.
func (r *Result) WaitTools() {
	if r != nil && r.tools != nil {
		r.tools.Wait()
	}
}

// AbandonedTool is a tool call the run stopped waiting for.
type AbandonedTool struct {
	Tool   string        // the tool's name
	CallID string        // the model's id of the call, "" when unknown
	Lease  time.Duration // the lease it ran out
}

// runKey is the context key of a run's state.
type runKey struct{}

// run is the state of one Run, shared by its middleware and tools.
type run struct {
	a *Agent
	d deadline.Deadline

	mu         sync.Mutex
	stop       *deadline.StopError
	abandoned  []AbandonedTool
	finalUsed  bool
	next       ai.ModelFunc
	lastReq    *ai.ModelRequest
	lastResp   *ai.ModelResponse
	pending    map[string][]pendingCall // tool name -> tool requests of the last response
	modelCalls int
	toolCalls  int
	tools      sync.WaitGroup // the tool functions' goroutines
}

type pendingCall struct {
	ref   string
	input any
}

func runOf(ctx context.Context) *run {
	r, _ := ctx.Value(runKey{}).(*run)
	return r
}

// noteStop keeps the first budget stop of the run.
func (r *run) noteStop(s *deadline.StopError) {
	r.mu.Lock()
	if r.stop == nil {
		r.stop = s
	}
	r.mu.Unlock()
}

func (r *run) firstStop() *deadline.StopError {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stop
}

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
// [Result.Stop]); the *deadline.StopError of the step the budget stopped,
// itself, whatever Genkit wrapped around it; or Genkit's or a tool's own
// error unchanged. The options must not set a model or middleware (Genkit
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
	attrs := genai.InvokeAgentAttributes(a.cfg.Provider, a.cfg.Agent)
	attrs = append(attrs, genai.RequestModelKey.String(a.modelName))
	if a.cfg.Reserve > 0 {
		attrs = append(attrs, AttrReserveMs.Int64(a.cfg.Reserve.Round(time.Millisecond).Milliseconds()))
	}
	ctx, span := a.obs.StartRun(ctx, genai.InvokeAgentSpanName(a.cfg.Agent), d, trace.WithAttributes(attrs...))
	ctx, cancel := d.Scope(ctx)
	defer cancel()
	r := &run{a: a, d: d}
	ctx = context.WithValue(ctx, runKey{}, r)

	mws := append([]ai.ModelMiddleware{r.middleware}, a.cfg.Middleware...)
	all := make([]ai.GenerateOption, 0, len(opts)+2)
	all = append(all, ai.WithModelName(a.cfg.Model), ai.WithMiddleware(mws...))
	all = append(all, opts...)
	resp, err := genkit.Generate(ctx, g, all...)

	res := &Result{tools: &r.tools}
	stop := r.firstStop()
	switch {
	case err == nil && resp != nil && resp.FinishReason == ai.FinishReasonInterrupted && stop != nil:
		// A tool was stopped by the budget: Genkit returned the turn as
		// interrupted (DefineTool's tools interrupt on a stop).
		resp, err = r.afterToolStop(ctx, resp, stop)
	case err != nil && stop != nil:
		// The stop, whatever Genkit made of it.
		err = stop
	}
	r.mu.Lock()
	res.Abandoned = append([]AbandonedTool(nil), r.abandoned...)
	res.ModelCalls, res.ToolCalls = r.modelCalls, r.toolCalls
	final := r.finalUsed
	last := r.lastResp
	r.mu.Unlock()
	if err == nil {
		res.Response = resp
		if final {
			res.Stop = stop
		}
	} else {
		res.Response = last
	}
	recordRun(span.Span(), res, err)
	span.End(err)
	return res, err
}

// recordRun sets the run span's own attributes.
func recordRun(s trace.Span, res *Result, err error) {
	kvs := []attribute.KeyValue{
		AttrModelCalls.Int(res.ModelCalls),
		AttrToolCalls.Int(res.ToolCalls),
	}
	if len(res.Abandoned) > 0 {
		kvs = append(kvs, AttrToolsAbandoned.Int(len(res.Abandoned)))
	}
	if res.Stop != nil {
		kvs = append(kvs, AttrReserveAnswered.Bool(true))
	}
	if err != nil {
		kvs = append(kvs, genai.ErrorTypeKey.String(errorType(err)))
		s.SetStatus(codes.Error, err.Error())
	}
	s.SetAttributes(kvs...)
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

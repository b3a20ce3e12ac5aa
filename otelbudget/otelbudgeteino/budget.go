package otelbudgeteino

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/schema"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/agentrun"
)

// Budget puts the model and tool calls of Eino agent runs inside each run's
// deadline. Build one per agent configuration with [New]; it is safe for
// concurrent use by any number of runs, and holds no per-run state: a run's
// state travels in the context [Budget.Start] returns.
type Budget struct {
	cfg       Config
	obs       *otelbudget.Observer
	tr        *agentrun.Tracing
	model     deadline.Policy
	tool      deadline.Policy
	grace     time.Duration
	modelStep string
}

// New checks cfg and returns the Budget it describes, or an error naming the
// field that is wrong and what is allowed (it matches
// deadline.ErrInvalidPolicy).
func New(cfg Config) (*Budget, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &Budget{cfg: cfg, obs: cfg.Observer, model: orDefault(cfg.Model), tool: orDefault(cfg.Tool), grace: cfg.AbandonGrace}
	if b.obs == nil {
		b.obs = otelbudget.New()
	}
	if b.grace == 0 {
		b.grace = defaultAbandonGrace
	}
	b.tr = agentrun.NewTracing(b.obs, cfg.Provider, cfg.ModelName)
	b.modelStep = agentrun.ChatStep(cfg.ModelName)
	b.model.Name = b.modelStep
	return b, nil
}

// Abandoned is a tool call whose lease ended before it returned: the run
// went on without it (its goroutine may still be running; its result, if
// any, is discarded). The shape is agentrun's, shared by every framework.
type Abandoned = agentrun.Abandoned

// Result is what a run gives back besides its error: the answer (the
// agent's last message without tool calls, nil when none), whether it came
// from the final call in the reserve, the stop, the abandoned tools and a
// way to wait for them (WaitTools). The shape is agentrun's, shared by
// every framework: see [agentrun.Result] for each field's contract.
type Result = agentrun.Result[*schema.Message]

// Run is one agent run under a deadline, started by [Budget.Start] and
// ended by [Run.End]. Safe for concurrent use: the run's tool calls may run
// in parallel.
type Run struct {
	b      *Budget
	d      deadline.Deadline
	agent  string
	ar     *agentrun.Run
	span   *otelbudget.Run
	caller context.Context // the caller's context, to tell its cancel apart

	// stopped is closed when the budget stopped a call with an error that
	// ends the run (Run returns then, without waiting for Eino to unwind).
	stopped  chan struct{}
	stopOnce sync.Once
	mu       sync.Mutex
	res      *Result
	inflight []string // the steps of the calls in flight, in the order they started

	retryMu   sync.Mutex
	retryWait time.Duration // the wait ModelRetryConfig's IsRetryAble granted
	retryN    int           // Eino retries granted for the current model call
}

type runKey struct{}

func runFrom(ctx context.Context) *Run {
	r, _ := ctx.Value(runKey{}).(*Run)
	return r
}

// Start begins a run of the agent named agent (empty: Config.Agent) under d,
// decided once here: every model and tool call made with ctx (or a context
// derived from it) through this Budget's model, tool middleware and retry
// config is leased out of d. It starts the run's span, "invoke_agent
// {agent}", with the GenAI and deadline.* attributes. Call [Run.End] once
// with the run's outcome, whatever happened.
//
// A zero d is taken from ctx (deadline.FromContext); when ctx has none
// either, Start returns a *deadline.PolicyError and starts nothing.
func (b *Budget) Start(ctx context.Context, d deadline.Deadline, agent string) (context.Context, *Run, error) {
	if ctx == nil {
		return nil, nil, &deadline.PolicyError{Field: "ctx", Value: "nil", Allowed: "a non-nil context.Context"}
	}
	if d.IsZero() {
		var ok bool
		if d, ok = deadline.FromContext(ctx); !ok {
			return ctx, nil, &deadline.PolicyError{Field: "Deadline", Value: "Deadline{}", Allowed: "a Deadline from deadline.New or deadline.At, or a context that carries one"}
		}
	}
	if agent == "" {
		agent = b.cfg.Agent
	}
	r := &Run{b: b, d: d, agent: agent, caller: ctx, stopped: make(chan struct{})}
	r.ar = agentrun.NewRun(d, agentrun.Config{Reserve: b.cfg.Reserve, ModelNeed: b.cfg.ModelNeed, Grace: b.grace})
	ctx, r.span = b.tr.StartRun(ctx, r.ar, agent)
	return context.WithValue(ctx, runKey{}, r), r, nil
}

// Deadline returns the run's deadline.
func (r *Run) Deadline() deadline.Deadline { return r.d }

// endsRun records err, the error a call returns to Eino, and when it is a
// stop of the budget signals that the run is over.
func (r *Run) endsRun(err error) {
	if stop := r.ar.NoteStop(err); stop != nil && stop.Reason.Budget() {
		r.stopOnce.Do(func() { close(r.stopped) })
	}
}

// enter records that a call of step started; the function it returns
// records that it ended.
func (r *Run) enter(step string) func() {
	r.mu.Lock()
	r.inflight = append(r.inflight, step)
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for i := len(r.inflight) - 1; i >= 0; i-- {
			if r.inflight[i] == step {
				r.inflight = append(r.inflight[:i], r.inflight[i+1:]...)
				return
			}
		}
	}
}

// stepAtDeadline names the step the deadline caught: the latest call still
// in flight, else the run itself.
func (r *Run) stepAtDeadline() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.inflight); n > 0 {
		return r.inflight[n-1]
	}
	return agentrun.RunSpanName(r.agent)
}

// End ends the run with its answer (nil when none) and the error Eino
// returned, records them on the run's span and ends it, and returns the
// run's [Result] and the error for the caller:
//
//   - nil when answer is not nil and err is nil;
//   - when the caller's context was canceled, a [*deadline.StopError] with
//     ReasonCanceled naming the step in flight, wrapping the context's
//     error: errors.Is(err, context.Canceled) holds;
//   - when a call of the run stopped (the budget; retries that ran out),
//     an error that errors.As finds as that [*deadline.StopError] (naming
//     the step, with its reason and attempts) and that errors.Is matches
//     to err, whatever Eino wrapped err in (and to context.DeadlineExceeded
//     for a stop of the budget);
//   - when err is a context error and the run's deadline has passed, a
//     [*deadline.StopError] with ReasonDeadline naming the run's step
//     ("invoke_agent {agent}"), wrapping err;
//   - else err unchanged: Eino's own (a panicking tool is Eino's "panic
//     error", as without this module).
//
// Only the first End counts; later calls return the same result and nil.
func (r *Run) End(answer *schema.Message, err error) (*Result, error) {
	r.mu.Lock()
	if r.res != nil {
		res := r.res
		r.mu.Unlock()
		return res, nil
	}
	r.mu.Unlock()

	out := err
	if err != nil {
		answer = nil
		stop, isStop := errors.AsType[*deadline.StopError](err)
		switch {
		case r.caller.Err() != nil && errors.Is(context.Cause(r.caller), context.Canceled):
			if s := r.ar.Stop(); s != nil && s.Reason == deadline.ReasonCanceled {
				stop = s // a call's stop already said so
			} else if !isStop || stop.Reason != deadline.ReasonCanceled {
				stop = agentrun.CanceledStop(r.caller, r.stepAtDeadline(), r.d.Remaining(), err)
			}
			r.ar.NoteStop(stop)
			out = stop
		case isStop && stop.Reason != deadline.ReasonNotRetryable:
			r.ar.NoteStop(stop)
			if rs := r.ar.Stop(); rs != stop {
				// A stop of the budget came after the one Eino returned
				// (its retry config refused a wait): it is the run's.
				out = &runError{stop: rs, err: err}
			}
		case r.ar.Stop() != nil: // Eino's error hides it (a retry's, a node's)
			out = &runError{stop: r.ar.Stop(), err: err}
		case (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) && r.d.Expired():
			stop := &deadline.StopError{Name: agentrun.RunSpanName(r.agent), Reason: deadline.ReasonDeadline, Last: err, Remaining: r.d.Remaining()}
			r.ar.NoteStop(stop)
			out = stop
		}
	}
	final := answer != nil && r.ar.Final()
	res := agentrun.NewResult(r.ar, answer, final, r.ar.Stop())
	if out == nil && !final {
		res.Stop = nil // the run answered without a stop: a not-retried error it recovered from is not the run's
	}
	r.mu.Lock()
	if r.res != nil { // a concurrent End won
		res = r.res
		r.mu.Unlock()
		return res, nil
	}
	r.res = res
	r.mu.Unlock()
	r.b.tr.EndRun(r.span, r.ar, res.Final, out)
	return res, out
}

// runError is the error End returns when Eino's error hides the run's
// stop: errors.As finds the stop, errors.Is both.
type runError struct {
	stop *deadline.StopError
	err  error
}

func (e *runError) Error() string {
	return fmt.Sprintf("%v (eino: %v)", e.stop, e.err)
}

func (e *runError) Unwrap() []error { return []error{e.stop, e.err} }

// Timeout reports whether a stop of the budget ended the run.
func (e *runError) Timeout() bool { return e.stop.Reason.Budget() }

// ErrorType is the stop's reason, for error.type.
func (e *runError) ErrorType() string { return e.stop.ErrorType() }

// Run runs agent once on msgs through an adk.Runner under d (zero: ctx's
// deadline), as [Budget.Start] and [Run.End] describe, and returns the
// agent's answer: its last assistant message without tool calls. The agent's
// model must be this Budget's [Budget.Model] and its tools' middleware
// [Budget.ToolMiddleware] for the calls to be budgeted; Run does not check.
//
// An adk.ChatModelAgent is not safe for concurrent runs (Eino's own data
// race, with or without this package): build one per run, or run one at a
// time; the Budget itself may be shared.
//
// Run returns as soon as the run is over, without waiting for Eino to
// unwind: when Eino's events end, when the budget stops a call with the
// error that ends the run (its [*deadline.StopError] is returned), when d
// passes (a StopError with ReasonDeadline naming the step of the latest call
// still in flight, else "invoke_agent {agent}"), or
// when ctx ends. Eino then finishes on a goroutine of its own, whose calls
// the budget refuses.
func (b *Budget) Run(ctx context.Context, d deadline.Deadline, agent adk.Agent, msgs []adk.Message, opts ...adk.AgentRunOption) (*Result, error) {
	if agent == nil {
		return nil, &deadline.PolicyError{Field: "agent", Value: "nil", Allowed: "an adk.Agent"}
	}
	name := b.cfg.Agent
	if name == "" && ctx != nil {
		name = agent.Name(ctx)
	}
	ctx, run, err := b.Start(ctx, d, name)
	if err != nil {
		return nil, err
	}
	type outcome struct {
		answer *schema.Message
		err    error
	}
	done := make(chan outcome, 1) // buffered: Eino may unwind after Run has returned
	it := adk.NewRunner(ctx, adk.RunnerConfig{Agent: agent}).Run(ctx, msgs, opts...)
	go func() {
		var o outcome
		defer func() {
			if v := recover(); v != nil {
				o = outcome{err: fmt.Errorf("otelbudgeteino: reading the agent's events panicked: %v", v)}
			}
			done <- o
		}()
		for {
			ev, ok := it.Next()
			if !ok {
				break
			}
			if ev.Err != nil {
				o.err = ev.Err
				continue
			}
			if ev.Output == nil || ev.Output.MessageOutput == nil {
				continue
			}
			mv := ev.Output.MessageOutput
			msg, err := mv.GetMessage()
			if err != nil {
				o.err = err
				continue
			}
			if msg != nil && mv.Role == schema.Assistant && len(msg.ToolCalls) == 0 {
				o.answer = msg
			}
		}
		if o.err != nil {
			o.answer = nil
		}
	}()
	timer := time.NewTimer(run.d.Remaining())
	defer timer.Stop()
	finished := func() (outcome, bool) {
		select {
		case o := <-done:
			return o, true
		default:
			return outcome{}, false
		}
	}
	select {
	case o := <-done:
		return run.End(o.answer, o.err)
	case <-run.stopped:
		// The budget stopped a call and the run is over: return its stop
		// now, and let Eino unwind on its own goroutine.
		if o, ok := finished(); ok {
			return run.End(o.answer, o.err)
		}
		return run.End(nil, run.ar.Stop())
	case <-timer.C:
		if o, ok := finished(); ok {
			return run.End(o.answer, o.err)
		}
		if stop := run.ar.Stop(); stop != nil && stop.Reason.Budget() {
			return run.End(nil, stop) // the stop that ended the run, if the timer won the race
		}
		// A call whose lease has ended may not have returned yet: the stop
		// names it, else the run.
		return run.End(nil, &deadline.StopError{Name: run.stepAtDeadline(), Reason: deadline.ReasonDeadline, Remaining: run.d.Remaining()})
	case <-ctx.Done():
		if o, ok := finished(); ok {
			return run.End(o.answer, o.err)
		}
		return run.End(nil, context.Cause(ctx))
	}
}

// The deadline.* attributes this package adds to the GenAI spans, beside the
// observer's (docs/attributes.md): agentrun's, the same for every framework.
const (
	// AttrAbandoned is agentrun.AttrToolAbandoned.
	AttrAbandoned = agentrun.AttrToolAbandoned
	// AttrAbandonedTools is agentrun.AttrAbandonedTools.
	AttrAbandonedTools = agentrun.AttrAbandonedTools
	// AttrFinalCall is agentrun.AttrFinalCall.
	AttrFinalCall = agentrun.AttrFinalCall
)

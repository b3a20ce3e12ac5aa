package otelbudgeteino

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/schema"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/genai"
)

// Budget puts the model and tool calls of Eino agent runs inside each run's
// deadline. Build one per agent configuration with [New]; it is safe for
// concurrent use by any number of runs, and holds no per-run state: a run's
// state travels in the context [Budget.Start] returns.
type Budget struct {
	cfg       Config
	obs       *otelbudget.Observer
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
	b.modelStep = genai.ChatSpanName(cfg.ModelName)
	b.model.Name = b.modelStep
	return b, nil
}

// Abandoned is a tool call whose lease ended before it returned: the run
// went on without it (its goroutine may still be running; its result, if any,
// is discarded).
type Abandoned struct {
	Tool   string        // the tool's name
	CallID string        // the model's id of the tool call
	After  time.Duration // how long it had run when it was abandoned
}

// Result is what a run gives back besides its error.
type Result struct {
	// Answer is the agent's last message without tool calls; nil when the
	// run gave none.
	Answer *schema.Message
	// Final reports that the answer came from the final model call made
	// in the reserve, after the budget could not fit another turn.
	Final bool
	// Abandoned lists the tool calls abandoned when their lease ended.
	Abandoned []Abandoned
	// Stop is the budget's stop that ended the run, or that the reserve
	// turned into a final answer; nil when the budget stopped nothing.
	Stop *deadline.StopError
}

// Run is one agent run under a deadline, started by [Budget.Start] and
// ended by [Run.End]. Safe for concurrent use: the run's tool calls may run
// in parallel.
type Run struct {
	b     *Budget
	d     deadline.Deadline
	agent string
	span  *otelbudget.Run
	start time.Time

	final atomic.Bool // the next model call is the final one, in the reserve
	// stopped is closed when the budget stopped a call with an error that
	// ends the run (Run returns then, without waiting for Eino to unwind).
	stopped  chan struct{}
	stopOnce sync.Once
	mu       sync.Mutex
	res      Result
	ended    bool
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
	attrs := genai.InvokeAgentAttributes(b.cfg.Provider, agent)
	if b.cfg.ModelName != "" {
		attrs = append(attrs, genai.RequestModelKey.String(b.cfg.ModelName))
	}
	r := &Run{b: b, d: d, agent: agent, start: time.Now(), stopped: make(chan struct{})}
	ctx, r.span = b.obs.StartRun(ctx, genai.InvokeAgentSpanName(agent), d, trace.WithAttributes(attrs...))
	return context.WithValue(ctx, runKey{}, r), r, nil
}

// Deadline returns the run's deadline.
func (r *Run) Deadline() deadline.Deadline { return r.d }

// recordStop keeps the first stop of the budget the run met.
func (r *Run) recordStop(err error) {
	var stop *deadline.StopError
	if !errors.As(err, &stop) || !stop.Reason.Budget() {
		return
	}
	r.mu.Lock()
	if r.res.Stop == nil {
		r.res.Stop = stop
	}
	r.mu.Unlock()
}

// endsRun records err, the error a call returns to Eino, and when it is a
// stop of the budget signals that the run is over.
func (r *Run) endsRun(err error) {
	r.recordStop(err)
	if stop, ok := errors.AsType[*deadline.StopError](err); ok && stop.Reason.Budget() {
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
	return genai.InvokeAgentSpanName(r.agent)
}

// stop returns the stop recorded, nil when none.
func (r *Run) stop() *deadline.StopError {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.res.Stop
}

func (r *Run) abandon(a Abandoned) {
	r.mu.Lock()
	r.res.Abandoned = append(r.res.Abandoned, a)
	r.mu.Unlock()
}

// End ends the run with its answer (nil when none) and the error Eino
// returned, records them on the run's span and ends it, and returns the
// run's [Result] and the error for the caller:
//
//   - nil when answer is not nil and err is nil;
//   - when the budget stopped a call of the run, an error that errors.As
//     finds as that [*deadline.StopError] (naming the step) and that
//     errors.Is matches to context.DeadlineExceeded and to err, whatever
//     Eino wrapped err in;
//   - when err is a context error of the caller and the run's deadline has
//     passed, a [*deadline.StopError] with ReasonDeadline naming the run's
//     step ("invoke_agent {agent}"), wrapping err;
//   - else err unchanged.
//
// Only the first End counts; later calls return the same result and nil.
func (r *Run) End(answer *schema.Message, err error) (*Result, error) {
	r.mu.Lock()
	if r.ended {
		res := r.res
		r.mu.Unlock()
		return &res, nil
	}
	r.ended = true
	if answer != nil {
		r.res.Answer = answer
		if err == nil {
			r.res.Final = r.final.Load()
		}
	}
	res := r.res
	r.mu.Unlock()

	out := err
	if err != nil {
		stop, isStop := errors.AsType[*deadline.StopError](err)
		switch {
		case isStop && stop.Reason.Budget():
			res.Stop = stop // the stop that ended the run, as Eino returned it
		case res.Stop != nil: // Eino's error hides it (a retry's, a node's)
			out = &runError{stop: res.Stop, err: err}
		case (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) && r.d.Expired():
			res.Stop = &deadline.StopError{Name: genai.InvokeAgentSpanName(r.agent), Reason: deadline.ReasonDeadline, Last: err, Remaining: r.d.Remaining()}
			out = res.Stop
		}
	}
	if s := r.span.Span(); s != nil && len(res.Abandoned) > 0 {
		s.SetAttributes(AttrAbandonedTools.Int(len(res.Abandoned)))
	}
	if s := r.span.Span(); s != nil && out != nil {
		s.SetAttributes(genai.ErrorTypeKey.String(errorType(out)))
	}
	r.span.End(out)
	return &res, out
}

// runError is the error End returns when Eino's error hides the budget's
// stop: errors.As finds the stop, errors.Is both.
type runError struct {
	stop *deadline.StopError
	err  error
}

func (e *runError) Error() string {
	return fmt.Sprintf("%v (eino: %v)", e.stop, e.err)
}

func (e *runError) Unwrap() []error { return []error{e.stop, e.err} }

// Timeout reports true: the budget stopped the run.
func (e *runError) Timeout() bool { return true }

// ErrorType is the stop's reason, for error.type.
func (e *runError) ErrorType() string { return e.stop.ErrorType() }

// errorType returns the low-cardinality error.type of err.
func errorType(err error) string {
	var stop *deadline.StopError
	switch {
	case errors.As(err, &stop):
		return stop.ErrorType()
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	}
	return "_OTHER"
}

// Run runs agent once on msgs through an adk.Runner under d (zero: ctx's
// deadline), as [Budget.Start] and [Run.End] describe, and returns the
// agent's answer: its last assistant message without tool calls. The agent's
// model must be this Budget's [Budget.Model] and its tools' middleware
// [Budget.ToolMiddleware] for the calls to be budgeted; Run does not check.
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
		done <- o
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
		return run.End(nil, run.stop())
	case <-timer.C:
		if o, ok := finished(); ok {
			return run.End(o.answer, o.err)
		}
		if stop := run.stop(); stop != nil {
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
// observer's (docs/attributes.md).
const (
	// AttrAbandoned is true on an execute_tool span whose tool did not
	// return within its lease, nor within Config.AbandonGrace after it,
	// and was abandoned: the run went on without it. Absent otherwise.
	AttrAbandoned = attribute.Key("deadline.abandoned")
	// AttrAbandonedTools counts, on the invoke_agent span, the tool calls
	// of the run that were abandoned; absent when none.
	AttrAbandonedTools = attribute.Key("deadline.run.abandoned_tools")
	// AttrFinalCall is true on the chat span of the final model call, the
	// one made in the reserve without tools; absent otherwise.
	AttrFinalCall = attribute.Key("deadline.agent.final_call")
)

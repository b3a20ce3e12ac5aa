package agentrun

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline"
)

// Config is what a [Run] needs to know of its agent's configuration.
type Config struct {
	// Reserve is kept back for the final model call; 0: none. Must be >= 0.
	Reserve time.Duration
	// ModelNeed is the time a model call is known to need before the run
	// has seen one; the run learns the longest model call it makes and
	// takes the longer of the two. 0: learned only.
	ModelNeed time.Duration
	// Grace is how long a tool call whose lease has ended is given to
	// return before it is abandoned. 0: [DefaultGrace].
	Grace time.Duration
}

// DefaultGrace is the grace a tool is given after its lease when
// [Config.Grace] is 0: long enough for a tool that honours its context to
// return its error, short against any floor.
const DefaultGrace = time.Millisecond

// Run is the state of one agent run that the adapters share: its deadline,
// the reserve rule, the first stop, the abandoned tools and the tool
// goroutines. Safe for concurrent use.
type Run struct {
	d     deadline.Deadline
	cfg   Config
	final atomic.Bool

	mu         sync.Mutex
	stop       *deadline.StopError
	learned    time.Duration
	abandoned  []Abandoned
	modelCalls int
	toolCalls  int
	tools      sync.WaitGroup
	span       trace.Span          // the run's span, for late panics
	latePanics metric.Int64Counter // counts them, when the run is traced
}

// NewRun returns the state of a run under d.
func NewRun(d deadline.Deadline, cfg Config) *Run {
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	return &Run{d: d, cfg: cfg}
}

// Deadline returns the run's deadline.
func (r *Run) Deadline() deadline.Deadline { return r.d }

// Reserve returns the run's reserve.
func (r *Run) Reserve() time.Duration { return r.cfg.Reserve }

// NextModelCall applies the reserve rule to the model call about to start
// with floor as its policy's floor, and reports whether it is the final
// one: true once the run is final ([Run.SetFinal]), or when a reserve is
// kept and the call's need (the longest model call so far, or
// Config.ModelNeed when longer) does not fit in what is left above floor +
// reserve. A final call is leased everything left above floor, without
// tools. Without a reserve, every call is a normal one.
func (r *Run) NextModelCall(floor time.Duration) (final bool) {
	if r.final.Load() {
		return true
	}
	if r.cfg.Reserve <= 0 {
		return false
	}
	r.mu.Lock()
	need := max(r.learned, r.cfg.ModelNeed)
	r.mu.Unlock()
	if r.d.Remaining()-floor-r.cfg.Reserve <= need {
		r.final.Store(true)
		return true
	}
	return false
}

// Final reports whether the next model call is the final one.
func (r *Run) Final() bool { return r.final.Load() }

// SetFinal makes the next model call the final one (a call the budget
// stopped, with a reserve).
func (r *Run) SetFinal() { r.final.Store(true) }

// ModelFloor is the floor of a model call: the policy's, raised by the
// reserve unless the call is the final one.
func (r *Run) ModelFloor(floor time.Duration, final bool) time.Duration {
	if final {
		return floor
	}
	return floor + r.cfg.Reserve
}

// ToolFloor is the floor of a tool call: the policy's, raised by the
// reserve.
func (r *Run) ToolFloor(floor time.Duration) time.Duration { return floor + r.cfg.Reserve }

// ModelCallStarted counts a model call; ModelCallDone learns from one that
// succeeded how long a model call takes.
func (r *Run) ModelCallStarted() {
	r.mu.Lock()
	r.modelCalls++
	r.mu.Unlock()
}

// ModelCallDone records a model call that answered after took.
func (r *Run) ModelCallDone(took time.Duration) {
	r.mu.Lock()
	r.learned = max(r.learned, took)
	r.mu.Unlock()
}

// NoteStop records err's [*deadline.StopError] as the run's stop, and
// returns it (nil when err holds none). The first stop of the budget wins;
// another stop (the caller's cancel, attempts exhausted) is kept until one
// of the budget comes. A ReasonNotRetryable stop is the call's own error,
// not the run's stop: it is returned, not kept.
func (r *Run) NoteStop(err error) *deadline.StopError {
	stop, ok := errors.AsType[*deadline.StopError](err)
	if !ok {
		return nil
	}
	if stop.Reason == deadline.ReasonNotRetryable {
		return stop
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stop == nil || (!r.stop.Reason.Budget() && stop.Reason.Budget()) {
		r.stop = stop
	}
	return stop
}

// Stop returns the run's first stop, nil when none.
func (r *Run) Stop() *deadline.StopError {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stop
}

// Abandoned returns the tool calls abandoned so far.
func (r *Run) Abandoned() []Abandoned {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Abandoned(nil), r.abandoned...)
}

// WaitTools blocks until every tool function the run started has
// returned, the abandoned ones included.
func (r *Run) WaitTools() { r.tools.Wait() }

// StopOf classifies the error a run ends with. A caller's cancel (ctx
// done with context.Canceled) is returned as ctx's error wrapped in a
// *deadline.StopError with ReasonCanceled naming step, so that both
// errors.Is(err, context.Canceled) and errors.As a StopError hold.
func CanceledStop(ctx context.Context, step string, remaining time.Duration, err error) *deadline.StopError {
	last := err
	if last == nil || !errors.Is(last, context.Canceled) {
		last = context.Cause(ctx)
	}
	return &deadline.StopError{Name: step, Reason: deadline.ReasonCanceled, Last: last, Remaining: remaining}
}

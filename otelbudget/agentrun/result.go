package agentrun

import (
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

// Result is what an agent run gives back besides its error, the same for
// every framework; A is the framework's answer type (Eino's
// *schema.Message, Genkit's *ai.ModelResponse).
type Result[A any] struct {
	// Answer is the run's answer when its error is nil: the model's last
	// message without tool calls, possibly the final call's (Final). When
	// the run failed it is the zero A.
	Answer A
	// Final reports that Answer came from the final model call, made in
	// the reserve without tools once the budget could not fit another
	// turn.
	Final bool
	// Stop is the *deadline.StopError of the call that ended the run, or
	// that the final call answered in place of: a stop of the budget
	// (refused, deadline, a wait that did not fit), the caller's cancel
	// (ReasonCanceled), retries that ran out (ReasonExhausted, with the
	// attempts made). Nil when the run answered without a stop, and when
	// it failed with an error of the framework or of a tool that no call
	// stopped on (the run's error says it).
	Stop *deadline.StopError
	// Abandoned lists the tool calls whose function had not returned when
	// their lease (and the grace) ended: the run went on without them.
	Abandoned []Abandoned
	// ModelCalls and ToolCalls count the calls the run started (their
	// attempts are counted on the spans).
	ModelCalls, ToolCalls int

	run *Run
}

// Abandoned is a tool call the run stopped waiting for.
type Abandoned struct {
	Tool   string        // the tool's name
	CallID string        // the model's id of the call, "" when unknown
	Lease  time.Duration // the lease it ran out
	// Panic is the value the tool panicked with after it was abandoned
	// (recovered, never re-raised), nil when it did not (or has not yet:
	// read it after [Result.WaitTools]).
	Panic any
}

// NewResult returns the Result of run r, with its stop, its abandoned
// tools and its counts as they are now.
func NewResult[A any](r *Run, answer A, final bool, stop *deadline.StopError) *Result[A] {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &Result[A]{
		Answer: answer, Final: final, Stop: stop,
		Abandoned:  append([]Abandoned(nil), r.abandoned...),
		ModelCalls: r.modelCalls, ToolCalls: r.toolCalls,
		run: r,
	}
}

// WaitTools blocks until every tool function the run started has returned,
// the abandoned ones included (a program that shuts down waits here for
// them, a test to leave no goroutine behind), then refreshes Abandoned so
// that a late panic shows in it. It returns at once when none is running; a
// nil Result has none. Do not read Abandoned concurrently with WaitTools.
func (res *Result[A]) WaitTools() {
	if res == nil || res.run == nil {
		return
	}
	res.run.WaitTools()
	res.Abandoned = res.run.Abandoned()
}

package otelbudget

import (
	"errors"
	"fmt"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// PlanStep is one step of a plan as its spans describe it: the attempts
// its attempt spans recorded, each read with [ReadAttemptSample] and
// added with [learn.Histogram.Add], and the policy its call spans carry
// ([AttrMaxAttempts], [AttrFloorMs]).
type PlanStep struct {
	// Name is the step (deadline.step, the policy's Name).
	Name string
	// Attempts holds the step's attempts.
	Attempts *learn.Histogram
	// MaxAttempts is the step's policy's MaxAttempts; 0 when no call span
	// said it: PlanOptions.Attempts is used.
	MaxAttempts int
	// Floor is the step's policy's floor.
	Floor time.Duration
}

// PlanOptions shape [SuggestRunBudget].
type PlanOptions struct {
	// PlanOptions are the suggestion's quantile, margin, minimum samples
	// and the plan's target success probability (learn's defaults when
	// zero).
	learn.PlanOptions
	// Attempts is the MaxAttempts of a step whose call spans were not
	// read; 0 means [DefaultPlanAttempts].
	Attempts int
	// Backoff is the plan's backoff between attempts; the zero Backoff
	// means [DefaultPlanBackoff]. Spans record the waits a run chose, not
	// the policy that chose them, so it is given here.
	Backoff deadline.Backoff
}

// DefaultPlanAttempts is the MaxAttempts of a step whose call spans were
// not read.
const DefaultPlanAttempts = 3

// DefaultPlanBackoff is the backoff [SuggestRunBudget] assumes when none is
// given: the examples' and the source article's, 50 ms doubling to 400 ms,
// full jitter.
var DefaultPlanBackoff = deadline.Backoff{Base: 50 * time.Millisecond, Max: 400 * time.Millisecond, Jitter: deadline.JitterFull}

// SuggestRunBudget suggests the run budget of a plan, its steps in the
// order they run, from what the plan's spans recorded, and the probability
// that a run succeeds within it: [learn.Recorder.SuggestBudget] over the
// steps' attempts, each step's policy its MaxAttempts and Floor with
// o.Backoff. It is the one computation behind budgetadvise's "suggested
// budget" and the demo's "plan budget": given the same spans, they print
// the same figures.
//
// It fails as SuggestBudget does (a step with too few attempts or no
// success, invalid options), naming the step, and on an empty plan or a
// step without attempts, a step named twice, a negative MaxAttempts or
// Floor.
func SuggestRunBudget(steps []PlanStep, o PlanOptions) (learn.BudgetSuggestion, error) {
	if len(steps) == 0 {
		return learn.BudgetSuggestion{}, errors.New("otelbudget: an empty plan: want at least one step")
	}
	if o.Attempts == 0 {
		o.Attempts = DefaultPlanAttempts
	}
	if o.Backoff == (deadline.Backoff{}) {
		o.Backoff = DefaultPlanBackoff
	}
	snap := &learn.Snapshot{Steps: map[string]*learn.Histogram{}}
	plan := make([]deadline.Policy, 0, len(steps))
	for i, s := range steps {
		switch {
		case s.Attempts == nil:
			return learn.BudgetSuggestion{}, fmt.Errorf("otelbudget: plan step %d (%q): no attempts (Attempts is nil)", i+1, s.Name)
		case snap.Steps[s.Name] != nil:
			return learn.BudgetSuggestion{}, fmt.Errorf("otelbudget: plan step %d (%q): a step of that name is already in the plan", i+1, s.Name)
		case s.MaxAttempts < 0 || s.Floor < 0:
			return learn.BudgetSuggestion{}, fmt.Errorf("otelbudget: plan step %d (%q): MaxAttempts %d and Floor %s must not be negative", i+1, s.Name, s.MaxAttempts, s.Floor)
		}
		h := *s.Attempts
		snap.Steps[s.Name] = &h
		p := deadline.Policy{Name: s.Name, MaxAttempts: s.MaxAttempts, Floor: s.Floor, Backoff: o.Backoff}
		if p.MaxAttempts == 0 {
			p.MaxAttempts = o.Attempts
		}
		plan = append(plan, p)
	}
	var rec learn.Recorder
	rec.Merge(snap)
	return rec.SuggestBudget(plan, o.PlanOptions)
}

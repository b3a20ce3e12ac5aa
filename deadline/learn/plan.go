package learn

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

// DefaultTarget is the success probability a suggested run budget aims at.
const DefaultTarget = 0.99

// PlanOptions configures [Recorder.SuggestBudget].
type PlanOptions struct {
	// SuggestOptions derive each step's ceiling, as for [Recorder.Suggest].
	SuggestOptions
	// Target is the probability, in (0, 1), that the whole plan succeeds
	// within the budget, under the model of [Recorder.SuggestBudget].
	// 0 means [DefaultTarget].
	Target float64
}

// StepBudget is one step of a [BudgetSuggestion].
type StepBudget struct {
	// Suggestion is the step's suggested ceiling and its evidence.
	Suggestion
	// SuccessPerAttempt is the probability that one attempt succeeds under
	// that ceiling: the fraction of attempts that complete within it times
	// the fraction of completed attempts that returned no error.
	SuccessPerAttempt float64
	// Attempts is how many attempts the budget holds for the step: the
	// fewest (at most the policy's MaxAttempts) that reach the step's share
	// of the target.
	Attempts int
	// ExpectedAttempts is the mean number of attempts the step makes with
	// its policy's MaxAttempts: (1 - (1-p)^MaxAttempts) / p.
	ExpectedAttempts float64
	// Success is the probability that the step succeeds within Attempts:
	// 1 - (1-p)^Attempts.
	Success float64
	// Backoff is the expected sleep before the budgeted retries: the mean
	// of the policy's jittered delay, summed over retries 1 … Attempts-1.
	Backoff time.Duration
	// Time is Attempts × Ceiling + Backoff.
	Time time.Duration
	// Floor is the policy's floor.
	Floor time.Duration
}

// BudgetSuggestion is a run budget for a plan of steps made one after
// another under one deadline ([Recorder.SuggestBudget]).
type BudgetSuggestion struct {
	// Budget is the suggested deadline for the whole plan.
	Budget time.Duration
	// Success is the probability, under the model, that the plan succeeds
	// within Budget: the product of the steps' Success. Below Target when
	// a step's MaxAttempts cannot reach its share.
	Success float64
	// Target is the probability that was aimed at.
	Target float64
	// Steps are the plan's steps, in order.
	Steps []StepBudget
}

// ErrNoSuccesses is returned (wrapped, with the step) when a plan step has
// no successful attempt recorded: no budget makes it succeed.
var ErrNoSuccesses = errors.New("learn: no successful attempt recorded")

// SuggestBudget suggests a run budget for plan: policies run one after
// another under one [deadline.Deadline], each naming its step (Name) and
// giving its MaxAttempts, Floor and Backoff. Each step's ceiling is
// suggested as by [Recorder.Suggest] with o.SuggestOptions.
//
// The model: attempts are independent; one succeeds with probability
// p = F(ceiling) × successes/completed, F being the Kaplan–Meier fraction
// of attempts that complete within the ceiling; every failure is retried
// (as timeouts and retryable errors are) and takes the whole ceiling
// (conservative: errors often return sooner); Retry-After is not modelled.
// Each of the n steps gets Target^(1/n) as its share: it is budgeted the
// fewest attempts k <= MaxAttempts with 1 - (1-p)^k >= Target^(1/n), so
// the plan succeeds with probability Π(1 - (1-p)^k) (reported, also when
// below Target). A step's time is k × ceiling plus the expected backoff
// before retries 1 … k-1 (full jitter: half the cap; equal: three
// quarters; none: the cap). The budget is the least that gives every
// attempt its whole ceiling above the floor: max over steps i of
// (time of steps 1 … i + floor of step i).
//
// It fails on an empty plan, an invalid policy, invalid options, and on
// any step for which Recorder.Suggest fails or no attempt succeeded
// ([ErrNoSuccesses]); the error names the step.
func (r *Recorder) SuggestBudget(plan []deadline.Policy, o PlanOptions) (BudgetSuggestion, error) {
	so, err := o.SuggestOptions.withDefaults()
	if err != nil {
		return BudgetSuggestion{}, err
	}
	if o.Target == 0 {
		o.Target = DefaultTarget
	}
	if !(o.Target > 0 && o.Target < 1) {
		return BudgetSuggestion{}, &OptionError{"PlanOptions.Target", o.Target, "in (0, 1), e.g. 0.99"}
	}
	if len(plan) == 0 {
		return BudgetSuggestion{}, &OptionError{"plan", "empty", "at least one policy"}
	}
	share := math.Pow(o.Target, 1/float64(len(plan)))
	b := BudgetSuggestion{Target: o.Target, Success: 1, Steps: make([]StepBudget, 0, len(plan))}
	var elapsed time.Duration
	for i, p := range plan {
		if err := p.Validate(); err != nil {
			return BudgetSuggestion{}, fmt.Errorf("learn: plan step %d (%q): %w", i+1, p.Name, err)
		}
		s, err := r.Suggest(p.Name, so)
		if err != nil {
			return BudgetSuggestion{}, fmt.Errorf("learn: plan step %d: %w", i+1, err)
		}
		h := r.lookup(p.Name).histogram()
		if s.Successes == 0 {
			return BudgetSuggestion{}, fmt.Errorf("%w: plan step %d (%q), %d attempts", ErrNoSuccesses, i+1, p.Name, s.Samples)
		}
		sb := stepBudget(s, h, p, share)
		b.Success *= sb.Success
		elapsed += sb.Time
		b.Budget = max(b.Budget, elapsed+sb.Floor)
		b.Steps = append(b.Steps, sb)
	}
	return b, nil
}

// stepBudget applies the model to one step.
func stepBudget(s Suggestion, h *Histogram, p deadline.Policy, share float64) StepBudget {
	within := fractionWithin(h, h.Samples, s.Ceiling)
	ok := float64(h.Successes) / float64(h.Completed())
	pa := within * ok
	sb := StepBudget{Suggestion: s, SuccessPerAttempt: pa, Floor: p.Floor}
	sb.ExpectedAttempts = float64(p.MaxAttempts)
	if pa > 0 {
		sb.ExpectedAttempts = (1 - math.Pow(1-pa, float64(p.MaxAttempts))) / pa
	}
	for k := 1; k <= p.MaxAttempts; k++ {
		sb.Attempts, sb.Success = k, 1-math.Pow(1-pa, float64(k))
		if sb.Success >= share {
			break
		}
	}
	for j := 1; j < sb.Attempts; j++ {
		sb.Backoff += meanDelay(p.Backoff, j)
	}
	sb.Time = time.Duration(sb.Attempts)*s.Ceiling + sb.Backoff
	return sb
}

// meanDelay is the expected value of b.Delay(n, ·).
func meanDelay(b deadline.Backoff, n int) time.Duration {
	if b.Base <= 0 || b.Max <= 0 {
		return 0
	}
	c := b.Base
	for i := 1; i < n && c < b.Max; i++ {
		c <<= 1
		if c <= 0 {
			c = b.Max
		}
	}
	c = min(c, b.Max)
	switch b.Jitter {
	case deadline.JitterNone:
		return c
	case deadline.JitterEqual:
		h := c / 2
		return h + (c-h)/2
	}
	return c / 2
}

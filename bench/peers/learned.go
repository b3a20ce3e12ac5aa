package peers

import (
	"context"
	"fmt"
	"sync"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// DeadlineLearned is [Deadline] with the learned floor
// (deadline.Policy.LearnedFloor): one learn.Recorder shared by every call
// records each attempt, and its live Kaplan–Meier estimate refuses an
// attempt, a retry before its backoff, whose chance of completing within the
// lease it would get is below Threshold, letting ProbeShare of them out as
// probes:
//
//	var rec learn.Recorder
//	live, _ := rec.Live(o)
//	p := policy // as for deadline (this)
//	p.Hooks = rec.Hooks()
//	p.LearnedFloor = &deadline.LearnedFloor{Estimator: live, Threshold: t, ProbeShare: s}
//
// The recorder is made on the first call; build one DeadlineLearned per
// run of a scenario with [NewDeadlineLearned], so that no run inherits
// another's learning.
type DeadlineLearned struct {
	threshold, probes float64
	o                 learn.LiveOptions
	successes         bool // the estimate counts only successes (learn.Live.Successes)

	once sync.Once
	live *learn.Live
	rec  learn.Recorder
	err  error
}

// LearnedName is the start of every [DeadlineLearned]'s name.
const LearnedName = "deadline (this) + learned floor"

// NewDeadlineLearned returns the adapter with the given threshold, probe
// share and live options. Invalid values are reported by the first Do, as
// deadline and learn report them.
func NewDeadlineLearned(threshold, probes float64, o learn.LiveOptions) *DeadlineLearned {
	return &DeadlineLearned{threshold: threshold, probes: probes, o: o}
}

// NewDeadlineLearnedSuccesses is [NewDeadlineLearned] with the estimate
// that counts only successes ((*learn.Live).Successes): an attempt is
// refused when its chance of succeeding within its lease is below
// threshold, an error counting as no success.
func NewDeadlineLearnedSuccesses(threshold, probes float64, o learn.LiveOptions) *DeadlineLearned {
	return &DeadlineLearned{threshold: threshold, probes: probes, o: o, successes: true}
}

// Name returns the project's name with the learned floor's threshold.
func (l *DeadlineLearned) Name() string {
	if l.successes {
		return fmt.Sprintf("%s %g%% of successes", LearnedName, 100*l.threshold)
	}
	return fmt.Sprintf("%s %g%%", LearnedName, 100*l.threshold)
}

// Config describes the composition.
func (l *DeadlineLearned) Config() string {
	est := fmt.Sprintf("(*learn.Recorder).Live(%+v)", l.o)
	if l.successes {
		est += ".Successes()"
	}
	return fmt.Sprintf("%s; Policy.LearnedFloor{Estimator: %s, Threshold: %g, ProbeShare: %g}, the recorder's hooks on the policy, one recorder shared by every call",
		Deadline{}.Config(), est, l.threshold, l.probes)
}

// Do runs op under deadline.Do with the learned floor.
func (l *DeadlineLearned) Do(ctx context.Context, c Call, op Op) error {
	l.once.Do(func() { l.live, l.err = l.rec.Live(l.o) })
	if l.err != nil {
		return l.err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	d := callDeadline(ctx, c)
	p := Deadline{}.Policy(c)
	p.Hooks = l.rec.Hooks()
	var est deadline.CompletionEstimator = l.live
	if l.successes {
		est = l.live.Successes()
	}
	p.LearnedFloor = &deadline.LearnedFloor{Estimator: est, Threshold: l.threshold, ProbeShare: l.probes}
	_, err := deadline.Do(ctx, d, p, func(ctx context.Context, _ deadline.AttemptInfo) (struct{}, error) {
		return struct{}{}, markDeadline(op(ctx))
	})
	return err
}

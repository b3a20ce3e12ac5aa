package learn

import (
	"fmt"
	"sort"
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

// Prior is a step's ceiling estimated elsewhere, a fleet's: the deadline
// connector's suggestion from every replica's attempts, pushed to the
// process (package budgetopamp does it over OpAMP). [Live.SetPriors] makes
// it the step's starting point: the live ceiling until the process's own
// recent samples suffice (see [Live.SetPriors] for the rule).
type Prior struct {
	// Ceiling is the suggested per-attempt ceiling: > 0. The Live clamps
	// it to its [Min, Max] when it serves it.
	Ceiling time.Duration
	// Quantile is the quantile it derives from, in (0, 1); [Live.Ceiling]
	// reports it with the ceiling.
	Quantile float64
	// Samples counts the attempts (completed plus censored) it rests on,
	// and First, Last the window they ended in; 0 and zero times when
	// unknown. They are not used: they say where the prior came from.
	Samples     uint64
	First, Last time.Time
}

// SetPriors replaces, at once, the priors of every step: priors (steps
// absent from it lose theirs; nil or empty removes them all). It is how a
// fleet's ceilings become this process's starting point:
//
//   - A step whose live ceiling does not exist yet (fewer than MinSamples
//     recent samples of its own, or never recorded) is served its prior at
//     once: [Live.Ceiling] returns Prior.Ceiling clamped to the Live's
//     [Min, Max], with Prior.Quantile, so an attempt under it is
//     limited_by learned_ceiling as with a ceiling learned here.
//   - Once the step's own recent samples reach MinSamples, the ceiling they
//     give replaces the prior (a hand-over, not a blend): from then on the
//     step's ceiling is this process's, the prior is kept but not served,
//     and a new prior does not change it. The samples recorded meanwhile
//     were limited by the prior, and are read as the local ones always are
//     (a cut attempt is censored at its cut, and a too-censored step's
//     ceiling is doubled from that cut, up to Max).
//   - Max is the client's policy bound: a prior never raises a ceiling
//     beyond it, whatever the fleet suggests. Min likewise holds.
//
// Priors are validated all together, in step-name order: a ceiling <= 0, a
// quantile outside (0, 1) (NaN included) or more than [MaxSteps] steps fail
// with an [*OptionError] naming the step and the field, and then nothing
// changes. The map is copied. The priors are kept when [Recorder.Live] is
// called again. Reading a prior ([Live.Ceiling]) is a map look-up behind an
// atomic pointer: no lock, no allocation. SetPriors is safe to call while
// attempts read ceilings and are recorded.
func (l *Live) SetPriors(priors map[string]Prior) error {
	if len(priors) > MaxSteps {
		return &OptionError{"priors", fmt.Sprintf("(%d steps)", len(priors)), fmt.Sprintf("at most %d steps (MaxSteps)", MaxSteps)}
	}
	names := make([]string, 0, len(priors))
	for name := range priors {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := priors[name]
		switch {
		case p.Ceiling <= 0:
			return &OptionError{fmt.Sprintf("Prior[%q].Ceiling", name), p.Ceiling, "> 0"}
		case !(p.Quantile > 0 && p.Quantile < 1): // NaN included
			return &OptionError{fmt.Sprintf("Prior[%q].Quantile", name), p.Quantile, "in (0, 1), e.g. 0.99"}
		}
	}
	lc := l.r.live.Load()
	if len(priors) == 0 {
		lc.priors.Store(nil)
		return nil
	}
	ps := &priorSet{given: make(map[string]Prior, len(priors)), serve: make(map[string]served, len(priors))}
	for name, p := range priors {
		ps.given[name] = p
		ps.serve[name] = served{p.Ceiling, p.Quantile}
	}
	lc.priors.Store(ps)
	return nil
}

// priorSet is the priors of a Live: as given, and the part Ceiling reads
// (small values, so that the look-up copies 16 bytes, not a Prior).
type priorSet struct {
	given map[string]Prior
	serve map[string]served
}

type served struct {
	ceiling  time.Duration
	quantile float64
}

// Prior returns the prior set for step by [Live.SetPriors], as it was given
// (not clamped), and false when it has none. Whether it is served is
// [Live.Ceiling]'s to say: only while the step has no live ceiling of its
// own.
func (l *Live) Prior(step string) (Prior, bool) {
	ps := l.r.live.Load().priors.Load()
	if ps == nil {
		return Prior{}, false
	}
	p, ok := ps.given[step]
	return p, ok
}

// Priors returns a copy of the priors set by [Live.SetPriors]; nil when
// there are none.
func (l *Live) Priors() map[string]Prior {
	ps := l.r.live.Load().priors.Load()
	if ps == nil {
		return nil
	}
	out := make(map[string]Prior, len(ps.given))
	for k, v := range ps.given {
		out[k] = v
	}
	return out
}

// prior returns step's prior as a ceiling, clamped to lc's bounds.
func (lc *liveConfig) prior(step string) (deadline.LearnedCeiling, bool) {
	ps := lc.priors.Load()
	if ps == nil {
		return deadline.LearnedCeiling{}, false
	}
	p, ok := ps.serve[step]
	if !ok {
		return deadline.LearnedCeiling{}, false
	}
	c := max(p.ceiling, lc.o.Min)
	if lc.o.Max > 0 {
		c = min(c, lc.o.Max)
	}
	return deadline.LearnedCeiling{Ceiling: c, Quantile: p.quantile}, true
}

package learn

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

// LiveOptions configures [Recorder.Live].
type LiveOptions struct {
	// Quantile, Margin and MinSamples are as for [Recorder.Suggest]. Max
	// is required (> 0): a live ceiling never exceeds it. Min (0: none)
	// is the least ceiling.
	SuggestOptions
	// Every is how many samples of a step pass between two computations
	// of its ceiling: the ceiling changes at most every Every samples.
	// 0 means 100. Must be >= 0.
	Every int
	// HalfLife is how many samples of a step pass before the weight of the
	// older ones is halved, so that the ceiling follows a provider that
	// drifts: it reflects roughly the last 2·HalfLife samples. 0 means
	// 2·MinSamples. Must be >= 0.
	HalfLife int
}

// liveConfig is LiveOptions with its defaults, as the recording path reads
// it.
type liveConfig struct {
	o        SuggestOptions
	every    uint64
	halfLife uint64
	// priors are the steps' priors ([Live.SetPriors]), shared by every
	// liveConfig of the recorder, so that calling Live again keeps them.
	priors *atomic.Pointer[priorSet]
}

// recent is a step's decaying histogram for the live ceiling.
type recent struct {
	n                   atomic.Uint64 // samples recorded into it
	decayed             uint64        // n at the last halving; the updater's
	completed, censored [slots]atomic.Uint32
	errored             [slots]atomic.Uint32            // the completed ones that returned an error
	table               atomic.Pointer[completionTable] // the completion estimate; nil: too few samples
}

func (rc *recent) completedAt(i int) uint64 { return uint64(rc.completed[i].Load()) }
func (rc *recent) censoredAt(i int) uint64  { return uint64(rc.censored[i].Load()) }
func (rc *recent) erroredAt(i int) uint64   { return uint64(rc.errored[i].Load()) }

// Live turns on the live ceiling and returns it as a
// [deadline.CeilingSource] for [deadline.Policy.Ceiling]. From then on,
// every Every samples of a step, the recorder recomputes the step's ceiling
// from its recent samples (weights halved every HalfLife samples): the
// Quantile × Margin clamped to [Min, Max], as [Suggest] computes it. While
// a step has fewer than MinSamples recent samples it has no live ceiling
// (the policy's AttemptTimeout applies). When too many recent attempts were
// cut to know the quantile (censored), the ceiling is doubled, up to Max,
// so that the attempts can show how long they take.
//
// The same recent samples give [Live.Completion], the probability that an
// attempt completes within a lease, for [deadline.Policy.LearnedFloor].
//
// The computation runs on the goroutine whose attempt completed the Every
// samples (a few microseconds, once per Every samples); when another
// computation of the step is running then, it is not skipped but made as
// soon as that one ends, so the ceiling and its half-life decay do not lag
// under contention. Reading the ceiling is an atomic load, with no lock
// and no allocation. Calling Live again replaces the options and keeps
// what was learned, and the priors.
//
// A step can start from a ceiling estimated elsewhere, the fleet's:
// [Live.SetPriors] gives it one, served while the step has no live ceiling
// of its own.
func (r *Recorder) Live(o LiveOptions) (*Live, error) {
	so, err := o.SuggestOptions.withDefaults()
	if err != nil {
		return nil, err
	}
	switch {
	case o.Max <= 0:
		return nil, &OptionError{"LiveOptions.Max", o.Max, "> 0: a live ceiling needs an upper bound"}
	case o.Every < 0:
		return nil, &OptionError{"LiveOptions.Every", o.Every, ">= 0 (0: 100)"}
	case o.HalfLife < 0:
		return nil, &OptionError{"LiveOptions.HalfLife", o.HalfLife, ">= 0 (0: 2 × MinSamples)"}
	}
	lc := &liveConfig{o: so, every: uint64(o.Every), halfLife: uint64(o.HalfLife)}
	if lc.every == 0 {
		lc.every = 100
	}
	if lc.halfLife == 0 {
		lc.halfLife = 2 * uint64(so.MinSamples)
	}
	for {
		old := r.live.Load()
		if old != nil {
			lc.priors = old.priors
		} else {
			lc.priors = new(atomic.Pointer[priorSet])
		}
		if r.live.CompareAndSwap(old, lc) {
			return &Live{r: r}, nil
		}
	}
}

// Live is a recorder's live ceiling: a [deadline.CeilingSource].
type Live struct{ r *Recorder }

// Ceiling returns step's current live ceiling and the quantile it was
// derived from. While the step has none (fewer than MinSamples recent
// samples, never recorded, or overflowed [MaxSteps]), it returns the step's
// prior ([Live.SetPriors]) clamped to [Min, Max], with the prior's
// quantile; false when there is none either.
func (l *Live) Ceiling(step string) (deadline.LearnedCeiling, bool) {
	lc := l.r.live.Load()
	if s := l.r.lookup(step); s != nil {
		if c := s.ceiling.Load(); c > 0 {
			return deadline.LearnedCeiling{Ceiling: time.Duration(c), Quantile: lc.o.Quantile}, true
		}
	}
	if c, ok := lc.prior(step); ok {
		return c, true
	}
	return deadline.LearnedCeiling{}, false
}

var _ deadline.CeilingSource = (*Live)(nil)

// HedgeDelay returns the step's current learned value as a hedge delay,
// for [deadline.Hedge.DelaySource]: the delay "The Tail at Scale" asks for
// is the step's p95, so give hedging a Live of its own, on a Recorder of its
// own, with Quantile 0.95 and Margin 1 (a Recorder has one live mode; the
// one that sets ceilings learns p99 × a margin). It reports false, and
// Hedge.Delay applies, until the step has a learned value or a prior
// ([Live.SetPriors]). Reading it is an atomic load.
func (l *Live) HedgeDelay(step string) (time.Duration, bool) {
	c, ok := l.Ceiling(step)
	return c.Ceiling, ok
}

var _ deadline.HedgeDelaySource = (*Live)(nil)

// record adds a sample to s's recent histogram and recomputes the ceiling
// every lc.every samples.
func (lc *liveConfig) record(s *series, ended deadline.EndedBy, censored bool, d time.Duration) {
	rc := s.recent.Load()
	if rc == nil {
		rc = new(recent)
		if !s.recent.CompareAndSwap(nil, rc) {
			rc = s.recent.Load()
		}
	}
	if censored {
		inc(&rc.censored[slot(d)])
	} else {
		if ended == deadline.EndedError {
			inc(&rc.errored[slot(d)])
		}
		inc(&rc.completed[slot(d)])
	}
	if rc.n.Add(1)%lc.every == 0 {
		s.stale.Store(true)
	}
	// An update due while another runs is not skipped (the estimate, and
	// its decay, would lag by Every samples under contention): whoever
	// finds it due and no update running makes it, the updater itself as
	// it ends, or the next recording.
	for s.stale.Load() && s.updating.CompareAndSwap(false, true) {
		s.stale.Store(false)
		lc.updateLocked(s, rc)
	}
}

// updateLocked runs update for the holder of s.updating, and releases it.
func (lc *liveConfig) updateLocked(s *series, rc *recent) {
	defer s.updating.Store(false)
	lc.update(s, rc, rc.n.Load())
}

// update recomputes s's live ceiling from rc, then ages rc.
func (lc *liveConfig) update(s *series, rc *recent, n uint64) {
	var total uint64
	for i := range slots {
		total += rc.completedAt(i) + rc.censoredAt(i)
	}
	o := lc.o
	if total >= uint64(o.MinSamples) {
		rc.table.Store(newCompletionTable(rc, rc, total))
	} else {
		rc.table.Store(nil)
	}
	if total >= uint64(o.MinSamples) {
		if k, ok := kaplanMeier(rc, total, o.Quantile); ok {
			var est time.Duration
			switch k {
			case underSlot:
				est = Underflow
			case overSlot:
				est = time.Duration(s.max.Load())
			default:
				est = value(k)
			}
			c, _ := ceilingOf(est, o)
			s.ceiling.Store(int64(c))
		} else {
			// The quantile is above every cut: raise the ceiling so that
			// the attempts can show it.
			base := time.Duration(s.ceiling.Load())
			if base <= 0 {
				base = time.Duration(s.maxCensored.Load())
			}
			c := min(saturate(2*float64(max(base, 1))), o.Max)
			s.ceiling.Store(int64(max(c, o.Min)))
		}
	}
	if n-rc.decayed >= lc.halfLife {
		rc.decayed = n
		for i := range slots {
			halve(&rc.completed[i])
			halve(&rc.censored[i])
			halve(&rc.errored[i])
		}
	}
}

// halve halves c.
func halve(c *atomic.Uint32) {
	for {
		v := c.Load()
		if v == 0 || c.CompareAndSwap(v, v/2) {
			return
		}
	}
}

// String describes the live ceiling's options.
func (l *Live) String() string {
	lc := l.r.live.Load()
	priors := ""
	if ps := lc.priors.Load(); ps != nil {
		priors = fmt.Sprintf(", %d priors", len(ps.given))
	}
	return fmt.Sprintf("live ceiling: p%s × %g in [%s, %s], every %d samples, half-life %d samples%s",
		fmtP(lc.o.Quantile), lc.o.Margin, lc.o.Min, lc.o.Max, lc.every, lc.halfLife, priors)
}

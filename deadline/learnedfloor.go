package deadline

import (
	"math"
	"math/rand/v2"
	"time"
)

// LearnedFloor refuses attempts that would very likely not complete within
// the lease they would get ([Policy.LearnedFloor]): the fixed floor learned
// from traffic. Before each attempt, hedge and retry, the engine asks
// Estimator how likely an attempt of the step is to complete within its
// lease; when the estimator has an answer that rests on at least MinSamples
// samples and its probability is below Threshold, the attempt is refused
// locally, before anything is sent, and the call stops with
// [ReasonRefusedLearned] (a hedge is simply not started). Without an answer
// (too few samples, an unknown step, a lease longer than anything seen) the
// policy behaves exactly as without a LearnedFloor.
//
// A retry is judged before its backoff: when the lease left after the wait
// would very likely fail, the call stops at once, without sleeping and
// without asking the [RetryBudget] for a token.
//
// So that the estimate follows a provider that recovers, a ProbeShare of the
// attempts that would be refused go out anyway, marked as probes
// ([AttemptInfo.Probe]); their outcomes, recorded like any other attempt,
// move the estimate back (see docs/ceilings.md for how fast).
type LearnedFloor struct {
	// Estimator answers the probability that an attempt of the step
	// completes within a lease, e.g. a *learn.Live. Required.
	Estimator CompletionEstimator

	// Threshold is the least probability of completing within the lease
	// for which an attempt still starts, e.g. 0.05. Must be in (0, 1).
	Threshold float64

	// MinSamples is the least [Estimate.Samples] an estimate must rest on
	// to refuse anything; 0 leaves it to the estimator (which answers
	// ok=false while it has too few).
	MinSamples uint64

	// ProbeShare is the share, in [0, 1], of would-be-refused attempts
	// that go out anyway as probes, drawn with [Policy.Rand]. 0: none (the
	// estimate then only moves with the attempts that are not refused).
	ProbeShare float64
}

// validate reports an invalid LearnedFloor as a [*PolicyError].
func (f *LearnedFloor) validate() error {
	switch {
	case f.Estimator == nil:
		return &PolicyError{"Policy.LearnedFloor.Estimator", "nil", "a CompletionEstimator (e.g. a *learn.Live), or a nil LearnedFloor"}
	case math.IsNaN(f.Threshold) || f.Threshold <= 0 || f.Threshold >= 1:
		return &PolicyError{"Policy.LearnedFloor.Threshold", f.Threshold, "in (0, 1), e.g. 0.05"}
	case math.IsNaN(f.ProbeShare) || f.ProbeShare < 0 || f.ProbeShare > 1:
		return &PolicyError{"Policy.LearnedFloor.ProbeShare", f.ProbeShare, "in [0, 1] (0: no probes)"}
	}
	return nil
}

// doomed asks the learned floor about an attempt granted lease: it returns
// the estimate (zero when there is none), whether the attempt should be
// refused, and whether it goes out as a probe instead; probed says it was
// already let through as a probe (a retry judged before its backoff).
func (r *run) doomed(lease time.Duration, probed bool) (est Estimate, refuse, probe bool) {
	f := r.p.LearnedFloor
	est, ok := f.Estimator.Completion(r.p.Name, lease)
	if !ok || est.Samples < f.MinSamples {
		return Estimate{}, false, false
	}
	if est.P >= f.Threshold {
		return est, false, false
	}
	if probed || f.ProbeShare > 0 && r.draw() < f.ProbeShare {
		return est, false, true
	}
	return est, true, false
}

// draw returns a uniform value in [0, 1) from the policy's Rand, or from
// math/rand/v2's global source.
func (r *run) draw() float64 {
	const n = 1 << 53
	if r.p.Rand != nil {
		return float64(r.p.Rand(n)) / n
	}
	return rand.Float64()
}

// leaseAfter is the lease an attempt would be granted after waiting wait,
// with remaining left now: min(ceiling, remaining - wait - floor), the
// ceiling being the learned one when the policy has a source that answers.
func (r *run) leaseAfter(remaining, wait time.Duration) time.Duration {
	lease := remaining - wait - r.p.Floor
	c := r.p.AttemptTimeout
	if r.p.Ceiling != nil {
		if lc, ok := r.p.Ceiling.Ceiling(r.p.Name); ok && lc.Ceiling > 0 {
			c = lc.Ceiling
		}
	}
	if c > 0 && c < lease {
		return c
	}
	return lease
}

// Need returns the least lease, at most budget, with which an attempt of
// step completes with a probability of at least f's Threshold, given that
// budget does (a bisection of the estimator's answers, to about 1 %), or 0
// when the estimator has no answer for budget on MinSamples samples. It is
// the "need" of the waiting rule an [overload.Limiter] and package admission's queue
// share: a call waits only while its deadline less its need is ahead.
func (f *LearnedFloor) Need(step string, budget time.Duration) time.Duration {
	if e, ok := f.Estimator.Completion(step, budget); !ok || e.Samples < f.MinSamples || e.P < f.Threshold {
		return 0
	}
	lo, hi := time.Duration(0), budget
	for hi-lo > hi/128 && hi-lo > time.Microsecond {
		mid := lo + (hi-lo)/2
		if e, ok := f.Estimator.Completion(step, mid); ok && e.Samples >= f.MinSamples && e.P >= f.Threshold {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

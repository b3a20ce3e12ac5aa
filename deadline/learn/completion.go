package learn

import (
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

// completionTable is a step's Kaplan–Meier estimate of the fraction of
// attempts completed within each bucket, precomputed from its recent
// histogram whenever the live ceiling is, so that answering a lease is an
// index: p[k-lo] for the buckets of rank lo (the shortest sample) to known
// (the longest).
type completionTable struct {
	samples uint64    // the recent (decayed) samples it rests on
	p       []float64 // the fraction completed up to and including rank lo+i
	// ok: the fraction that succeeded (completed without an error) up to
	// and including rank lo+i, an error counting as an attempt that never
	// succeeds.
	ok    []float64
	lo    uint16
	known uint16
	// open: attempts were cut at the longest sample and the estimate never
	// reached 1, so nothing is known of a longer lease.
	open bool
}

// rank returns the position of slot s in order, from the shortest
// durations (the underflow slot, 0) to the longest (the overflow slot).
func rank(s int) uint16 {
	switch s {
	case underSlot:
		return 0
	case overSlot:
		return slots - 1
	}
	return uint16(s + 1)
}

// newCompletionTable computes the table from c's n samples (n > 0), the
// censored ones counting as "longer than their cut", and e's errors among
// the completed ones.
func newCompletionTable(c counts, e interface{ erroredAt(s int) uint64 }, n uint64) *completionTable {
	lo, hi := -1, 0
	for k := range slots {
		if s := order(k); c.completedAt(s)+c.censoredAt(s) > 0 {
			if lo < 0 {
				lo = k
			}
			hi = k
		}
	}
	t := &completionTable{samples: n, lo: uint16(max(lo, 0)), known: uint16(hi)}
	if lo < 0 {
		return t
	}
	t.p = make([]float64, hi-lo+1)
	t.ok = make([]float64, hi-lo+1)
	atRisk, okAtRisk := float64(n), float64(n)
	surv, okSurv := 1.0, 1.0
	for k := lo; k <= hi; k++ {
		s := order(k)
		d, x := float64(c.completedAt(s)), float64(c.censoredAt(s))
		if d > 0 {
			// Concurrent recording can make n lag the buckets.
			atRisk = max(atRisk, d)
			surv *= 1 - d/atRisk
		}
		t.p[k-lo] = min(max(1-surv, 0), 1)
		atRisk -= d + x
		// Time to success: an error never succeeds, so it stays at risk
		// (a success time of +∞), and only successes end the survival.
		if ok := max(d-float64(e.erroredAt(s)), 0); ok > 0 {
			okAtRisk = max(okAtRisk, ok)
			okSurv *= 1 - ok/okAtRisk
			okAtRisk -= ok
		}
		okAtRisk -= x
		t.ok[k-lo] = min(max(1-okSurv, 0), 1)
	}
	t.open = surv > 1e-9
	return t
}

// within returns the estimated fraction of attempts that complete within
// a lease in the bucket of rank k (succeed, with successOnly), and false
// past what is known.
func (t *completionTable) within(k uint16, successOnly bool) (float64, bool) {
	p := t.p
	if successOnly {
		p = t.ok
	}
	switch {
	case k < t.lo || len(p) == 0:
		return 0, true
	case k > t.known:
		if t.open {
			return 0, false
		}
		return p[len(p)-1], true
	}
	return p[k-t.lo], true
}

// Completion returns the estimated probability that an attempt of step
// completes (returns, with or without an error) within lease, from the
// step's recent samples, those cut by a limit counting as "longer than
// their cut" (Kaplan–Meier), and the weight of the samples it rests on. It
// makes the Live a [deadline.CompletionEstimator], for
// [deadline.Policy.LearnedFloor] and server admission.
//
// The estimate is refreshed with the live ceiling, every Every samples of
// the step, from its decayed histogram (weights halved every HalfLife
// samples). It reports false while the step has fewer than MinSamples
// recent samples (or was never recorded, or overflowed [MaxSteps]), and for
// a lease longer than the longest recent sample when that one was cut:
// nothing is then known of such a lease. The lease is read to the sketch's
// bucket (within [RelativeError]), and an attempt that ends in the lease's
// bucket counts as within it. Reading it is a map look-up, a few atomic
// loads and an index, with no lock and no allocation.
func (l *Live) Completion(step string, lease time.Duration) (deadline.Estimate, bool) {
	return l.estimate(step, lease, false)
}

// Successes returns the same live estimate counting only the attempts that
// succeed: its Completion answers the probability that an attempt of step
// returns without an error within lease, an attempt that ended with an
// error (e.g. a fast 503) counting as one that never succeeds. Give it to
// [deadline.Policy.LearnedFloor] when fast errors are common enough that
// almost any lease "completes": it refuses a lease that would very likely
// bring back no result, not only one that would very likely bring back
// nothing at all. It answers when [Live.Completion] does, on the same
// samples, with the same cost.
func (l *Live) Successes() Successes { return Successes{l} }

// Successes is a [Live] whose estimate counts only successes
// ([Live.Successes]): a [deadline.CompletionEstimator].
type Successes struct{ l *Live }

// Completion returns the estimated probability that an attempt of step
// succeeds (returns without an error) within lease, an error counting as
// an attempt that never succeeds, and false when [Live.Completion] would.
func (s Successes) Completion(step string, lease time.Duration) (deadline.Estimate, bool) {
	return s.l.estimate(step, lease, true)
}

var _ deadline.CompletionEstimator = Successes{}

func (l *Live) estimate(step string, lease time.Duration, successOnly bool) (deadline.Estimate, bool) {
	s := l.r.lookup(step)
	if s == nil {
		return deadline.Estimate{}, false
	}
	rc := s.recent.Load()
	if rc == nil {
		return deadline.Estimate{}, false
	}
	t := rc.table.Load()
	if t == nil {
		return deadline.Estimate{}, false
	}
	p, ok := t.within(rank(slot(lease)), successOnly)
	if !ok {
		return deadline.Estimate{}, false
	}
	return deadline.Estimate{P: p, Samples: t.samples}, true
}

var _ deadline.CompletionEstimator = (*Live)(nil)

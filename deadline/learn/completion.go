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
	lo      uint16
	known   uint16
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
// censored ones counting as "longer than their cut".
func newCompletionTable(c counts, n uint64) *completionTable {
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
	atRisk := float64(n)
	surv := 1.0
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
	}
	t.open = surv > 1e-9
	return t
}

// within returns the estimated fraction of attempts that complete within
// a lease in the bucket of rank k, and false past what is known.
func (t *completionTable) within(k uint16) (float64, bool) {
	switch {
	case k < t.lo || len(t.p) == 0:
		return 0, true
	case k > t.known:
		if t.open {
			return 0, false
		}
		return t.p[len(t.p)-1], true
	}
	return t.p[k-t.lo], true
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
	p, ok := t.within(rank(slot(lease)))
	if !ok {
		return deadline.Estimate{}, false
	}
	return deadline.Estimate{P: p, Samples: t.samples}, true
}

var _ deadline.CompletionEstimator = (*Live)(nil)

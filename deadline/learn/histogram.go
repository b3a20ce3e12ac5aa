package learn

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

// Histogram is a copy of one step's recorded attempts, taken by
// [Recorder.Snapshot]: the durations of the attempts that completed and the
// points at which the others were cut (censored), in the buckets of the
// sketch (see [Scale]). It is a plain value: not safe for concurrent
// mutation, safe to read from many goroutines. The zero Histogram is empty
// and ready to use.
type Histogram struct {
	// Samples counts the attempts recorded: completed plus censored.
	Samples uint64
	// Successes counts the completed attempts that returned no error.
	Successes uint64
	// CeilingTimeouts counts the attempts ended by their ceiling: censored
	// at the ceiling ("took longer than the ceiling").
	CeilingTimeouts uint64
	// DeadlineCuts counts the attempts ended by the shared deadline:
	// censored at their grant.
	DeadlineCuts uint64
	// First and Last are the wall-clock end times of the earliest and the
	// latest sample, to the millisecond; zero when empty.
	First, Last time.Time
	// Max is the longest completed attempt; MaxCensored the largest point
	// at which an attempt was cut.
	Max, MaxCensored time.Duration

	completed, censored [slots]uint64
}

// Errors counts the completed attempts that returned an error before any
// limit (e.g. a server error).
func (h *Histogram) Errors() uint64 {
	return h.Samples - h.Successes - h.CeilingTimeouts - h.DeadlineCuts
}

// Completed counts the attempts that completed, with or without an error.
func (h *Histogram) Completed() uint64 { return h.Samples - h.Censored() }

// Censored counts the attempts cut by a limit.
func (h *Histogram) Censored() uint64 { return h.CeilingTimeouts + h.DeadlineCuts }

// Add records one attempt that ended as ended at the wall-clock time at: for
// [deadline.EndedCompleted] and [deadline.EndedError], d is how long it
// took; for [deadline.EndedAttemptTimeout] and [deadline.EndedDeadline], d
// is the grant it was cut at. Canceled and panicked attempts, and any other
// EndedBy, are ignored. A negative d counts as 0.
func (h *Histogram) Add(ended deadline.EndedBy, d time.Duration, at time.Time) {
	d = max(d, 0)
	switch ended {
	case deadline.EndedCompleted:
		h.Successes++
	case deadline.EndedError:
	case deadline.EndedAttemptTimeout:
		h.CeilingTimeouts++
	case deadline.EndedDeadline:
		h.DeadlineCuts++
	default:
		return
	}
	h.Samples++
	if ended == deadline.EndedCompleted || ended == deadline.EndedError {
		h.completed[slot(d)]++
		h.Max = max(h.Max, d)
	} else {
		h.censored[slot(d)]++
		h.MaxCensored = max(h.MaxCensored, d)
	}
	at = at.Truncate(time.Millisecond)
	if h.First.IsZero() || at.Before(h.First) {
		h.First = at
	}
	if at.After(h.Last) {
		h.Last = at
	}
}

// Merge adds o's samples to h: the result is what recording both sets of
// attempts into one histogram gives. A nil o is ignored.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.Samples == 0 {
		return
	}
	h.Samples += o.Samples
	h.Successes += o.Successes
	h.CeilingTimeouts += o.CeilingTimeouts
	h.DeadlineCuts += o.DeadlineCuts
	if h.First.IsZero() || o.First.Before(h.First) {
		h.First = o.First
	}
	if o.Last.After(h.Last) {
		h.Last = o.Last
	}
	h.Max = max(h.Max, o.Max)
	h.MaxCensored = max(h.MaxCensored, o.MaxCensored)
	for i := range h.completed {
		h.completed[i] += o.completed[i]
		h.censored[i] += o.censored[i]
	}
}

func (h *Histogram) completedAt(s int) uint64 { return h.completed[s] }
func (h *Histogram) censoredAt(s int) uint64  { return h.censored[s] }

// Quantile returns the q-quantile of the attempts' durations: the smallest
// duration t with F(t) >= q, where F is the Kaplan–Meier estimate of the
// distribution from the completed attempts, the censored ones counting as
// "longer than their cut". It is within [RelativeError] of the exact
// quantile of the samples when nothing was censored. It fails with a
// [*OptionError] when q is not in (0, 1), with [ErrNoSamples] when no
// attempt was recorded, and with a [*CensoredError] when too many attempts
// were cut to know it (the censored fraction is above 1 - q): the true
// quantile is then above the largest cut.
func (h *Histogram) Quantile(q float64) (time.Duration, error) {
	if err := checkQuantile(q); err != nil {
		return 0, err
	}
	if h.Samples == 0 {
		return 0, ErrNoSamples
	}
	// More than 1 - q of the attempts cut: the quantile lies above the cuts.
	// Kaplan–Meier could still reach q on the few answers that arrived just
	// after a ceiling fired (a cut attempt's op returning late), each then
	// weighing for every cut attempt before it; that estimate says nothing
	// about the true tail, so it is refused as the doc of CensoredError says.
	if float64(h.Censored()) > (1-q)*float64(h.Samples) {
		return 0, &CensoredError{Quantile: q, Censored: h.Censored(), Samples: h.Samples, Above: h.MaxCensored}
	}
	s, ok := kaplanMeier(h, h.Samples, q)
	if !ok {
		return 0, &CensoredError{Quantile: q, Censored: h.Censored(), Samples: h.Samples, Above: h.MaxCensored}
	}
	return h.read(s), nil
}

// read returns the duration slot s stands for, never above the longest
// completed attempt.
func (h *Histogram) read(s int) time.Duration {
	switch s {
	case underSlot:
		return min(Underflow, h.Max)
	case overSlot:
		return h.Max
	}
	return min(value(s), h.Max)
}

// counts is a histogram's counters, atomic or plain.
type counts interface {
	completedAt(s int) uint64
	censoredAt(s int) uint64
}

// kaplanMeier returns the slot of the q-quantile under the product-limit
// (Kaplan–Meier) estimator, n being the number of samples, and false when
// the estimate never reaches q: the mass left is all censored. Within a
// bucket completions are counted before cuts, the usual convention for
// ties (a cut at t says "longer than t").
func kaplanMeier(c counts, n uint64, q float64) (int, bool) {
	atRisk := float64(n)
	surv := 1.0
	for k := range slots {
		s := order(k)
		d, x := float64(c.completedAt(s)), float64(c.censoredAt(s))
		if d > 0 {
			// Concurrent recording can make n lag the buckets.
			atRisk = max(atRisk, d)
			surv *= 1 - d/atRisk
		}
		// The product telescopes to (n - cumulative)/n without censoring;
		// the tolerance absorbs its rounding, far below 1/n.
		if 1-surv >= q-1e-9 {
			return s, true
		}
		atRisk -= d + x
	}
	return 0, false
}

// fractionWithin returns the Kaplan–Meier estimate of the fraction of
// attempts that complete within d.
func fractionWithin(c counts, n uint64, d time.Duration) float64 {
	last := slot(d)
	atRisk := float64(n)
	surv := 1.0
	for k := range slots {
		s := order(k)
		dd, x := float64(c.completedAt(s)), float64(c.censoredAt(s))
		if dd > 0 {
			atRisk = max(atRisk, dd)
			surv *= 1 - dd/atRisk
		}
		if s == last {
			break
		}
		atRisk -= dd + x
	}
	return 1 - surv
}

// ErrNoSamples is returned when a quantile or a suggestion is asked of a
// step with no recorded attempt.
var ErrNoSamples = errors.New("learn: no samples recorded")

// ErrCensored matches every [*CensoredError].
var ErrCensored = errors.New("learn: censored")

// CensoredError says a quantile cannot be estimated: more than 1 - Quantile
// of the attempts were cut by a limit (a ceiling or the deadline) before
// completing, so the quantile is above the largest cut, Above. A ceiling
// below the true quantile hides it: raise the ceiling above Above to learn
// it. It matches [ErrCensored].
type CensoredError struct {
	Step     string
	Quantile float64
	Censored uint64        // attempts cut
	Samples  uint64        // attempts recorded
	Above    time.Duration // the largest cut: the quantile is above it
}

func (e *CensoredError) Error() string {
	step := ""
	if e.Step != "" {
		step = fmt.Sprintf("step %q: ", e.Step)
	}
	return fmt.Sprintf("learn: %scensored: raise the ceiling above %s: %d of %d attempts (%.1f%%) were cut, more than 1 - %s, so p%s is above every cut",
		step, e.Above, e.Censored, e.Samples, 100*float64(e.Censored)/float64(e.Samples), fmtQ(e.Quantile), fmtP(e.Quantile))
}

// Is reports whether target is [ErrCensored].
func (e *CensoredError) Is(target error) bool { return target == ErrCensored }

// fmtQ formats a quantile without trailing zeros: 0.99, 0.999.
func fmtQ(q float64) string { return fmt.Sprintf("%g", q) }

// fmtP formats a quantile as a percentile name: 0.99 → "99", 0.999 → "99.9".
func fmtP(q float64) string { return fmt.Sprintf("%g", math.Round(q*1e6)/1e4) }

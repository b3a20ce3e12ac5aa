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

// Series is one series of a [Histogram], its completed attempts or its
// censored ones, in the form of an OpenTelemetry exponential histogram at
// [Scale] whose unit is the nanosecond: Counts[i] counts the durations of
// bucket index Offset+i, (base^(Offset+i), base^(Offset+i+1)] ns (see
// [BucketIndex] and [BucketBounds]). The kept indexes run from [MinIndex] to
// [MaxIndex]; Underflow counts the durations <= [Underflow] (0 included: an
// exponential histogram's zero bucket with a zero threshold of Underflow
// ns) and Overflow those > [Overflow] (a bucket above MaxIndex). The zero
// Series is empty.
type Series struct {
	Underflow uint64
	Offset    int32
	Counts    []uint64
	Overflow  uint64
}

// Total is the number of durations s counts: its buckets, its underflow
// and its overflow. It saturates at the largest uint64 instead of wrapping.
func (s Series) Total() uint64 {
	n, _ := s.total()
	return n
}

// total adds up s's counts, and reports false when they overflow a uint64.
func (s Series) total() (uint64, bool) {
	n := s.Underflow
	add := func(c uint64) bool {
		if n+c < n {
			return false
		}
		n += c
		return true
	}
	if !add(s.Overflow) {
		return math.MaxUint64, false
	}
	for _, c := range s.Counts {
		if !add(c) {
			return math.MaxUint64, false
		}
	}
	return n, true
}

// Series returns h's two series: the durations of the completed attempts
// and the cuts of the censored ones. Each holds the kept buckets from its
// first non-empty one to its last (no Counts, Offset 0, when none is), so
// its length follows the spread of the durations, not the sketch's range.
// The slices are h's copies: the caller may keep and change them.
// [Histogram.SetSeries] is the way back.
func (h *Histogram) Series() (completed, censored Series) {
	return seriesOf(&h.completed), seriesOf(&h.censored)
}

func seriesOf(c *[slots]uint64) Series {
	s := Series{Underflow: c[underSlot], Overflow: c[overSlot]}
	lo, hi := -1, -1
	for i := range underSlot {
		if c[i] != 0 {
			if lo < 0 {
				lo = i
			}
			hi = i
		}
	}
	if lo >= 0 {
		s.Offset = int32(lo + MinIndex)
		s.Counts = append([]uint64(nil), c[lo:hi+1]...)
	}
	return s
}

// SetSeries replaces h's buckets with completed's and censored's, keeping
// its counters (Samples, Successes, CeilingTimeouts, DeadlineCuts), its
// window (First, Last) and its maxima (Max, MaxCensored): with them, it
// rebuilds a Histogram from what [Histogram.Series] and the exported fields
// gave (an exported metric, a snapshot sent elsewhere), bucket for bucket.
//
// It checks that the whole is one a Histogram can hold, and fails with a
// [*OptionError] naming the first thing that is not, leaving h unchanged:
// a series' buckets inside [MinIndex, MaxIndex] (an empty Counts may have
// any Offset); completed's total equal to Samples minus the censored
// attempts, and censored's to CeilingTimeouts + DeadlineCuts (no counter
// overflowing); Successes at most completed's total; Max 0 when nothing
// completed and otherwise in completed's last non-empty bucket (Max in the
// underflow bucket when only that one counts, and so on), MaxCensored
// likewise with censored; Last not before First, and both zero when
// Samples is 0.
func (h *Histogram) SetSeries(completed, censored Series) error {
	var c, x [slots]uint64
	if err := fill(&c, completed, "completed"); err != nil {
		return err
	}
	if err := fill(&x, censored, "censored"); err != nil {
		return err
	}
	nc, _ := completed.total()
	nx, _ := censored.total()
	cuts := h.CeilingTimeouts + h.DeadlineCuts
	switch {
	case cuts < h.CeilingTimeouts:
		return &OptionError{"Histogram.CeilingTimeouts + DeadlineCuts", fmt.Sprintf("%d + %d", h.CeilingTimeouts, h.DeadlineCuts), "a sum that fits in a uint64"}
	case nx != cuts:
		return &OptionError{"censored series total", nx, fmt.Sprintf("CeilingTimeouts + DeadlineCuts = %d", cuts)}
	case h.Samples < cuts || nc != h.Samples-cuts:
		return &OptionError{"completed series total", nc, fmt.Sprintf("Samples - CeilingTimeouts - DeadlineCuts (Samples %d, %d censored)", h.Samples, cuts)}
	case h.Successes > nc:
		return &OptionError{"Histogram.Successes", h.Successes, fmt.Sprintf("at most the completed attempts (%d)", nc)}
	case h.Samples == 0 && (!h.First.IsZero() || !h.Last.IsZero()):
		return &OptionError{"Histogram.First/Last", fmt.Sprintf("%v/%v", h.First, h.Last), "zero times when Samples is 0"}
	case h.Last.Before(h.First):
		return &OptionError{"Histogram.Last", h.Last, fmt.Sprintf("not before First (%v)", h.First)}
	}
	if err := checkMax(&c, h.Max, "Histogram.Max", "completed"); err != nil {
		return err
	}
	if err := checkMax(&x, h.MaxCensored, "Histogram.MaxCensored", "censored"); err != nil {
		return err
	}
	h.completed, h.censored = c, x
	return nil
}

// fill copies s into the slots c, checking its range and its total.
func fill(c *[slots]uint64, s Series, name string) error {
	if _, ok := s.total(); !ok {
		return &OptionError{name + " series total", "more than 2^64-1", "a count that fits in a uint64"}
	}
	if len(s.Counts) > 0 {
		end := int64(s.Offset) + int64(len(s.Counts)) - 1
		if s.Offset < MinIndex || end > MaxIndex {
			return &OptionError{name + " series buckets", fmt.Sprintf("[%d, %d]", s.Offset, end), fmt.Sprintf("indexes within [%d, %d] at scale %d (shorter durations in Underflow, longer in Overflow)", MinIndex, MaxIndex, Scale)}
		}
		copy(c[int(s.Offset)-MinIndex:], s.Counts)
	}
	c[underSlot], c[overSlot] = s.Underflow, s.Overflow
	return nil
}

// checkMax checks that m, the largest duration of the slots c, lies in the
// last non-empty one (0 when all are empty).
func checkMax(c *[slots]uint64, m time.Duration, field, name string) error {
	if m < 0 {
		return &OptionError{field, m, ">= 0"}
	}
	last := -1
	for k := range slots {
		if s := order(k); c[s] != 0 {
			last = s
		}
	}
	if last < 0 {
		if m != 0 {
			return &OptionError{field, m, "0: the " + name + " series is empty"}
		}
		return nil
	}
	if slot(m) != last {
		lo, hi := slotBounds(last)
		return &OptionError{field, m, fmt.Sprintf("in the %s series' last non-empty bucket, (%s, %s]", name, lo, hi)}
	}
	return nil
}

// slotBounds returns the durations (lo, hi] of slot s, as slot places
// them: the underflow slot is (-∞, Underflow], shown from 0; the overflow
// slot (Overflow, the largest Duration].
func slotBounds(s int) (lo, hi time.Duration) {
	switch s {
	case underSlot:
		return 0, Underflow
	case overSlot:
		return Overflow, math.MaxInt64
	}
	l, u := BucketBounds(int32(s + MinIndex))
	return time.Duration(math.Floor(l)), time.Duration(math.Floor(u))
}

package learn

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Defaults of [SuggestOptions].
const (
	// DefaultQuantile is the quantile a ceiling is derived from: p99 of the
	// attempts, so about one attempt in a hundred is cut and retried.
	DefaultQuantile = 0.99
	// DefaultMargin multiplies the quantile. 1.2 covers the sketch's 1.1%
	// error and about 1.7 standard errors of a p99 estimated from 1000
	// samples of a log-normal with σ = 1 (a heavy, usual latency tail:
	// ≈ 12%), with a few percent left for drift. A ceiling of exactly the
	// estimate would cut more than 1 - q of the attempts half the time.
	DefaultMargin = 1.2
	// minSamplesFloor is the least default MinSamples.
	minSamplesFloor = 100
)

// SuggestOptions configures [Recorder.Suggest]. The zero value asks for
// DefaultQuantile × DefaultMargin, unbounded, refused below the default
// minimum sample count.
type SuggestOptions struct {
	// Quantile of the attempt durations, in (0, 1). 0 means
	// [DefaultQuantile].
	Quantile float64
	// Margin multiplies the quantile; >= 1. 0 means [DefaultMargin].
	Margin float64
	// Min and Max bound the ceiling; 0 means no bound. Min <= Max when
	// both are set.
	Min, Max time.Duration
	// MinSamples is the fewest attempts (completed plus censored) a
	// suggestion is made from; fewer gives a [*NotEnoughSamplesError].
	// 0 means max(100, ⌈10/(1 - Quantile)⌉): ten samples expected above
	// the quantile, 1000 for p99. Must be >= 0.
	MinSamples int
}

// withDefaults validates o and fills in its defaults.
func (o SuggestOptions) withDefaults() (SuggestOptions, error) {
	if o.Quantile == 0 {
		o.Quantile = DefaultQuantile
	}
	if err := checkQuantile(o.Quantile); err != nil {
		return o, err
	}
	if o.Margin == 0 {
		o.Margin = DefaultMargin
	}
	switch {
	case !(o.Margin >= 1) || math.IsInf(o.Margin, 0):
		return o, &OptionError{"SuggestOptions.Margin", o.Margin, ">= 1 and finite (0: 1.2)"}
	case o.Min < 0:
		return o, &OptionError{"SuggestOptions.Min", o.Min, ">= 0 (0: no lower bound)"}
	case o.Max < 0:
		return o, &OptionError{"SuggestOptions.Max", o.Max, ">= 0 (0: no upper bound)"}
	case o.Max > 0 && o.Min > o.Max:
		return o, &OptionError{"SuggestOptions.Min", o.Min, fmt.Sprintf("<= SuggestOptions.Max (%s)", o.Max)}
	case o.MinSamples < 0:
		return o, &OptionError{"SuggestOptions.MinSamples", o.MinSamples, ">= 0 (0: the default)"}
	}
	if o.MinSamples == 0 {
		o.MinSamples = max(minSamplesFloor, int(math.Ceil(10/(1-o.Quantile)-1e-9)))
	}
	return o, nil
}

func checkQuantile(q float64) error {
	if !(q > 0 && q < 1) {
		return &OptionError{"quantile", q, "in (0, 1), e.g. 0.99"}
	}
	return nil
}

// Suggestion is a per-attempt ceiling derived from one step's recorded
// attempts by [Recorder.Suggest], and the evidence behind it.
type Suggestion struct {
	Step string
	// Ceiling is Estimate × Margin, clamped to [Min, Max]; 0 when no
	// ceiling could be suggested (the error says why).
	Ceiling time.Duration
	// Estimate is the Quantile of the attempts' durations ([Histogram.Quantile]);
	// 0 when it could not be estimated.
	Estimate time.Duration
	Quantile float64
	Margin   float64
	// Clamped is "min" or "max" when a bound replaced Estimate × Margin,
	// "" otherwise.
	Clamped string
	// Samples, Successes, Errors, CeilingTimeouts and DeadlineCuts count
	// the attempts the suggestion is made from (see [Histogram]).
	Samples, Successes, Errors, CeilingTimeouts, DeadlineCuts uint64
	// First and Last are the wall-clock times of the first and the last
	// sample: the window the suggestion covers.
	First, Last time.Time
	// Censored is true when too many attempts were cut to estimate the
	// quantile: it is above RaiseAbove, the largest cut, and Ceiling is 0.
	Censored   bool
	RaiseAbove time.Duration
}

// String summarises s in one line.
func (s Suggestion) String() string {
	switch {
	case s.Censored:
		return fmt.Sprintf("%q: censored: raise the ceiling above %s (%d of %d attempts cut)", s.Step, s.RaiseAbove, s.CeilingTimeouts+s.DeadlineCuts, s.Samples)
	case s.Ceiling == 0:
		return fmt.Sprintf("%q: no ceiling (%d samples)", s.Step, s.Samples)
	}
	clamp := ""
	if s.Clamped != "" {
		clamp = ", clamped to " + s.Clamped
	}
	return fmt.Sprintf("%q: ceiling %s = p%s %s × %g%s, from %d samples %s to %s",
		s.Step, s.Ceiling, fmtP(s.Quantile), s.Estimate, s.Margin, clamp, s.Samples,
		s.First.Format(time.RFC3339), s.Last.Format(time.RFC3339))
}

// Suggest derives a ceiling from h as [Recorder.Suggest] does, for a
// histogram from elsewhere (a snapshot, a merge). step only names it.
func Suggest(step string, h *Histogram, o SuggestOptions) (Suggestion, error) {
	o, err := o.withDefaults()
	if err != nil {
		return Suggestion{Step: step}, err
	}
	if h == nil {
		h = &Histogram{}
	}
	s := Suggestion{
		Step: step, Quantile: o.Quantile, Margin: o.Margin,
		Samples: h.Samples, Successes: h.Successes, Errors: h.Errors(),
		CeilingTimeouts: h.CeilingTimeouts, DeadlineCuts: h.DeadlineCuts,
		First: h.First, Last: h.Last,
	}
	if h.Samples < uint64(o.MinSamples) {
		return s, &NotEnoughSamplesError{Step: step, Samples: h.Samples, Min: o.MinSamples, Quantile: o.Quantile}
	}
	est, err := h.Quantile(o.Quantile)
	if err != nil {
		var ce *CensoredError
		if errors.As(err, &ce) {
			ce.Step = step
			s.Censored, s.RaiseAbove = true, ce.Above
		}
		return s, err
	}
	s.Estimate = est
	s.Ceiling, s.Clamped = ceilingOf(est, o)
	return s, nil
}

// ceilingOf returns est × margin clamped to o's bounds, and which bound
// applied.
func ceilingOf(est time.Duration, o SuggestOptions) (time.Duration, string) {
	c := saturate(math.Round(float64(est) * o.Margin))
	switch {
	case o.Max > 0 && c > o.Max:
		return o.Max, "max"
	case c < o.Min:
		return o.Min, "min"
	}
	return c, ""
}

// saturate converts nanoseconds f to a Duration, saturating at the largest
// Duration: float64(math.MaxInt64) is 2⁶³, one past it, and converting
// that (or more) to int64 overflows (to math.MinInt64 on amd64).
func saturate(f float64) time.Duration {
	if !(f < 1<<63) {
		return math.MaxInt64
	}
	return time.Duration(f)
}

// ErrNotEnoughSamples matches every [*NotEnoughSamplesError].
var ErrNotEnoughSamples = errors.New("learn: not enough samples")

// NotEnoughSamplesError refuses a suggestion made from fewer samples than
// SuggestOptions.MinSamples. It matches [ErrNotEnoughSamples].
type NotEnoughSamplesError struct {
	Step     string
	Samples  uint64
	Min      int
	Quantile float64
}

func (e *NotEnoughSamplesError) Error() string {
	samples := "samples"
	if e.Samples == 1 {
		samples = "sample"
	}
	return fmt.Sprintf("learn: step %q: %d %s recorded, %d needed to suggest a ceiling from p%s", e.Step, e.Samples, samples, e.Min, fmtP(e.Quantile))
}

// Is reports whether target is [ErrNotEnoughSamples].
func (e *NotEnoughSamplesError) Is(target error) bool { return target == ErrNotEnoughSamples }

// ErrUnknownStep is returned (wrapped, with the step's name) when a
// suggestion is asked for a step the recorder has no series for.
var ErrUnknownStep = errors.New("learn: unknown step")

// OptionError reports an invalid option: the field, the value given and
// what is allowed.
type OptionError struct {
	Field   string
	Value   any
	Allowed string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("learn: invalid %s %v: want %s", e.Field, e.Value, e.Allowed)
}

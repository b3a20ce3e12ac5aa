package otelbudget

import (
	"errors"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/deadlinebudget/budget/deadline"
)

// AttributeLookup reads a span's attributes, wherever the span is held (a
// Collector's pdata span, a span decoded from a file, the SDK's
// ReadOnlySpan): Lookup returns the value of key and whether the span has
// it. A value of a type [attribute.Value] cannot hold (a map, bytes, an
// empty value) is returned as the zero Value (type [attribute.EMPTY]) with
// true, so that it reads as "present, of the wrong type".
type AttributeLookup interface {
	Lookup(key attribute.Key) (attribute.Value, bool)
}

// MaxAttemptDuration is the longest duration a sample is taken from: a
// longer attempt span (a clock jump, a corrupt timestamp) is refused with
// [ErrBadDuration].
const MaxAttemptDuration = 24 * time.Hour

// AttemptSample is one attempt span read as a learner records it
// ([learn.Histogram.Add]): its step, what ended it and its duration.
type AttemptSample struct {
	// Step is deadline.step.
	Step string
	// EndedBy is deadline.attempt.ended_by.
	EndedBy deadline.EndedBy
	// Duration is, for a completed attempt (EndedCompleted, EndedError),
	// the span's length; for a censored one (EndedAttemptTimeout,
	// EndedDeadline), the point it was cut at: its grant,
	// deadline.attempt.granted_ms, when the span has it (the span's own
	// length is the grant plus the time the operation took to notice),
	// else the span's length.
	Duration time.Duration
	// End is the span's end: the sample's wall-clock time.
	End time.Time
}

// Censored reports whether the attempt was cut by a limit: its Duration
// says "longer than".
func (s AttemptSample) Censored() bool {
	return s.EndedBy == deadline.EndedAttemptTimeout || s.EndedBy == deadline.EndedDeadline
}

// Why [ReadAttemptSample] takes no sample from a span; it wraps them with
// the details.
var (
	// ErrNotAttemptSpan: the span lacks deadline.step or
	// deadline.attempt.ended_by (or one is ""): not an attempt span of
	// this project (a call span, another library's span). Returned bare.
	ErrNotAttemptSpan = errors.New("otelbudget: not an attempt span (deadline.step and deadline.attempt.ended_by are needed)")
	// ErrUnnamedStep: deadline.step is "" (a policy without a Name).
	ErrUnnamedStep = errors.New("otelbudget: attempt span with an empty deadline.step")
	// ErrAttributeType: deadline.step or deadline.attempt.ended_by is not
	// a string.
	ErrAttributeType = errors.New("otelbudget: attribute of the wrong type")
	// ErrNotRecorded: the attempt was canceled, panicked or lost a hedge
	// (or ended_by names nothing known): learners record no sample of it.
	// The AttemptSample returned beside it holds the step and EndedBy.
	ErrNotRecorded = errors.New("otelbudget: attempt not recorded")
	// ErrBadDuration: the sample's duration is negative or above
	// [MaxAttemptDuration], or a censored attempt's
	// deadline.attempt.granted_ms is (whatever the number: the range is
	// checked before any unit conversion, so no integer wraps into a
	// plausible duration).
	ErrBadDuration = errors.New("otelbudget: attempt duration out of range")
)

// ReadAttemptSample is the one rule that turns a span into a sample, used by
// the budgetadvise command and the Collector connector alike: an attempt
// span carries deadline.step (string, not "") and
// deadline.attempt.ended_by (string); see [AttemptSample] for its
// duration. start and end are the span's timestamps.
//
// It fails with [ErrNotAttemptSpan] (bare) when either attribute is
// missing or "" (an empty step with an ended_by is [ErrUnnamedStep]
// instead), [ErrAttributeType] when either is not a string,
// [ErrNotRecorded] for an attempt learners do not record (the sample
// returned holds its step and EndedBy), and [ErrBadDuration] when the
// duration is negative or above [MaxAttemptDuration] (the sample holds
// everything read; Duration -1 when the grant is out of range). A
// deadline.attempt.granted_ms that is neither an int nor a double is
// ignored (the span's length is the cut).
func ReadAttemptSample(attrs AttributeLookup, start, end time.Time) (AttemptSample, error) {
	stepV, hasStep := attrs.Lookup(AttrStep)
	endedV, hasEnded := attrs.Lookup(AttrAttemptEndedBy)
	if !hasStep || !hasEnded {
		return AttemptSample{}, ErrNotAttemptSpan
	}
	if stepV.Type() != attribute.STRING {
		return AttemptSample{}, fmt.Errorf("%w: %s is %s, want a string", ErrAttributeType, AttrStep, typeName(stepV))
	}
	if endedV.Type() != attribute.STRING {
		return AttemptSample{}, fmt.Errorf("%w: %s is %s, want a string", ErrAttributeType, AttrAttemptEndedBy, typeName(endedV))
	}
	s := AttemptSample{Step: stepV.AsString(), End: end}
	ended := endedV.AsString()
	switch {
	case ended == "":
		return AttemptSample{}, ErrNotAttemptSpan
	case s.Step == "":
		return AttemptSample{}, fmt.Errorf("%w (ended_by %q): name the policy (deadline.Policy.Name)", ErrUnnamedStep, ended)
	}
	s.EndedBy = parseEndedBy(ended)
	switch s.EndedBy {
	case deadline.EndedCompleted, deadline.EndedError, deadline.EndedAttemptTimeout, deadline.EndedDeadline:
	default:
		return s, ErrNotRecorded
	}
	s.Duration = end.Sub(start)
	if s.Censored() {
		if g, ok := attrs.Lookup(AttrAttemptGrantedMs); ok {
			d, ok := grantDuration(g)
			switch {
			case ok:
				s.Duration = d
			case g.Type() == attribute.INT64 || g.Type() == attribute.FLOAT64:
				s.Duration = d // -1: no duration stands for it
				return s, fmt.Errorf("%w: step %q, %s: %s = %s, allowed 0 to %d", ErrBadDuration, s.Step, ended, AttrAttemptGrantedMs, g.String(), MaxAttemptDuration.Milliseconds())
			}
		}
	}
	if s.Duration < 0 || s.Duration > MaxAttemptDuration {
		return s, fmt.Errorf("%w: step %q, %s: %s, allowed 0 to %s", ErrBadDuration, s.Step, ended, s.Duration, MaxAttemptDuration)
	}
	return s, nil
}

// grantDuration reads deadline.attempt.granted_ms as a duration: ok is
// false when g is neither an int nor a double, and when its value is
// outside [0, MaxAttemptDuration] (NaN and ±Inf included). The range is
// checked on the milliseconds, before any multiplication, so that no
// integer wraps into a plausible duration (2^58+1 ms is not 1 ms). An
// unusable grant leaves Duration at -1.
func grantDuration(g attribute.Value) (time.Duration, bool) {
	const maxMs = int64(MaxAttemptDuration / time.Millisecond)
	switch g.Type() {
	case attribute.INT64:
		if v := g.AsInt64(); v >= 0 && v <= maxMs {
			return time.Duration(v) * time.Millisecond, true
		}
	case attribute.FLOAT64:
		if v := g.AsFloat64(); v >= 0 && v <= float64(maxMs) { // false for NaN
			return time.Duration(math.Round(v * float64(time.Millisecond))), true
		}
	}
	return -1, false
}

// parseEndedBy returns the deadline.EndedBy named s, 0 for none.
func parseEndedBy(s string) deadline.EndedBy {
	for e := deadline.EndedCompleted; e <= deadline.EndedHedgeLost; e++ {
		if e.String() == s {
			return e
		}
	}
	return 0
}

// typeName names an attribute value's type as OTLP does.
func typeName(v attribute.Value) string {
	switch v.Type() {
	case attribute.BOOL:
		return "a bool"
	case attribute.INT64:
		return "an int"
	case attribute.FLOAT64:
		return "a double"
	case attribute.STRING:
		return "a string"
	}
	return "of another type (empty, an array, bytes or a map)"
}

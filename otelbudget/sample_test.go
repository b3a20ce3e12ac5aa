package otelbudget_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
)

// attrs is an attribute set read by key.
type attrs map[attribute.Key]attribute.Value

func (a attrs) Lookup(k attribute.Key) (attribute.Value, bool) {
	v, ok := a[k]
	return v, ok
}

func TestReadAttemptSample(t *testing.T) {
	start := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	end := start.Add(120 * time.Millisecond)
	str, i64, f64 := attribute.StringValue, attribute.Int64Value, attribute.Float64Value
	for _, tc := range []struct {
		name  string
		a     attrs
		start time.Time
		want  otelbudget.AttemptSample
		err   error
	}{
		{"completed: the span's length", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("completed"), otelbudget.AttrAttemptGrantedMs: i64(100)}, start,
			otelbudget.AttemptSample{Step: "fetch", EndedBy: deadline.EndedCompleted, Duration: 120 * time.Millisecond, End: end}, nil},
		{"error: the span's length", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("error")}, start,
			otelbudget.AttemptSample{Step: "fetch", EndedBy: deadline.EndedError, Duration: 120 * time.Millisecond, End: end}, nil},
		{"timeout: cut at the grant", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("attempt_timeout"), otelbudget.AttrAttemptGrantedMs: i64(100)}, start,
			otelbudget.AttemptSample{Step: "fetch", EndedBy: deadline.EndedAttemptTimeout, Duration: 100 * time.Millisecond, End: end}, nil},
		{"deadline: a double grant", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("deadline"), otelbudget.AttrAttemptGrantedMs: f64(80.5)}, start,
			otelbudget.AttemptSample{Step: "fetch", EndedBy: deadline.EndedDeadline, Duration: 80500 * time.Microsecond, End: end}, nil},
		{"timeout without a grant: the span's length", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("attempt_timeout"), otelbudget.AttrAttemptGrantedMs: str("100")}, start,
			otelbudget.AttemptSample{Step: "fetch", EndedBy: deadline.EndedAttemptTimeout, Duration: 120 * time.Millisecond, End: end}, nil},
		{"no ended_by: a call span", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrVerdict: str("ok")}, start, otelbudget.AttemptSample{}, otelbudget.ErrNotAttemptSpan},
		{"no step", attrs{otelbudget.AttrAttemptEndedBy: str("completed")}, start, otelbudget.AttemptSample{}, otelbudget.ErrNotAttemptSpan},
		{"empty ended_by", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("")}, start, otelbudget.AttemptSample{}, otelbudget.ErrNotAttemptSpan},
		{"empty step", attrs{otelbudget.AttrStep: str(""), otelbudget.AttrAttemptEndedBy: str("completed")}, start, otelbudget.AttemptSample{}, otelbudget.ErrUnnamedStep},
		{"step an int", attrs{otelbudget.AttrStep: i64(3), otelbudget.AttrAttemptEndedBy: str("completed")}, start, otelbudget.AttemptSample{}, otelbudget.ErrAttributeType},
		{"ended_by a map", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: {}}, start, otelbudget.AttemptSample{}, otelbudget.ErrAttributeType},
		{"canceled: not recorded", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("canceled")}, start,
			otelbudget.AttemptSample{Step: "fetch", EndedBy: deadline.EndedCanceled, End: end}, otelbudget.ErrNotRecorded},
		{"hedge lost: not recorded", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("hedge_lost")}, start,
			otelbudget.AttemptSample{Step: "fetch", EndedBy: deadline.EndedHedgeLost, End: end}, otelbudget.ErrNotRecorded},
		{"unknown ended_by: not recorded", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("exploded")}, start,
			otelbudget.AttemptSample{Step: "fetch", End: end}, otelbudget.ErrNotRecorded},
		{"negative", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("completed")}, end.Add(time.Second),
			otelbudget.AttemptSample{Step: "fetch", EndedBy: deadline.EndedCompleted, Duration: -time.Second, End: end}, otelbudget.ErrBadDuration},
		{"over a day", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("completed")}, end.Add(-25 * time.Hour),
			otelbudget.AttemptSample{Step: "fetch", EndedBy: deadline.EndedCompleted, Duration: 25 * time.Hour, End: end}, otelbudget.ErrBadDuration},
		{"a day exactly", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("completed")}, end.Add(-24 * time.Hour),
			otelbudget.AttemptSample{Step: "fetch", EndedBy: deadline.EndedCompleted, Duration: 24 * time.Hour, End: end}, nil},
		{"NaN grant", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("deadline"), otelbudget.AttrAttemptGrantedMs: f64(math.NaN())}, start,
			otelbudget.AttemptSample{Step: "fetch", EndedBy: deadline.EndedDeadline, Duration: -1, End: end}, otelbudget.ErrBadDuration},
		{"grant 2^58+1 ms: no wrap into 1 ms", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("attempt_timeout"), otelbudget.AttrAttemptGrantedMs: i64(1<<58 + 1)}, start,
			otelbudget.AttemptSample{Step: "fetch", EndedBy: deadline.EndedAttemptTimeout, Duration: -1, End: end}, otelbudget.ErrBadDuration},
		{"grant MaxInt64 ms", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("deadline"), otelbudget.AttrAttemptGrantedMs: i64(math.MaxInt64)}, start,
			otelbudget.AttemptSample{Step: "fetch", EndedBy: deadline.EndedDeadline, Duration: -1, End: end}, otelbudget.ErrBadDuration},
		{"grant MinInt64 ms", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("deadline"), otelbudget.AttrAttemptGrantedMs: i64(math.MinInt64)}, start,
			otelbudget.AttemptSample{Step: "fetch", EndedBy: deadline.EndedDeadline, Duration: -1, End: end}, otelbudget.ErrBadDuration},
		{"grant a day and 1 ms", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("deadline"), otelbudget.AttrAttemptGrantedMs: i64(86_400_001)}, start,
			otelbudget.AttemptSample{Step: "fetch", EndedBy: deadline.EndedDeadline, Duration: -1, End: end}, otelbudget.ErrBadDuration},
		{"grant a day exactly", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("deadline"), otelbudget.AttrAttemptGrantedMs: i64(86_400_000)}, start,
			otelbudget.AttemptSample{Step: "fetch", EndedBy: deadline.EndedDeadline, Duration: 24 * time.Hour, End: end}, nil},
		{"grant 1e300 ms (double)", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("deadline"), otelbudget.AttrAttemptGrantedMs: f64(1e300)}, start,
			otelbudget.AttemptSample{Step: "fetch", EndedBy: deadline.EndedDeadline, Duration: -1, End: end}, otelbudget.ErrBadDuration},
		{"grant -0.5 ms (double)", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("deadline"), otelbudget.AttrAttemptGrantedMs: f64(-0.5)}, start,
			otelbudget.AttemptSample{Step: "fetch", EndedBy: deadline.EndedDeadline, Duration: -1, End: end}, otelbudget.ErrBadDuration},
		{"timestamps a wrapped uint64 apart", attrs{otelbudget.AttrStep: str("fetch"), otelbudget.AttrAttemptEndedBy: str("completed")}, time.Unix(0, math.MinInt64),
			otelbudget.AttemptSample{Step: "fetch", EndedBy: deadline.EndedCompleted, Duration: end.Sub(time.Unix(0, math.MinInt64)), End: end}, otelbudget.ErrBadDuration},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := otelbudget.ReadAttemptSample(tc.a, tc.start, end)
			if tc.err == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.err)
				if !errors.Is(tc.err, otelbudget.ErrNotAttemptSpan) && !errors.Is(tc.err, otelbudget.ErrNotRecorded) {
					assert.NotEqual(t, tc.err.Error(), err.Error(), "the details are given")
				}
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// FuzzReadAttemptSample: whatever the integers (the span's timestamps, the
// grant as an int or a double), a sample is either refused or has a
// duration in [0, MaxAttemptDuration] that is the span's length or the
// grant read exactly.
func FuzzReadAttemptSample(f *testing.F) {
	f.Add(int64(0), int64(120e6), "attempt_timeout", int64(100), 0.0, false)
	f.Add(int64(0), int64(120e6), "deadline", int64(1<<58+1), 0.0, false)
	f.Add(int64(math.MinInt64), int64(math.MaxInt64), "completed", int64(0), 0.0, false)
	f.Add(int64(5), int64(1), "error", int64(-1), math.Inf(1), true)
	f.Add(int64(0), int64(0), "deadline", int64(0), 86_400_000.4, true)
	f.Fuzz(func(t *testing.T, startNs, endNs int64, ended string, grantMs int64, grantF float64, useF bool) {
		a := attrs{otelbudget.AttrStep: attribute.StringValue("fetch"), otelbudget.AttrAttemptEndedBy: attribute.StringValue(ended)}
		if useF {
			a[otelbudget.AttrAttemptGrantedMs] = attribute.Float64Value(grantF)
		} else {
			a[otelbudget.AttrAttemptGrantedMs] = attribute.Int64Value(grantMs)
		}
		start, end := time.Unix(0, startNs), time.Unix(0, endNs)
		s, err := otelbudget.ReadAttemptSample(a, start, end)
		if err != nil {
			return
		}
		require.GreaterOrEqual(t, s.Duration, time.Duration(0))
		require.LessOrEqual(t, s.Duration, otelbudget.MaxAttemptDuration)
		if !s.Censored() {
			require.Equal(t, end.Sub(start), s.Duration, "a completed attempt's duration is the span's length")
			return
		}
		if useF {
			require.InDelta(t, grantF*1e6, float64(s.Duration), 0.5)
		} else {
			require.Equal(t, grantMs, s.Duration.Milliseconds())
			require.Equal(t, time.Duration(0), s.Duration%time.Millisecond)
		}
	})
}

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

package test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
)

// leaseEstimator answers p for every lease shorter than need, 0.99 above.
type leaseEstimator struct {
	need time.Duration
	p    float64
}

func (e leaseEstimator) Completion(_ string, lease time.Duration) (deadline.Estimate, bool) {
	if lease >= e.need {
		return deadline.Estimate{P: 0.99, Samples: 300}, true
	}
	return deadline.Estimate{P: e.p, Samples: 300}, true
}

// TestLearnedFloorTelemetry: an admitted attempt carries its estimate, a
// probe is marked, and a refused retry puts the lease, the probability and
// the samples on the backoff event and the call span, with stop reason
// refused_learned, verdict deadline_too_small and a refusal counted.
func TestLearnedFloorTelemetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p := deadline.Policy{Name: "fetch", MaxAttempts: 3, Hooks: h.obs.Hooks(),
			LearnedFloor: &deadline.LearnedFloor{Estimator: leaseEstimator{need: 600 * time.Millisecond, p: 0.02}, Threshold: 0.05}}
		fail := func(context.Context, deadline.AttemptInfo) (string, error) {
			time.Sleep(500 * time.Millisecond)
			return "", deadline.Retryable(errors.New("503"))
		}
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, fail)
		require.ErrorIs(t, err, deadline.ErrRefusedLearned)
		h.requireAllEnded(t)

		attempts := h.spans("fetch attempt")
		require.Len(t, attempts, 1)
		a := attrs(attempts[0])
		assert.Equal(t, 0.99, a[otelbudget.AttrAttemptCompletionProbability].AsFloat64())
		assert.Equal(t, int64(300), a[otelbudget.AttrAttemptCompletionSamples].AsInt64())
		assert.False(t, hasAttr(attempts[0], otelbudget.AttrAttemptProbe))

		call := h.spans("fetch")[0]
		assert.Equal(t, "refused_learned", strAttr(t, call, otelbudget.AttrStopReason))
		assert.Equal(t, "deadline_too_small", strAttr(t, call, otelbudget.AttrVerdict))
		assert.Equal(t, "refused_learned", strAttr(t, call, semconv.ErrorTypeKey))
		assert.Equal(t, int64(500), intAttr(t, call, otelbudget.AttrRefusedLeaseMs))
		assert.Equal(t, 0.02, attrs(call)[otelbudget.AttrRefusedCompletionProbability].AsFloat64())
		assert.Equal(t, int64(300), intAttr(t, call, otelbudget.AttrRefusedCompletionSamples))
		assert.Equal(t, codes.Error, call.Status().Code)
		refusedOnEvent := false
		for _, e := range call.Events() {
			for _, kv := range e.Attributes {
				if kv.Key == otelbudget.AttrRefusedLeaseMs {
					refusedOnEvent = kv.Value.AsInt64() == 500
				}
			}
		}
		assert.True(t, refusedOnEvent, "the backoff event says the retry was refused and why")

		// A probe: the first attempt would be refused and goes out anyway.
		p.LearnedFloor.ProbeShare = 1
		p.MaxAttempts = 1
		_, err = deadline.Do(context.Background(), deadline.New(300*time.Millisecond), p, fail)
		require.Error(t, err)
		probe := h.spans("fetch attempt")[1]
		assert.True(t, attrs(probe)[otelbudget.AttrAttemptProbe].AsBool())
		assert.Equal(t, 0.02, attrs(probe)[otelbudget.AttrAttemptCompletionProbability].AsFloat64())

		m := h.collect(t)
		require.Contains(t, m, otelbudget.MetricRefusals)
		sum := m[otelbudget.MetricRefusals].Data.(metricdata.Sum[int64])
		require.Len(t, sum.DataPoints, 1)
		assert.Equal(t, int64(1), sum.DataPoints[0].Value)
	})
}

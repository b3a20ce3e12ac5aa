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

// hedgeOp: the first attempt hangs until canceled, the others return
// after took (or fail with err).
func hedgeOp(took time.Duration, err error) func(context.Context, deadline.AttemptInfo) (int, error) {
	return func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
		d := time.Hour
		if a.Number > 1 {
			d = took
		}
		select {
		case <-time.After(d):
			return a.Number, err
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// TestHedgeTelemetry: each hedge is an attempt span marked hedge=true; the
// winner is marked; the loser ends with ended_by=hedge_lost and no error;
// the call span counts the hedges and its verdict is ok.
func TestHedgeTelemetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p := deadline.Policy{Name: "fetch", MaxAttempts: 3, AttemptTimeout: 500 * time.Millisecond, Hooks: h.obs.Hooks(),
			Hedge: &deadline.Hedge{Delay: 30 * time.Millisecond, MaxHedges: 1}}
		v, err := deadline.DoHedged(context.Background(), deadline.New(time.Second), p, hedgeOp(10*time.Millisecond, nil))
		require.NoError(t, err)
		assert.Equal(t, 2, v)
		h.requireAllEnded(t)

		attempts := h.spans("fetch attempt")
		require.Len(t, attempts, 2)
		winner, loser := attempts[0], attempts[1] // in end order
		assert.Equal(t, int64(2), intAttr(t, winner, otelbudget.AttrAttemptNumber))
		assert.True(t, attrs(winner)[otelbudget.AttrAttemptHedge].AsBool())
		assert.True(t, attrs(winner)[otelbudget.AttrAttemptHedgeWinner].AsBool())
		assert.Equal(t, "completed", strAttr(t, winner, otelbudget.AttrAttemptEndedBy))

		assert.Equal(t, int64(1), intAttr(t, loser, otelbudget.AttrAttemptNumber))
		assert.False(t, hasAttr(loser, otelbudget.AttrAttemptHedge), "the first attempt is no hedge")
		assert.False(t, hasAttr(loser, otelbudget.AttrAttemptHedgeWinner))
		assert.Equal(t, "hedge_lost", strAttr(t, loser, otelbudget.AttrAttemptEndedBy))
		assert.NotEqual(t, codes.Error, loser.Status().Code, "losing is not an error")
		assert.False(t, hasAttr(loser, semconv.ErrorTypeKey))
		assert.False(t, hasAttr(loser, otelbudget.AttrAttemptRetryable))
		assert.Equal(t, 40*time.Millisecond, loser.EndTime().Sub(loser.StartTime()))

		calls := h.spans("fetch")
		require.Len(t, calls, 1)
		call := calls[0]
		assert.Equal(t, int64(1), intAttr(t, call, otelbudget.AttrHedges))
		assert.Equal(t, int64(2), intAttr(t, call, otelbudget.AttrAttempts))
		assert.Equal(t, "ok", strAttr(t, call, otelbudget.AttrVerdict))
		assert.Equal(t, int64(0), intAttr(t, call, otelbudget.AttrCeilingTimeouts))
		for _, s := range attempts {
			assert.Equal(t, call.SpanContext().SpanID(), s.Parent().SpanID())
		}
	})
}

// TestHedgeTelemetryAllFail: attempts that overlap and both fail are
// each recorded and ended, with their own outcome, whatever order they end
// in.
func TestHedgeTelemetryAllFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p := deadline.Policy{Name: "fetch", MaxAttempts: 2, Hooks: h.obs.Hooks(),
			Hedge: &deadline.Hedge{Delay: 30 * time.Millisecond, MaxHedges: 1}}
		boom := deadline.Retryable(errors.New("503"))
		op := func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
			time.Sleep(map[int]time.Duration{1: 50 * time.Millisecond, 2: 5 * time.Millisecond}[a.Number])
			return 0, boom
		}
		_, err := deadline.DoHedged(context.Background(), deadline.New(time.Second), p, op)
		require.ErrorIs(t, err, deadline.ErrAttemptsExhausted)
		h.requireAllEnded(t)
		attempts := h.spans("fetch attempt")
		require.Len(t, attempts, 2)
		for _, s := range attempts {
			assert.Equal(t, "error", strAttr(t, s, otelbudget.AttrAttemptEndedBy))
			assert.Equal(t, codes.Error, s.Status().Code)
		}
		assert.Equal(t, int64(2), intAttr(t, attempts[0], otelbudget.AttrAttemptNumber), "the hedge ended first")
		var n uint64
		for _, dp := range h.collect(t)[otelbudget.MetricAttemptDuration].Data.(metricdata.Histogram[float64]).DataPoints {
			n += dp.Count
		}
		assert.Equal(t, uint64(2), n, "both attempts measured, the first ending last")
	})
}

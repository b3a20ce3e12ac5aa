package test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget"
)

// An attempt bound by a learned ceiling says limited_by=learned_ceiling,
// carries the ceiling and the quantile it came from, and counts as a
// ceiling timeout for the verdict; an attempt with the configured ceiling
// carries no quantile.
func TestLearnedCeilingAttributes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		var rec learn.Recorder
		live, err := rec.Live(learn.LiveOptions{
			SuggestOptions: learn.SuggestOptions{Max: time.Second, MinSamples: 100}, Every: 100,
		})
		require.NoError(t, err)
		p := deadline.Policy{Name: "fetch", MaxAttempts: 2, AttemptTimeout: 500 * time.Millisecond, Ceiling: live}
		p.Hooks = deadline.Compose(h.obs.Hooks(), rec.Hooks())
		ctx := context.Background()

		// Before anything is learned: the configured ceiling.
		_, err = deadline.Do(ctx, deadline.New(2*time.Second), p, func(context.Context, deadline.AttemptInfo) (int, error) {
			time.Sleep(40 * time.Millisecond)
			return 1, nil
		})
		require.NoError(t, err)
		for range 99 {
			rec.Record("fetch", deadline.EndedCompleted, 40*time.Millisecond, time.Now())
		}
		lc, ok := live.Ceiling("fetch")
		require.True(t, ok, "learned after 100 samples")

		// Learned: the first attempt hangs and is cut at the learned
		// ceiling (≈ 48ms), the second completes.
		n := 0
		_, err = deadline.Do(ctx, deadline.New(2*time.Second), p, func(ctx context.Context, _ deadline.AttemptInfo) (int, error) {
			if n++; n == 1 {
				<-ctx.Done()
				return 0, ctx.Err()
			}
			return 1, nil
		})
		require.NoError(t, err)
		h.requireAllEnded(t)

		attempts := h.spans("fetch attempt")
		require.Len(t, attempts, 3)
		first, cut, retry := attempts[0], attempts[1], attempts[2]
		assert.Equal(t, "ceiling", strAttr(t, first, otelbudget.AttrAttemptLimitedBy))
		assert.Equal(t, int64(500), intAttr(t, first, otelbudget.AttrAttemptCeilingMs))
		assert.False(t, hasAttr(first, otelbudget.AttrAttemptCeilingQuantile), "no quantile without a learned ceiling")

		for name, s := range map[string]sdktrace.ReadOnlySpan{"cut": cut, "retry": retry} {
			a := attrs(s)
			assert.Equal(t, "learned_ceiling", a[otelbudget.AttrAttemptLimitedBy].AsString(), name)
			assert.Equal(t, 0.99, a[otelbudget.AttrAttemptCeilingQuantile].AsFloat64(), name)
			assert.Equal(t, lc.Ceiling.Round(time.Millisecond).Milliseconds(), a[otelbudget.AttrAttemptCeilingMs].AsInt64(), name)
			assert.Equal(t, a[otelbudget.AttrAttemptCeilingMs], a[otelbudget.AttrAttemptGrantedMs], name)
		}
		assert.InDelta(t, 48, intAttr(t, cut, otelbudget.AttrAttemptCeilingMs), 1)
		assert.Equal(t, "attempt_timeout", strAttr(t, cut, otelbudget.AttrAttemptEndedBy))

		calls := h.spans("fetch")
		require.Len(t, calls, 2)
		assert.Equal(t, int64(1), intAttr(t, calls[1], otelbudget.AttrCeilingTimeouts))
		assert.Equal(t, "ok", strAttr(t, calls[1], otelbudget.AttrVerdict))
	})
}

// A learned ceiling that cut the last attempt makes the call
// operation_too_slow, as a configured one does.
func TestLearnedCeilingVerdict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p := deadline.Policy{Name: "fetch", MaxAttempts: 1, Ceiling: fixedLearned{}, Hooks: h.obs.Hooks()}
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, func(ctx context.Context, _ deadline.AttemptInfo) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		})
		require.ErrorIs(t, err, deadline.ErrCeilingReached)
		h.requireAllEnded(t)
		call := h.spans("fetch")[0]
		assert.Equal(t, "operation_too_slow", strAttr(t, call, otelbudget.AttrVerdict))
		a := h.spans("fetch attempt")[0]
		assert.Equal(t, "learned_ceiling", strAttr(t, a, otelbudget.AttrAttemptLimitedBy))
		assert.Equal(t, 0.9, attrs(a)[otelbudget.AttrAttemptCeilingQuantile].AsFloat64())
	})
}

type fixedLearned struct{}

func (fixedLearned) Ceiling(string) (deadline.LearnedCeiling, bool) {
	return deadline.LearnedCeiling{Ceiling: 80 * time.Millisecond, Quantile: 0.9}, true
}

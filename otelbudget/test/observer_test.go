package test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
)

// sleepOp returns label after dur, or the context's error if it ends first.
func sleepOp(dur time.Duration, label string) func(context.Context, deadline.AttemptInfo) (string, error) {
	return func(ctx context.Context, _ deadline.AttemptInfo) (string, error) {
		t := time.NewTimer(dur)
		defer t.Stop()
		select {
		case <-t.C:
			return label, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// hangsFirst hangs on attempts <= n until its context ends, then takes 10ms.
func hangsFirst(n int) func(context.Context, deadline.AttemptInfo) (string, error) {
	return func(ctx context.Context, a deadline.AttemptInfo) (string, error) {
		if a.Number <= n {
			<-ctx.Done()
			return "", ctx.Err()
		}
		return sleepOp(10*time.Millisecond, "body")(ctx, a)
	}
}

// TestSeedPlan runs the source article's plan (budget 1s, floor 20ms,
// backoff 50..400ms full jitter; search 10ms/250ms/2, fetch hangs first
// /100ms/3, extract 10ms/250ms/2) under a root span and checks the trace.
func TestSeedPlan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		tracer := h.tp.Tracer("test")
		ctx, root := tracer.Start(context.Background(), "run")
		d := deadline.New(time.Second)
		rng := rand.New(rand.NewPCG(7, 7))
		steps := []struct {
			name     string
			op       func(context.Context, deadline.AttemptInfo) (string, error)
			ceiling  time.Duration
			attempts int
		}{
			{"search", sleepOp(10*time.Millisecond, "results"), 250 * time.Millisecond, 2},
			{"fetch", hangsFirst(1), 100 * time.Millisecond, 3},
			{"extract", sleepOp(10*time.Millisecond, "fields"), 250 * time.Millisecond, 2},
		}
		opParents := map[string]trace.SpanContext{}
		for _, s := range steps {
			p := deadline.Policy{
				Name: s.name, MaxAttempts: s.attempts, AttemptTimeout: s.ceiling,
				Floor:   20 * time.Millisecond,
				Backoff: deadline.Backoff{Base: 50 * time.Millisecond, Max: 400 * time.Millisecond},
				Rand:    rng.Int64N, Hooks: h.obs.Hooks(),
			}
			op := s.op
			_, err := deadline.Do(ctx, d, p, func(ctx context.Context, a deadline.AttemptInfo) (string, error) {
				// Whatever the operation starts is a child of the attempt span.
				octx, span := tracer.Start(ctx, "op")
				defer span.End()
				opParents[s.name+string(rune('0'+a.Number))] = trace.SpanContextFromContext(ctx)
				return op(octx, a)
			})
			require.NoError(t, err)
		}
		left := d.Remaining()
		root.End()
		h.requireAllEnded(t)

		calls := map[string]sdktrace.ReadOnlySpan{}
		for _, n := range []string{"search", "fetch", "extract"} {
			s := h.spans(n)
			require.Len(t, s, 1, "one call span for %s", n)
			calls[n] = s[0]
			assert.Equal(t, trace.SpanKindInternal, s[0].SpanKind())
			assert.Equal(t, root.SpanContext().SpanID(), s[0].Parent().SpanID(), "%s is a child of the run", n)
			for k := range attrs(s[0]) {
				assert.NotContains(t, string(k), "http.", "no http.* on a call span")
			}
			assert.Equal(t, int64(1000), intAttr(t, s[0], otelbudget.AttrBudgetMs))
			assert.Equal(t, "ok", strAttr(t, s[0], otelbudget.AttrVerdict))
			assert.Equal(t, "success", strAttr(t, s[0], otelbudget.AttrStopReason))
			assert.Equal(t, codes.Unset, s[0].Status().Code)
		}
		var attempts []sdktrace.ReadOnlySpan
		for _, n := range []string{"search attempt", "fetch attempt", "extract attempt"} {
			attempts = append(attempts, h.spans(n)...)
		}
		require.Len(t, attempts, 4, "search 1, fetch 1, fetch 2, extract 1")
		search1, fetch1, fetch2, extract1 := attempts[0], attempts[1], attempts[2], attempts[3]
		for i, a := range attempts {
			step := strAttr(t, a, otelbudget.AttrStep)
			assert.Equal(t, calls[step].SpanContext().SpanID(), a.Parent().SpanID(), "attempt %d is a child of its call", i)
			assert.Equal(t, trace.SpanKindInternal, a.SpanKind())
			n := intAttr(t, a, otelbudget.AttrAttemptNumber)
			assert.Equal(t, a.SpanContext(), opParents[step+string(rune('0'+n))], "the op runs in the attempt span")
		}
		assert.Equal(t, int64(1), intAttr(t, fetch1, otelbudget.AttrAttemptNumber))
		assert.Equal(t, "attempt_timeout", strAttr(t, fetch1, otelbudget.AttrAttemptEndedBy))
		assert.Equal(t, "ceiling", strAttr(t, fetch1, otelbudget.AttrAttemptLimitedBy))
		assert.Equal(t, int64(100), intAttr(t, fetch1, otelbudget.AttrAttemptGrantedMs))
		assert.Equal(t, int64(100), intAttr(t, fetch1, otelbudget.AttrAttemptCeilingMs))
		assert.True(t, attrs(fetch1)[otelbudget.AttrAttemptRetryable].AsBool())
		assert.Equal(t, "attempt_timeout", strAttr(t, fetch1, semconv.ErrorTypeKey))
		assert.Equal(t, codes.Error, fetch1.Status().Code)
		assert.Equal(t, "policy", strAttr(t, fetch1, otelbudget.AttrBackoffSource))
		assert.Equal(t, int64(2), intAttr(t, fetch2, otelbudget.AttrAttemptNumber))
		assert.False(t, hasAttr(fetch2, semconv.HTTPRequestResendCountKey), "an INTERNAL attempt span is not an HTTP span")
		assert.Equal(t, "completed", strAttr(t, fetch2, otelbudget.AttrAttemptEndedBy))
		assert.Equal(t, codes.Unset, fetch2.Status().Code)
		assert.False(t, hasAttr(fetch2, otelbudget.AttrAttemptRetryable))

		// The virtual clock: every figure follows from the plan.
		backoff := time.Duration(intAttr(t, fetch1, otelbudget.AttrBackoffDelayMs)) * time.Millisecond
		assert.LessOrEqual(t, backoff, 50*time.Millisecond, "first backoff is within its 50ms cap")
		assert.Equal(t, 10*time.Millisecond, search1.EndTime().Sub(search1.StartTime()))
		assert.Equal(t, 100*time.Millisecond, fetch1.EndTime().Sub(fetch1.StartTime()))
		assert.Equal(t, backoff, fetch2.StartTime().Sub(fetch1.EndTime()).Round(time.Millisecond), "the gap between attempts is the backoff")
		assert.Equal(t, int64(1000), intAttr(t, search1, otelbudget.AttrAttemptRemainingMs))
		assert.Equal(t, int64(250), intAttr(t, search1, otelbudget.AttrAttemptGrantedMs))
		assert.Equal(t, int64(990), intAttr(t, calls["search"], otelbudget.AttrRemainingMs))
		assert.Equal(t, int64(990), intAttr(t, calls["fetch"], otelbudget.AttrRemainingAtStartMs))
		assert.Equal(t, int64(990), intAttr(t, fetch1, otelbudget.AttrAttemptRemainingMs))
		assert.Equal(t, 890*time.Millisecond-backoff, time.Duration(intAttr(t, fetch2, otelbudget.AttrAttemptRemainingMs))*time.Millisecond)
		assert.Equal(t, int64(2), intAttr(t, calls["fetch"], otelbudget.AttrAttempts))
		assert.Equal(t, int64(1), intAttr(t, calls["fetch"], otelbudget.AttrCeilingTimeouts))
		assert.Equal(t, 880*time.Millisecond-backoff, time.Duration(intAttr(t, calls["fetch"], otelbudget.AttrRemainingMs))*time.Millisecond)
		assert.Equal(t, intAttr(t, calls["fetch"], otelbudget.AttrRemainingMs), intAttr(t, extract1, otelbudget.AttrAttemptRemainingMs))
		assert.Equal(t, left.Round(time.Millisecond), time.Duration(intAttr(t, calls["extract"], otelbudget.AttrRemainingMs))*time.Millisecond)

		// The backoff is an event on the fetch call span.
		ev := calls["fetch"].Events()
		require.Len(t, ev, 1)
		assert.Equal(t, otelbudget.BackoffEventName, ev[0].Name)
		assert.Equal(t, fetch1.EndTime(), ev[0].Time)
	})
}

func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		d := deadline.New(time.Second)
		p := deadline.Policy{Name: "fetch", MaxAttempts: 3, AttemptTimeout: 100 * time.Millisecond, Floor: 20 * time.Millisecond,
			Backoff: deadline.Backoff{Base: 50 * time.Millisecond, Max: 50 * time.Millisecond, Jitter: deadline.JitterNone}, Hooks: h.obs.Hooks()}
		_, err := deadline.Do(context.Background(), d, p, hangsFirst(1))
		require.NoError(t, err)
		// 1000 - 100 - 50 - 10 = 840ms left; a second call is refused.
		_, err = deadline.Do(context.Background(), deadline.New(10*time.Millisecond), p, hangsFirst(0))
		require.ErrorIs(t, err, deadline.ErrRefused)

		m := h.collect(t)
		require.Contains(t, m, otelbudget.MetricCallDuration)
		assert.Equal(t, "s", m[otelbudget.MetricCallDuration].Unit)
		calls := m[otelbudget.MetricCallDuration].Data.(metricdata.Histogram[float64]).DataPoints
		require.Len(t, calls, 2, "one series per (step, stop reason, verdict)")
		byReason := map[string]metricdata.HistogramDataPoint[float64]{}
		for _, dp := range calls {
			r, _ := dp.Attributes.Value(otelbudget.AttrStopReason)
			byReason[r.AsString()] = dp
			step, _ := dp.Attributes.Value(otelbudget.AttrStep)
			assert.Equal(t, "fetch", step.AsString())
		}
		assert.InDelta(t, 0.160, byReason["success"].Sum, 1e-9, "100ms + 50ms + 10ms")
		refused := byReason["refused"]
		v, _ := refused.Attributes.Value(otelbudget.AttrVerdict)
		assert.Equal(t, "deadline_too_small", v.AsString())

		att := m[otelbudget.MetricAttemptDuration].Data.(metricdata.Histogram[float64]).DataPoints
		byEnd := map[string]float64{}
		for _, dp := range att {
			e, _ := dp.Attributes.Value(otelbudget.AttrAttemptEndedBy)
			byEnd[e.AsString()] = dp.Sum
		}
		assert.InDelta(t, 0.100, byEnd["attempt_timeout"], 1e-9)
		assert.InDelta(t, 0.010, byEnd["completed"], 1e-9)

		n := m[otelbudget.MetricCallAttempts].Data.(metricdata.Histogram[int64]).DataPoints
		var total int64
		for _, dp := range n {
			total += dp.Sum
		}
		assert.Equal(t, int64(2), total, "2 attempts, then 0 for the refused call")

		ref := m[otelbudget.MetricRefusals].Data.(metricdata.Sum[int64])
		assert.True(t, ref.IsMonotonic)
		require.Len(t, ref.DataPoints, 1)
		assert.Equal(t, int64(1), ref.DataPoints[0].Value)

		slack := m[otelbudget.MetricCallSlack].Data.(metricdata.Histogram[float64]).DataPoints
		var sums []float64
		for _, dp := range slack {
			sums = append(sums, dp.Sum)
		}
		assert.ElementsMatch(t, []float64{0.840, 0.010}, roundAll(sums))
	})
}

func roundAll(fs []float64) []float64 {
	out := make([]float64, len(fs))
	for i, f := range fs {
		out[i] = float64(int64(f*1e6+0.5)) / 1e6
	}
	return out
}

// TestSpansEndedOnPanic: a panicking operation still ends the attempt and
// call spans, with Error status.
func TestSpansEndedOnPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p := deadline.Policy{Name: "boom", MaxAttempts: 2, Hooks: h.obs.Hooks()}
		require.PanicsWithValue(t, "kaboom", func() {
			_, _ = deadline.Do(context.Background(), deadline.New(time.Second), p, func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
				time.Sleep(5 * time.Millisecond)
				panic("kaboom")
			})
		})
		h.requireAllEnded(t)
		require.Len(t, h.rec.Ended(), 2)
		att := h.spans("boom attempt")[0]
		assert.Equal(t, "panic", strAttr(t, att, otelbudget.AttrAttemptEndedBy))
		assert.Equal(t, codes.Error, att.Status().Code)
		assert.Equal(t, 5*time.Millisecond, att.EndTime().Sub(att.StartTime()))
		call := h.spans("boom")[0]
		assert.Equal(t, "panic", strAttr(t, call, otelbudget.AttrStopReason))
		assert.Equal(t, "operation_failed", strAttr(t, call, otelbudget.AttrVerdict))
		assert.Equal(t, "panic", strAttr(t, call, semconv.ErrorTypeKey))
		assert.Equal(t, codes.Error, call.Status().Code)
	})
}

// TestCancellationIsNotAnError: a caller's cancellation ends every span
// without Error status; error.type still says why they did not succeed.
func TestCancellationIsNotAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(30*time.Millisecond, cancel)
		p := deadline.Policy{Name: "wait", MaxAttempts: 3, Hooks: h.obs.Hooks()}
		_, err := deadline.Do(ctx, deadline.New(time.Second), p, hangsFirst(3))
		require.ErrorIs(t, err, context.Canceled)
		h.requireAllEnded(t)
		for _, s := range h.rec.Ended() {
			assert.Equal(t, codes.Unset, s.Status().Code, "%s", s.Name())
			assert.Equal(t, "canceled", strAttr(t, s, semconv.ErrorTypeKey), "%s", s.Name())
		}
		assert.Equal(t, "canceled", strAttr(t, h.spans("wait attempt")[0], otelbudget.AttrAttemptEndedBy))
		assert.Equal(t, "canceled", strAttr(t, h.spans("wait")[0], otelbudget.AttrVerdict))
	})
}

// TestUnnamedStep: a policy without a name gives "deadline.call" and
// "deadline.attempt" spans.
func TestUnnamedStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p := deadline.Policy{MaxAttempts: 1, Hooks: h.obs.Hooks()}
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, sleepOp(time.Millisecond, "x"))
		require.NoError(t, err)
		require.Len(t, h.spans("deadline.call"), 1)
		require.Len(t, h.spans("deadline.attempt"), 1)
	})
}

// TestTwoObserversComposed: the hooks work from the context as well as the
// policy, and two observers composed on one call keep their state apart.
func TestTwoObserversComposed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newHarness(t), newHarness(t)
		ctx := deadline.WithHooks(context.Background(), a.obs.Hooks())
		p := deadline.Policy{Name: "both", MaxAttempts: 2, Hooks: b.obs.Hooks()}
		_, err := deadline.Do(ctx, deadline.New(time.Second), p, func(ctx context.Context, at deadline.AttemptInfo) (int, error) {
			if at.Number == 1 {
				return 0, deadline.Retryable(errors.New("flaky"))
			}
			return 1, nil
		})
		require.NoError(t, err)
		for _, h := range []*harness{a, b} {
			h.requireAllEnded(t)
			require.Len(t, h.spans("both"), 1)
			atts := h.spans("both attempt")
			require.Len(t, atts, 2)
			assert.Equal(t, int64(2), intAttr(t, atts[1], otelbudget.AttrAttemptNumber))
			assert.Equal(t, "error", strAttr(t, atts[0], otelbudget.AttrAttemptEndedBy))
		}
	})
}

// TestSampledOut: a call span that is not recording produces no attempt
// spans, and the operation still sees the call's span context.
func TestSampledOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()), sdktrace.WithSpanProcessor(h.rec))
		obs := otelbudget.New(otelbudget.WithTracerProvider(tp), otelbudget.WithMeterProvider(metricnoop.NewMeterProvider()))
		p := deadline.Policy{Name: "quiet", MaxAttempts: 1, Hooks: obs.Hooks()}
		var valid bool
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, func(ctx context.Context, _ deadline.AttemptInfo) (int, error) {
			valid = trace.SpanContextFromContext(ctx).IsValid()
			return 1, nil
		})
		require.NoError(t, err)
		assert.True(t, valid)
		assert.Empty(t, h.rec.Started())
	})
}

// TestNoopProviders: with no-op providers there is nothing to observe, and
// the hooks are nil; with one of them real, they are not.
func TestNoopProviders(t *testing.T) {
	obs := otelbudget.New(otelbudget.WithTracerProvider(tracenoop.NewTracerProvider()), otelbudget.WithMeterProvider(metricnoop.NewMeterProvider()))
	assert.Nil(t, obs.Hooks())
	assert.Nil(t, obs.ClientHooks())
	h := newHarness(t)
	metricsOnly := otelbudget.New(otelbudget.WithTracerProvider(tracenoop.NewTracerProvider()), otelbudget.WithMeterProvider(h.obs.MeterProvider()))
	hooks := metricsOnly.Hooks()
	require.NotNil(t, hooks)
	assert.Nil(t, hooks.CallStart, "no span work without a tracer")
	assert.NotNil(t, hooks.CallEnd)
	assert.Same(t, hooks, metricsOnly.Hooks(), "the same hooks every time")
}

func TestNilOptionsIgnored(t *testing.T) {
	h := newHarness(t)
	obs := otelbudget.New(nil, otelbudget.WithTracerProvider(h.tp), otelbudget.WithTracerProvider(nil), otelbudget.WithMeterProvider(nil))
	_, err := deadline.Do(context.Background(), deadline.New(time.Second), deadline.Policy{Name: "n", MaxAttempts: 1, Hooks: obs.Hooks()},
		func(context.Context, deadline.AttemptInfo) (int, error) { return 1, nil })
	require.NoError(t, err)
	require.Len(t, h.spans("n"), 1, "a nil provider does not replace the one set")
	assert.Equal(t, otelbudget.ScopeName, h.spans("n")[0].InstrumentationScope().Name)
	assert.Equal(t, otelbudget.Version(), h.spans("n")[0].InstrumentationScope().Version)
	assert.NotEmpty(t, otelbudget.Version())
}

package test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
)

var sink int

// sdkProvider is an SDK tracer provider that exports synchronously to a
// no-op exporter: the SDK's full cost per span, nothing kept.
func sdkProvider() *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
}

func benchPolicy() deadline.Policy {
	p := deadline.DefaultPolicy()
	p.Name = "fetch"
	p.AttemptTimeout = time.Minute
	p.Backoff = deadline.Backoff{} // retry at once: the benchmark measures spans, not sleeps
	return p
}

var errBench = deadline.Retryable(errors.New("503"))

// opFlaky fails its first attempt when flaky is set.
func opFlaky(flaky bool) func(context.Context, deadline.AttemptInfo) (int, error) {
	return func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
		if flaky && a.Number == 1 {
			return 0, errBench
		}
		return 1, ctx.Err()
	}
}

func benchObserver(b *testing.B, flaky bool) {
	b.ReportAllocs()
	call := observerCall(flaky)
	for b.Loop() {
		call()
	}
}

// observerCall returns one call of Do observed by the observer on the SDK
// (metrics off).
func observerCall(flaky bool) func() {
	obs := otelbudget.New(otelbudget.WithTracerProvider(sdkProvider()), otelbudget.WithMeterProvider(metricnoop.NewMeterProvider()))
	ctx := context.Background()
	d := deadline.New(time.Hour)
	p := benchPolicy()
	p.Hooks = obs.Hooks()
	op := opFlaky(flaky)
	return func() {
		v, err := deadline.Do(ctx, d, p, op)
		if err != nil {
			panic(err)
		}
		sink += v
	}
}

func runDo(b *testing.B, h *deadline.Hooks, flaky bool) {
	b.ReportAllocs()
	ctx := context.Background()
	d := deadline.New(time.Hour)
	p := benchPolicy()
	p.Hooks = h
	op := opFlaky(flaky)
	for b.Loop() {
		v, err := deadline.Do(ctx, d, p, op)
		if err != nil {
			b.Fatal(err)
		}
		sink += v
	}
}

// BenchmarkObserverSDK is Do with the observer's spans on the SDK (metrics
// off): one call span and one attempt span per call.
func BenchmarkObserverSDK(b *testing.B) { benchObserver(b, false) }

// BenchmarkObserverSDKRetry is the same with a failed first attempt: a call
// span, two attempt spans, a backoff event.
func BenchmarkObserverSDKRetry(b *testing.B) { benchObserver(b, true) }

// benchByHand is the baseline: Do without hooks, and the same spans with
// the same attributes started and ended by hand around and inside it.
func benchByHand(b *testing.B, flaky bool) {
	b.ReportAllocs()
	call := byHandCall(flaky)
	for b.Loop() {
		call()
	}
}

// byHandCall returns one call of Do with no hooks and the observer's spans
// and attributes made by hand.
func byHandCall(flaky bool) func() {
	tracer := sdkProvider().Tracer(otelbudget.ScopeName)
	ctx := context.Background()
	d := deadline.New(time.Hour)
	p := benchPolicy()
	inner := opFlaky(flaky)
	ms := func(d time.Duration) int64 { return d.Round(time.Millisecond).Milliseconds() }
	var prev trace.Span
	return func() {
		start := time.Now()
		cctx, call := tracer.Start(ctx, p.Name, trace.WithSpanKind(trace.SpanKindInternal))
		call.SetAttributes(
			otelbudget.AttrStep.String(p.Name), otelbudget.AttrBudgetMs.Int64(ms(d.Budget())),
			otelbudget.AttrRemainingAtStartMs.Int64(ms(d.Remaining())), otelbudget.AttrFloorMs.Int64(ms(p.Floor)),
			otelbudget.AttrMaxAttempts.Int(p.MaxAttempts), otelbudget.AttrCeilingMs.Int64(ms(p.AttemptTimeout)))
		attempts := 0
		v, err := deadline.Do(cctx, d, p, func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
			attempts = a.Number
			if prev != nil {
				prev.SetAttributes(otelbudget.AttrBackoffDelayMs.Int64(0), otelbudget.AttrBackoffSource.String("policy"), otelbudget.AttrBackoffFits.Bool(true))
				prev.End(trace.WithTimestamp(a.Start))
				call.AddEvent(otelbudget.BackoffEventName, trace.WithAttributes(otelbudget.AttrAttemptNumber.Int(a.Number-1),
					otelbudget.AttrBackoffDelayMs.Int64(0), otelbudget.AttrBackoffSource.String("policy"), otelbudget.AttrBackoffFits.Bool(true)))
				prev = nil
			}
			attrs := []attribute.KeyValue{
				otelbudget.AttrStep.String(a.Name), otelbudget.AttrAttemptNumber.Int(a.Number),
				otelbudget.AttrAttemptGrantedMs.Int64(ms(a.Granted)), otelbudget.AttrAttemptRemainingMs.Int64(ms(a.Remaining)),
				otelbudget.AttrAttemptLimitedBy.String(a.LimitedBy.String()), otelbudget.AttrAttemptCeilingMs.Int64(ms(a.Ceiling)),
			}
			actx, span := tracer.Start(ctx, a.Name+" attempt", trace.WithSpanKind(trace.SpanKindInternal),
				trace.WithTimestamp(a.Start), trace.WithAttributes(attrs...))
			v, err := inner(actx, a)
			if err != nil {
				span.SetStatus(codes.Error, err.Error())
				span.SetAttributes(otelbudget.AttrAttemptEndedBy.String("error"), otelbudget.AttrAttemptRetryable.Bool(true), semconv.ErrorTypeKey.String("_OTHER"))
				prev = span
				return v, err
			}
			span.SetAttributes(otelbudget.AttrAttemptEndedBy.String("completed"))
			span.End(trace.WithTimestamp(a.Start.Add(time.Since(a.Start))))
			return v, err
		})
		if err != nil {
			panic(err)
		}
		call.SetAttributes(
			otelbudget.AttrRemainingMs.Int64(ms(d.Remaining())), otelbudget.AttrAttempts.Int(attempts),
			otelbudget.AttrStopReason.String("success"), otelbudget.AttrVerdict.String(string(otelbudget.VerdictOK)),
			otelbudget.AttrCeilingTimeouts.Int(0), otelbudget.AttrDeadlineCuts.Int(0))
		call.End()
		_ = time.Since(start)
		sink += v
	}
}

// BenchmarkByHandSDK is BenchmarkObserverSDK's baseline.
func BenchmarkByHandSDK(b *testing.B) { benchByHand(b, false) }

// BenchmarkByHandSDKRetry is BenchmarkObserverSDKRetry's baseline.
func BenchmarkByHandSDKRetry(b *testing.B) { benchByHand(b, true) }

// BenchmarkObserverSDKMetrics adds the SDK's metrics (a manual reader) to
// BenchmarkObserverSDK.
func BenchmarkObserverSDKMetrics(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	obs := otelbudget.New(otelbudget.WithTracerProvider(sdkProvider()), otelbudget.WithMeterProvider(mp))
	runDo(b, obs.Hooks(), false)
}

// BenchmarkObserverMetricsOnly is the observer with a no-op tracer and the
// SDK's metrics: no context, no span, pre-built attribute sets.
func BenchmarkObserverMetricsOnly(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	obs := otelbudget.New(otelbudget.WithTracerProvider(tracenoop.NewTracerProvider()), otelbudget.WithMeterProvider(mp))
	runDo(b, obs.Hooks(), false)
}

// BenchmarkDoNoHooks is the engine alone.
func BenchmarkDoNoHooks(b *testing.B) { runDo(b, nil, false) }

// BenchmarkObserverNoop is the observer on no-op providers: it must add no
// allocation to BenchmarkDoNoHooks.
func BenchmarkObserverNoop(b *testing.B) {
	obs := otelbudget.New(otelbudget.WithTracerProvider(tracenoop.NewTracerProvider()), otelbudget.WithMeterProvider(metricnoop.NewMeterProvider()))
	runDo(b, obs.Hooks(), false)
}

// TestNoopAddsNoAllocations holds the no-op claim as a test.
func TestNoopAddsNoAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count")
	}
	obs := otelbudget.New(otelbudget.WithTracerProvider(tracenoop.NewTracerProvider()), otelbudget.WithMeterProvider(metricnoop.NewMeterProvider()))
	ctx := context.Background()
	d := deadline.New(time.Hour)
	p := benchPolicy()
	op := opFlaky(true)
	engine := testing.AllocsPerRun(200, func() { _, _ = deadline.Do(ctx, d, p, op) })
	p.Hooks = obs.Hooks()
	observed := testing.AllocsPerRun(200, func() { _, _ = deadline.Do(ctx, d, p, op) })
	if observed > engine {
		t.Fatalf("observer on no-op providers: %v allocs per call, engine alone %v", observed, engine)
	}
}

// benchOverHand alternates blocks of observed calls and of calls with the
// same spans made by hand, timing each block on the thread's CPU clock, so
// both see the same conditions and time other processes take on a shared
// machine counts for neither. It reports ns per call of each and their
// ratio ("observer/hand", the goal is <= 1.15).
func benchOverHand(b *testing.B, flaky bool) {
	const block = 64
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	obs, hand := observerCall(flaky), byHandCall(flaky)
	var tObs, tHand time.Duration
	var n int
	for b.Loop() {
		t0 := threadCPU()
		for range block {
			obs()
		}
		t1 := threadCPU()
		for range block {
			hand()
		}
		t2 := threadCPU()
		tObs += t1 - t0
		tHand += t2 - t1
		n += block
	}
	b.ReportMetric(float64(tObs)/float64(n), "obs-ns/call")
	b.ReportMetric(float64(tHand)/float64(n), "hand-ns/call")
	b.ReportMetric(float64(tObs)/float64(tHand), "observer/hand")
}

// BenchmarkObserverOverHand is the single-attempt comparison.
func BenchmarkObserverOverHand(b *testing.B) { benchOverHand(b, false) }

// BenchmarkObserverOverHandRetry is the comparison with a failed first
// attempt (a call span, two attempt spans, a backoff event).
func BenchmarkObserverOverHandRetry(b *testing.B) { benchOverHand(b, true) }

package test

import (
	"context"
	"errors"
	"fmt"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
)

// An operation that fails once, retryably: a call span, two attempt spans,
// and the verdict.
//
// The ceiling (5 s) is far above what the attempts take: what ended an
// attempt is decided from the instants, so with a ceiling of 250 ms a
// loaded machine that stalled the first attempt past it made its end
// "attempt_timeout" instead of "error".
func Example_observerHooks() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp), otelbudget.WithMeterProvider(metricnoop.NewMeterProvider()))

	p := deadline.Policy{Name: "search", MaxAttempts: 3, AttemptTimeout: 5 * time.Second, Floor: 20 * time.Millisecond, Hooks: obs.Hooks()}
	v, err := deadline.Do(context.Background(), deadline.New(10*time.Second), p, func(ctx context.Context, a deadline.AttemptInfo) (string, error) {
		if a.Number == 1 {
			return "", deadline.Retryable(errors.New("503 Service Unavailable"))
		}
		return "results", nil
	})
	fmt.Println(v, err)
	for _, s := range rec.Ended() {
		fmt.Printf("%s:", s.Name())
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case otelbudget.AttrAttemptNumber, otelbudget.AttrAttemptGrantedMs, otelbudget.AttrAttemptLimitedBy,
				otelbudget.AttrAttemptEndedBy, semconv.HTTPRequestResendCountKey, otelbudget.AttrBudgetMs,
				otelbudget.AttrAttempts, otelbudget.AttrStopReason, otelbudget.AttrVerdict:
				fmt.Printf(" %s=%s", kv.Key, kv.Value.String())
			}
		}
		fmt.Println()
	}
	// Output:
	// results <nil>
	// search attempt: deadline.attempt.number=1 deadline.attempt.granted_ms=5000 deadline.attempt.limited_by=ceiling deadline.attempt.ended_by=error
	// search attempt: deadline.attempt.number=2 deadline.attempt.granted_ms=5000 deadline.attempt.limited_by=ceiling deadline.attempt.ended_by=completed
	// search: deadline.budget_ms=10000 deadline.attempts=2 deadline.stop_reason=success deadline.verdict=ok
}

// The verdict of a call stopped by a server's Retry-After that did not fit.
func Example_verdictOf() {
	fmt.Println(otelbudget.VerdictOf(deadline.CallResult{Reason: deadline.ReasonRetryAfterTooLong}))
	fmt.Println(otelbudget.VerdictOf(deadline.CallResult{Reason: deadline.ReasonDeadline, CeilingTimeouts: 1}))
	fmt.Println(otelbudget.VerdictOf(deadline.CallResult{Reason: deadline.ReasonDeadline}))
	// Output:
	// throttled
	// operation_too_slow
	// deadline_too_small
}

// A run of two steps under one deadline: the run span records the budget,
// the steps in order, what each spent, its verdict and the outcome.
func Example_startRun() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp), otelbudget.WithMeterProvider(metricnoop.NewMeterProvider()))

	d := deadline.New(time.Second)
	ctx, run := obs.StartRun(context.Background(), "agent run", d)
	ctx = deadline.WithHooks(ctx, obs.Hooks())
	for _, step := range []string{"search", "fetch"} {
		_, _ = deadline.Do(ctx, d, deadline.Policy{Name: step, MaxAttempts: 1}, func(context.Context, deadline.AttemptInfo) (int, error) {
			return 1, nil
		})
	}
	fmt.Println(run.End(nil))
	for _, s := range rec.Ended() {
		if s.Name() != "agent run" {
			continue
		}
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case otelbudget.AttrBudgetMs, otelbudget.AttrRunSteps, otelbudget.AttrRunStepVerdicts, otelbudget.AttrRunOutcome:
				fmt.Printf("%s=%s\n", kv.Key, kv.Value.String())
			}
		}
	}
	// Output:
	// ok
	// deadline.budget_ms=1000
	// deadline.run.outcome=ok
	// deadline.run.steps=["search","fetch"]
	// deadline.run.step_verdicts=["ok","ok"]
}

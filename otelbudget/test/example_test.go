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
func Example_observerHooks() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp), otelbudget.WithMeterProvider(metricnoop.NewMeterProvider()))

	p := deadline.Policy{Name: "search", MaxAttempts: 3, AttemptTimeout: 250 * time.Millisecond, Floor: 20 * time.Millisecond, Hooks: obs.Hooks()}
	v, err := deadline.Do(context.Background(), deadline.New(time.Second), p, func(ctx context.Context, a deadline.AttemptInfo) (string, error) {
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
	// search attempt: deadline.attempt.number=1 deadline.attempt.granted_ms=250 deadline.attempt.limited_by=ceiling deadline.attempt.ended_by=error
	// search attempt: deadline.attempt.number=2 deadline.attempt.granted_ms=250 deadline.attempt.limited_by=ceiling deadline.attempt.ended_by=completed
	// search: deadline.budget_ms=1000 deadline.attempts=2 deadline.stop_reason=success deadline.verdict=ok
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

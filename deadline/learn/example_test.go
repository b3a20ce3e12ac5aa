package learn_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// A recorder fed by the hooks of every call suggests a ceiling per step,
// and a run budget for a plan of steps.
func ExampleRecorder_Suggest() {
	var rec learn.Recorder
	// What the hooks would record: 1000 attempts of "fetch", 10 … 29ms.
	start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	for i := range 1000 {
		rec.Record("fetch", deadline.EndedCompleted, time.Duration(10+i%20)*time.Millisecond, start.Add(time.Duration(i)*time.Second))
	}
	s, err := rec.Suggest("fetch", learn.SuggestOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s)

	p := deadline.DefaultPolicy()
	p.Name = "fetch"
	b, err := rec.SuggestBudget([]deadline.Policy{p}, learn.PlanOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("budget %s, %d attempt(s), success %.3f\n", b.Budget.Round(time.Millisecond), b.Steps[0].Attempts, b.Success)
	// Output:
	// "fetch": ceiling 34.8ms = p99 29ms × 1.2, from 1000 samples 2025-01-01T12:00:00Z to 2025-01-01T12:16:39Z
	// budget 55ms, 1 attempt(s), success 1.000
}

// The live ceiling follows the recorded durations: a policy that takes its
// ceiling from it gets p99 × 1.2 once enough attempts are recorded.
func ExampleRecorder_Live() {
	var rec learn.Recorder
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Min: 10 * time.Millisecond, Max: time.Second}})
	if err != nil {
		fmt.Println(err)
		return
	}
	p := deadline.Policy{Name: "fetch", MaxAttempts: 3, AttemptTimeout: 500 * time.Millisecond, Ceiling: live, Hooks: rec.Hooks()}
	op := func(ctx context.Context, a deadline.AttemptInfo) (deadline.Limit, error) { return a.LimitedBy, nil }

	limit, _ := deadline.Do(context.Background(), deadline.New(time.Second), p, op)
	fmt.Println("before:", limit)
	for range 1000 {
		rec.Record("fetch", deadline.EndedCompleted, 40*time.Millisecond, time.Now())
	}
	limit, _ = deadline.Do(context.Background(), deadline.New(time.Second), p, op)
	lc, _ := live.Ceiling("fetch")
	fmt.Println("after:", limit, lc.Ceiling.Round(time.Millisecond), lc.Quantile)
	// Output:
	// before: ceiling
	// after: learned_ceiling 48ms 0.99
}

// A policy with a learned floor refuses an attempt its step's recent
// traffic says would very likely not complete within its lease, before
// anything is sent; with too few samples it would behave as without it.
func ExampleLive_Completion() {
	var rec learn.Recorder
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Second, MinSamples: 100}})
	if err != nil {
		fmt.Println(err)
		return
	}
	// What the hooks would record: 200 attempts of "fetch", 100 … 299ms.
	for i := range 200 {
		rec.Record("fetch", deadline.EndedCompleted, time.Duration(100+i)*time.Millisecond, time.Now())
	}
	for _, lease := range []time.Duration{50 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		e, ok := live.Completion("fetch", lease)
		fmt.Printf("within %v: %.2f (%d samples, %v)\n", lease, e.P, e.Samples, ok)
	}

	p := deadline.Policy{Name: "fetch", MaxAttempts: 3, Floor: 10 * time.Millisecond, AttemptTimeout: 50 * time.Millisecond, Hooks: rec.Hooks(),
		LearnedFloor: &deadline.LearnedFloor{Estimator: live, Threshold: 0.05}}
	_, err = deadline.Do(context.Background(), deadline.New(time.Second), p,
		func(context.Context, deadline.AttemptInfo) (string, error) { return "sent", nil })
	fmt.Println(err)
	fmt.Println(errors.Is(err, deadline.ErrRefused), errors.Is(err, context.DeadlineExceeded))
	// Output:
	// within 50ms: 0.00 (200 samples, true)
	// within 200ms: 0.52 (200 samples, true)
	// within 400ms: 1.00 (200 samples, true)
	// fetch: refused before attempt 1: a 50ms lease completes 0.0% of the time (200 recent samples)
	// true true
}

// When many answers are fast errors, almost every lease "completes"; the
// estimate that counts only successes tells the leases that would bring
// back a result.
func ExampleLive_Successes() {
	var rec learn.Recorder
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Second, MinSamples: 100}})
	if err != nil {
		fmt.Println(err)
		return
	}
	// 100 attempts answered 503 after 5ms, 100 answered after 100 … 199ms
	// (a lease is read to its sketch bucket: 150ms counts up to ~152ms).
	for i := range 100 {
		rec.Record("fetch", deadline.EndedError, 5*time.Millisecond, time.Now())
		rec.Record("fetch", deadline.EndedCompleted, time.Duration(100+i)*time.Millisecond, time.Now())
	}
	for _, lease := range []time.Duration{50 * time.Millisecond, 150 * time.Millisecond, 400 * time.Millisecond} {
		c, _ := live.Completion("fetch", lease)
		s, _ := live.Successes().Completion("fetch", lease)
		fmt.Printf("within %v: completes %.2f, succeeds %.2f\n", lease, c.P, s.P)
	}
	// Output:
	// within 50ms: completes 0.50, succeeds 0.00
	// within 150ms: completes 0.77, succeeds 0.27
	// within 400ms: completes 1.00, succeeds 0.50
}

// A histogram's buckets out, as an OpenTelemetry exponential histogram at
// learn.Scale (nanoseconds), and back in elsewhere: the rebuilt histogram
// gives the same quantiles.
func ExampleHistogram_Series() {
	at := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	var h learn.Histogram
	for i := range 100 {
		h.Add(deadline.EndedCompleted, time.Duration(20+i)*time.Millisecond, at)
	}
	h.Add(deadline.EndedAttemptTimeout, 150*time.Millisecond, at)
	completed, censored := h.Series()
	fmt.Println("completed:", completed.Total(), "from bucket", completed.Offset, "censored:", censored.Total())

	// Elsewhere: the counters and the series are all it takes.
	back := learn.Histogram{Samples: h.Samples, Successes: h.Successes, CeilingTimeouts: h.CeilingTimeouts,
		First: h.First, Last: h.Last, Max: h.Max, MaxCensored: h.MaxCensored}
	if err := back.SetSeries(completed, censored); err != nil {
		fmt.Println(err)
		return
	}
	p50, _ := back.Quantile(0.5)
	fmt.Println("p50:", p50.Round(time.Millisecond))
	// Output:
	// completed: 100 from bucket 776 censored: 1
	// p50: 69ms
}

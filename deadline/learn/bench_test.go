package learn_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/internal/cputime"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// attempt returns an AttemptInfo and result as Do hands them to AttemptEnd.
func attempt(d time.Duration) (deadline.AttemptInfo, deadline.AttemptResult) {
	return deadline.AttemptInfo{Name: "fetch", Number: 1, Start: time.Now(), Granted: time.Second, LimitedBy: deadline.LimitDeadline},
		deadline.AttemptResult{Duration: d, EndedBy: deadline.EndedCompleted}
}

// Recording an attempt through the hooks allocates nothing, live mode on or
// off.
func TestRecordAllocatesNothing(t *testing.T) {
	var rec learn.Recorder
	end := rec.Hooks().AttemptEnd
	ctx := context.Background()
	a, r := attempt(20 * time.Millisecond)
	end(ctx, a, r) // creates the series
	assert.Zero(t, testing.AllocsPerRun(1000, func() { end(ctx, a, r) }))
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Second}})
	assert.NoError(t, err)
	end(ctx, a, r) // creates the recent histogram
	assert.Zero(t, testing.AllocsPerRun(1000, func() { end(ctx, a, r) }))
	assert.Zero(t, testing.AllocsPerRun(1000, func() { _, _ = live.Ceiling("fetch") }))
}

// BenchmarkRecord is the cost the recorder adds to an attempt: the
// AttemptEnd hook, durations spread over many buckets.
func BenchmarkRecord(b *testing.B) {
	var rec learn.Recorder
	benchRecord(b, &rec)
}

// benchRecord records attempts of durations spread over many buckets into
// rec through its AttemptEnd hook, one per iteration.
func benchRecord(b *testing.B, rec *learn.Recorder) {
	end := rec.Hooks().AttemptEnd
	ctx := context.Background()
	a, r := attempt(0)
	durations := spread()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r.Duration = durations[i&1023]
		i++
		end(ctx, a, r)
	}
}

// BenchmarkRecordParallel records from every P at once into one step.
func BenchmarkRecordParallel(b *testing.B) {
	var rec learn.Recorder
	end := rec.Hooks().AttemptEnd
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		a, r := attempt(0)
		durations := spread()
		i := 0
		for pb.Next() {
			r.Duration = durations[i&1023]
			i++
			end(ctx, a, r)
		}
	})
}

// BenchmarkRecordLive records with the live ceiling on (two histograms,
// and a recomputation every 100 samples).
func BenchmarkRecordLive(b *testing.B) {
	var rec learn.Recorder
	if _, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Second}}); err != nil {
		b.Fatal(err)
	}
	benchRecord(b, &rec)
}

// BenchmarkLiveCeiling is what Do pays per attempt for a live ceiling.
func BenchmarkLiveCeiling(b *testing.B) {
	var rec learn.Recorder
	live, _ := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Second, MinSamples: 1}, Every: 1})
	rec.Record("fetch", deadline.EndedCompleted, time.Millisecond, time.Now())
	b.ReportAllocs()
	for b.Loop() {
		_, _ = live.Ceiling("fetch")
	}
}

// spread returns 1024 durations from 100µs to 102.4ms, over some 320
// buckets; the attempts end at increasing times as they would in Do.
func spread() []time.Duration {
	d := make([]time.Duration, 1024)
	for i := range d {
		d[i] = time.Duration(1+i) * 100 * time.Microsecond
	}
	return d
}

// BenchmarkLiveCompletion is the learned floor's look-up: the estimate for
// one lease, from a step with durations over some 320 buckets.
func BenchmarkLiveCompletion(b *testing.B) {
	var rec learn.Recorder
	live, _ := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Second, MinSamples: 1}})
	for _, d := range spread() {
		rec.Record("fetch", deadline.EndedCompleted, d, time.Now())
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = live.Completion("fetch", 50*time.Millisecond)
	}
}

// BenchmarkLearnedFloor is what the learned floor adds to Do's success
// path: the same call without it (baseline) and with it (learned, its
// estimator a Live answering from some 320 buckets), alternated in blocks
// and timed in the thread's CPU time, so that other processes on a shared
// machine do not enter the comparison. It reports learned/baseline and the
// difference per call, the cost of the check.
func BenchmarkLearnedFloor(b *testing.B) {
	const block = 256
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var rec learn.Recorder
	live, _ := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Second, MinSamples: 1}})
	for _, d := range spread() {
		rec.Record("fetch", deadline.EndedCompleted, d, time.Now())
	}
	ctx := context.Background()
	d := deadline.New(time.Hour)
	op := func(ctx context.Context, _ deadline.AttemptInfo) (int, error) { return 1, ctx.Err() }
	base := deadline.Policy{Name: "fetch", MaxAttempts: 3, AttemptTimeout: time.Minute, Floor: 20 * time.Millisecond}
	learned := base
	learned.LearnedFloor = &deadline.LearnedFloor{Estimator: live, Threshold: 0.05, ProbeShare: 0.05}
	policies := [...]deadline.Policy{base, learned}
	var cpu [len(policies)]time.Duration
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		for i := range policies {
			k := (i + n) % len(policies) // rotate which one goes first
			t0 := cputime.Thread()
			for range block {
				_, _ = deadline.Do(ctx, d, policies[k], op)
			}
			cpu[k] += cputime.Thread() - t0
		}
		n++
	}
	calls := float64(n * block)
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "learned/baseline")
	b.ReportMetric(float64(cpu[0])/calls, "baseline-cpu-ns/call")
	b.ReportMetric(float64(cpu[1]-cpu[0])/calls, "check-cpu-ns/call")
}

// BenchmarkLiveCompletionCPU is BenchmarkLiveCompletion beside
// BenchmarkLiveCeiling's look-up, alternated in blocks and timed in the
// thread's CPU time: the learned floor's estimate against the learned
// ceiling's, which Do already pays per attempt when it has one.
func BenchmarkLiveCompletionCPU(b *testing.B) {
	const block = 1024
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var rec learn.Recorder
	live, _ := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: time.Second, MinSamples: 1}})
	for _, d := range spread() {
		rec.Record("fetch", deadline.EndedCompleted, d, time.Now())
	}
	var sinkP float64
	var sinkC time.Duration
	variants := [...]func(){
		func() { e, _ := live.Completion("fetch", 50*time.Millisecond); sinkP += e.P },
		func() { c, _ := live.Ceiling("fetch"); sinkC += c.Ceiling },
	}
	var cpu [len(variants)]time.Duration
	n := 0
	for b.Loop() {
		for i := range variants {
			k := (i + n) % len(variants)
			t0 := cputime.Thread()
			for range block {
				variants[k]()
			}
			cpu[k] += cputime.Thread() - t0
		}
		n++
	}
	calls := float64(n * block)
	b.ReportMetric(float64(cpu[0])/calls, "completion-cpu-ns/op")
	b.ReportMetric(float64(cpu[1])/calls, "ceiling-cpu-ns/op")
	_ = sinkP + float64(sinkC)
}

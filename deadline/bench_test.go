package deadline_test

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

// sink keeps the compiler from discarding the benchmarked results.
var sink int

// BenchmarkBare is the baseline Do is measured against: what a caller writes
// by hand for one attempt under a deadline.
func BenchmarkBare(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	end := time.Now().Add(time.Hour)
	op := func(ctx context.Context) (int, error) { return 1, ctx.Err() }
	for b.Loop() {
		actx, cancel := context.WithDeadline(ctx, end)
		v, err := op(actx)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		sink += v
	}
}

// BenchmarkDo is Do's success path on the first attempt with no observer.
func BenchmarkDo(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	d := deadline.New(time.Hour)
	p := deadline.DefaultPolicy()
	p.AttemptTimeout = time.Minute
	op := func(ctx context.Context, _ deadline.AttemptInfo) (int, error) { return 1, ctx.Err() }
	for b.Loop() {
		v, err := deadline.Do(ctx, d, p, op)
		if err != nil {
			b.Fatal(err)
		}
		sink += v
	}
}

// BenchmarkDoLogHooks is BenchmarkDo with the slog observer writing text to
// io.Discard at Debug level: the cost of logging every attempt and call.
func BenchmarkDoLogHooks(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	d := deadline.New(time.Hour)
	p := deadline.DefaultPolicy()
	p.AttemptTimeout = time.Minute
	p.Hooks = deadline.LogHooks(slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug})))
	op := func(ctx context.Context, _ deadline.AttemptInfo) (int, error) { return 1, ctx.Err() }
	for b.Loop() {
		v, err := deadline.Do(ctx, d, p, op)
		if err != nil {
			b.Fatal(err)
		}
		sink += v
	}
}

// BenchmarkBackoffDelay is the cost of choosing one jittered sleep.
func BenchmarkBackoffDelay(b *testing.B) {
	b.ReportAllocs()
	bo := deadline.Backoff{Base: 50 * time.Millisecond, Max: 400 * time.Millisecond}
	n := 0
	for b.Loop() {
		n = n%6 + 1
		sink += int(bo.Delay(n, nil))
	}
}

// BenchmarkDoOverBare measures Do against the bare call in alternating
// blocks of 256 calls each on the thread's CPU clock, so that both see the
// same conditions and time stolen by other processes on a shared machine
// counts for neither. It reports the ratio of their CPU times as do/bare (the
// goal is <= 1.2) and each one's CPU ns per call; its own ns/op is the wall
// time of one block pair.
func BenchmarkDoOverBare(b *testing.B) {
	const block = 256
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx := context.Background()
	end := time.Now().Add(time.Hour)
	bareOp := func(ctx context.Context) (int, error) { return 1, ctx.Err() }
	d := deadline.New(time.Hour)
	p := deadline.DefaultPolicy()
	p.AttemptTimeout = time.Minute
	doOp := func(ctx context.Context, _ deadline.AttemptInfo) (int, error) { return 1, ctx.Err() }
	runBare := func() time.Duration {
		t0 := threadCPU()
		for range block {
			actx, cancel := context.WithDeadline(ctx, end)
			v, _ := bareOp(actx)
			cancel()
			sink += v
		}
		return threadCPU() - t0
	}
	runDo := func() time.Duration {
		t0 := threadCPU()
		for range block {
			v, _ := deadline.Do(ctx, d, p, doOp)
			sink += v
		}
		return threadCPU() - t0
	}
	var bare, do time.Duration
	n := 0
	for b.Loop() {
		if n%2 == 1 {
			do += runDo()
			bare += runBare()
		} else {
			bare += runBare()
			do += runDo()
		}
		n++
	}
	b.ReportMetric(float64(do)/float64(bare), "do/bare")
	b.ReportMetric(float64(bare)/float64(n*block), "bare-cpu-ns/call")
	b.ReportMetric(float64(do)/float64(n*block), "do-cpu-ns/call")
}

package deadline_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/internal/cputime"
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

// BenchmarkDoHedged is DoHedged's round with no observer: "first" when the
// first attempt answers before the hedge delay (one goroutine, no hedge),
// "hedge" when it waits for its context and a hedge, started after 1µs,
// wins and cancels it with ErrHedgeLost.
func BenchmarkDoHedged(b *testing.B) {
	ctx := context.Background()
	d := deadline.New(time.Hour)
	for _, c := range []struct {
		name  string
		delay time.Duration
	}{{"first", time.Minute}, {"hedge", time.Microsecond}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			p := deadline.DefaultPolicy()
			p.AttemptTimeout = time.Minute
			p.Hedge = &deadline.Hedge{Delay: c.delay, MaxHedges: 1}
			op := func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
				if c.delay < time.Second && !a.Hedge {
					<-ctx.Done()
					return 0, ctx.Err()
				}
				return 1, nil
			}
			for b.Loop() {
				v, err := deadline.DoHedged(ctx, d, p, op)
				if err != nil {
					b.Fatal(err)
				}
				sink += v
			}
		})
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

// BenchmarkDoOverBare measures Do against the bare call in rotating blocks
// of 256 calls each on the thread's CPU clock, so that all see the same
// conditions and time stolen by other processes on a shared machine counts
// for none. It reports the ratio of their CPU times as do/bare (the goal is
// <= 1.15) and each one's CPU ns per call; its own ns/op is the wall time of
// one round of blocks.
//
// A third variant, floor, is the least any implementation of the lease must
// do for one attempt beyond the bare call: read the monotonic clock (the
// remaining budget), derive the attempt's start and its limit from it,
// build the attempt's context with its cause, fill the AttemptInfo op
// receives, and release the context on every path. floor/bare is how close
// to the bare call the rules allow; do/floor is what Do adds to them
// (validation, the caller's context deadline and hooks, the call's state).
//
// A fourth, contract, is the floor plus what Do's contract asks before any
// attempt (the arguments checked, the caller's context deadline, context
// hooks and cancellation looked up), still without a retry loop or its
// state: contract/bare is the least a Do that keeps its contract can cost.
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
	variants := [...]func(){
		func() {
			actx, cancel := context.WithDeadline(ctx, end)
			v, _ := bareOp(actx)
			cancel()
			sink += v
		},
		func() {
			v, _ := floorAttempt(ctx, end, p.AttemptTimeout, doOp)
			sink += v
		},
		func() {
			v, _ := deadline.Do(ctx, d, p, doOp)
			sink += v
		},
		func() {
			v, _ := contractAttempt(ctx, d, &p, doOp)
			sink += v
		},
	}
	var cpu [len(variants)]time.Duration
	n := 0
	for b.Loop() {
		for i := range variants {
			k := (i + n) % len(variants) // rotate which one goes first
			t0 := cputime.Thread()
			for range block {
				variants[k]()
			}
			cpu[k] += cputime.Thread() - t0
		}
		n++
	}
	bare, floor, do := float64(cpu[0]), float64(cpu[1]), float64(cpu[2])
	b.ReportMetric(float64(cpu[3])/bare, "contract/bare")
	b.ReportMetric(do/bare, "do/bare")
	b.ReportMetric(floor/bare, "floor/bare")
	b.ReportMetric(do/floor, "do/floor")
	b.ReportMetric(bare/float64(n*block), "bare-cpu-ns/call")
	b.ReportMetric(do/float64(n*block), "do-cpu-ns/call")
}

// errFloorCeiling is floorAttempt's cause.
var errFloorCeiling = errors.New("ceiling reached")

// floorAttempt is BenchmarkDoOverBare's floor: one attempt under a ceiling
// lease with nothing else of Do (no validation, no refusal, no hooks, no
// state for a retry).
//
//go:noinline
func floorAttempt[T any](ctx context.Context, end time.Time, ceiling time.Duration, op func(context.Context, deadline.AttemptInfo) (T, error)) (T, error) {
	remaining := time.Until(end)
	start := end.Add(-remaining)
	actx, cancel := context.WithDeadlineCause(ctx, start.Add(ceiling), errFloorCeiling)
	defer cancel()
	return op(actx, deadline.AttemptInfo{Number: 1, Start: start, Ceiling: ceiling, Granted: ceiling, Remaining: remaining, LimitedBy: deadline.LimitCeiling})
}

// contractAttempt is floorAttempt plus what Do's contract asks before any
// attempt: its arguments checked, the caller's context deadline and hooks
// looked up, and the caller's cancellation.
//
//go:noinline
func contractAttempt[T any](ctx context.Context, d deadline.Deadline, p *deadline.Policy, op func(context.Context, deadline.AttemptInfo) (T, error)) (T, error) {
	var zero T
	if ctx == nil || d.IsZero() || op == nil || p.MaxAttempts < 1 || p.AttemptTimeout < 0 || p.Floor < 0 || p.Backoff.Base < 0 || p.Backoff.Max < p.Backoff.Base || p.Backoff.Jitter > deadline.JitterNone || p.Hedge != nil {
		return zero, errFloorCeiling
	}
	end := d.End()
	if t, ok := ctx.Deadline(); ok && t.Before(end) {
		end = t
	}
	if deadline.ContextHooks(ctx) != nil || ctx.Err() != nil {
		return zero, errFloorCeiling
	}
	remaining := time.Until(end)
	if remaining <= p.Floor {
		return zero, errFloorCeiling
	}
	start := end.Add(-remaining)
	actx, cancel := context.WithDeadlineCause(ctx, start.Add(p.AttemptTimeout), errFloorCeiling)
	defer cancel()
	return op(actx, deadline.AttemptInfo{Name: p.Name, Number: 1, Start: start, Ceiling: p.AttemptTimeout, Granted: p.AttemptTimeout, Remaining: remaining, LimitedBy: deadline.LimitCeiling})
}

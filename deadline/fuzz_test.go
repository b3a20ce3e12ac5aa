package deadline_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

// FuzzBackoffDelay checks that any backoff, attempt number and random
// source, however wrong its draws, gives a delay within [0, Max] and never
// panics, and that a policy with an invalid backoff is rejected with a
// PolicyError.
func FuzzBackoffDelay(f *testing.F) {
	f.Add(int64(50*time.Millisecond), int64(400*time.Millisecond), uint8(0), 1, int64(0))
	f.Add(int64(50*time.Millisecond), int64(400*time.Millisecond), uint8(1), 9, int64(1<<62))
	f.Add(int64(1), int64(1<<62), uint8(2), 1<<40, int64(-1))
	f.Add(int64(0), int64(0), uint8(0), 0, int64(0)) // the zero Backoff
	f.Add(int64(-1), int64(5), uint8(3), -3, int64(7))
	f.Add(int64(1<<62), int64(1<<63-1), uint8(0), 64, int64(1<<63-1))
	f.Fuzz(func(t *testing.T, base, maxDelay int64, jitter uint8, n int, draw int64) {
		b := deadline.Backoff{Base: time.Duration(base), Max: time.Duration(maxDelay), Jitter: deadline.Jitter(jitter)}
		p := deadline.Policy{MaxAttempts: 1, Backoff: b}
		if err := p.Validate(); err != nil {
			if _, ok := errors.AsType[*deadline.PolicyError](err); !ok || !errors.Is(err, deadline.ErrInvalidPolicy) {
				t.Fatalf("Validate(%+v) = %v, want a *PolicyError", b, err)
			}
			return
		}
		d := b.Delay(n, func(bound int64) int64 {
			if bound < 1 {
				t.Fatalf("Rand called with bound %d", bound)
			}
			return draw
		})
		if d < 0 || d > b.Max {
			t.Fatalf("Delay(%d) of %+v = %v, want within [0, %v]", n, b, d, b.Max)
		}
	})
}

// FuzzDo runs Do on virtual time over arbitrary policies, budgets and
// attempt outcomes. It never panics; an invalid policy is a PolicyError and
// op is never called; every grant is > 0, <= the ceiling (when set) and <=
// remaining - floor; every sleep is within [0, Backoff.Max] (or exactly the
// Retry-After asked) and ends before the budget's floor; attempts never exceed
// MaxAttempts.
func FuzzDo(f *testing.F) {
	ms := int64(time.Millisecond)
	const z = int64(0)
	f.Add(1000*ms, 20*ms, 250*ms, 50*ms, 400*ms, uint8(0), int8(3), uint8(0b010), z, uint64(7))
	f.Add(300*ms, 20*ms, 100*ms, 50*ms, 400*ms, uint8(1), int8(5), uint8(0xff), z, uint64(1))
	f.Add(10*ms, 20*ms, z, z, z, uint8(2), int8(2), uint8(0), z, uint64(2))
	f.Add(1000*ms, z, z, 10*ms, 10*ms, uint8(2), int8(4), uint8(0), 100*ms, uint64(3))
	f.Add(1000*ms, 20*ms, z, z, z, uint8(0), int8(2), uint8(0), 5000*ms, uint64(4))
	f.Add(-ms, -ms, -ms, -ms, -ms, uint8(9), int8(0), uint8(0), -ms, uint64(5))
	f.Add(int64(1<<62), z, int64(1<<62), int64(1<<61), int64(1<<62), uint8(0), int8(3), uint8(0b1), z, uint64(6))
	f.Fuzz(func(t *testing.T, budget, floor, ceiling, base, maxDelay int64, jitter uint8, attempts int8, hangs uint8, retryAfter int64, seed uint64) {
		p := deadline.Policy{
			Name: "fuzz", MaxAttempts: int(attempts),
			AttemptTimeout: time.Duration(ceiling), Floor: time.Duration(floor),
			Backoff: deadline.Backoff{Base: time.Duration(base), Max: time.Duration(maxDelay), Jitter: deadline.Jitter(jitter)},
			Rand:    rand.New(rand.NewPCG(seed, seed)).Int64N,
		}
		synctest.Test(t, func(t *testing.T) {
			d := deadline.New(time.Duration(budget))
			var (
				calls   int
				lastEnd time.Time
				pending *deadline.BackoffInfo
			)
			p.Hooks = &deadline.Hooks{
				AttemptEnd: func(context.Context, deadline.AttemptInfo, deadline.AttemptResult) { lastEnd = time.Now() },
				Backoff: func(_ context.Context, b deadline.BackoffInfo) {
					switch b.Source {
					case deadline.SourcePolicy:
						if b.Delay < 0 || b.Delay > p.Backoff.Max {
							t.Errorf("backoff %v outside [0, %v]", b.Delay, p.Backoff.Max)
						}
					case deadline.SourceRetryAfter:
						if b.Delay != b.RetryAfter || b.Delay != max(time.Duration(retryAfter), 0) {
							t.Errorf("Retry-After %v changed to %v", b.RetryAfter, b.Delay)
						}
					}
					if b.Fits && b.Delay > 0 && b.Delay >= b.Remaining-p.Floor {
						t.Errorf("a sleep of %v fits with %v left above a %v floor", b.Delay, b.Remaining, p.Floor)
					}
					pending = &b
				},
			}
			op := func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
				calls++
				now := time.Now()
				if pending != nil {
					if slept := now.Sub(lastEnd); slept != pending.Delay {
						t.Errorf("slept %v before attempt %d, chose %v", slept, a.Number, pending.Delay)
					}
					pending = nil
				}
				if a.Granted <= 0 {
					t.Errorf("attempt %d granted %v", a.Number, a.Granted)
				}
				if p.AttemptTimeout > 0 && a.Granted > p.AttemptTimeout {
					t.Errorf("attempt %d granted %v above the %v ceiling", a.Number, a.Granted, p.AttemptTimeout)
				}
				if left := time.Until(d.End()); a.Remaining != left || a.Granted > left-p.Floor {
					t.Errorf("attempt %d granted %v with %v (reported %v) left and a %v floor", a.Number, a.Granted, left, a.Remaining, p.Floor)
				}
				if dl, ok := ctx.Deadline(); !ok || !dl.Equal(a.Start.Add(a.Granted)) {
					t.Errorf("attempt %d context ends at %v, want %v", a.Number, dl, a.Start.Add(a.Granted))
				}
				if hangs&(1<<(min(a.Number, 8)-1)) != 0 {
					<-ctx.Done()
					return 0, ctx.Err()
				}
				err := deadline.Retryable(errFlaky)
				if retryAfter != 0 {
					err = deadline.RetryAfter(err, time.Duration(retryAfter))
				}
				return 0, err
			}
			_, err := deadline.Do(context.Background(), d, p, op)
			if verr := p.Validate(); verr != nil {
				if !errors.Is(err, deadline.ErrInvalidPolicy) || calls != 0 {
					t.Fatalf("invalid policy: Do returned %v after %d calls", err, calls)
				}
				return
			}
			se, ok := errors.AsType[*deadline.StopError](err)
			if !ok {
				t.Fatalf("Do returned %v, want a *StopError", err)
			}
			if se.Attempts != calls || calls > p.MaxAttempts {
				t.Fatalf("StopError.Attempts = %d, op ran %d times, MaxAttempts %d", se.Attempts, calls, p.MaxAttempts)
			}
			if se.Reason.Budget() != errors.Is(err, context.DeadlineExceeded) && !errors.Is(se.Last, context.DeadlineExceeded) {
				t.Fatalf("%v: budget reason %v but errors.Is(DeadlineExceeded) = %v", err, se.Reason, errors.Is(err, context.DeadlineExceeded))
			}
		})
	})
}

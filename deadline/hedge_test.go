package deadline_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
)

// hedgePolicy hedges after delay with at most hedges in flight beside the
// first attempt.
func hedgePolicy(attempts int, delay time.Duration, hedges int, rec *recorder) deadline.Policy {
	return deadline.Policy{
		Name: "step", MaxAttempts: attempts, Hooks: rec.hooks(""),
		Hedge: &deadline.Hedge{Delay: delay, MaxHedges: hedges},
	}
}

// sleepOr sleeps d, or returns ctx's error if it ends first.
func sleepOr(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// byNumber returns an op that runs steps[a.Number-1], recording each
// attempt's info and, once it returns, its context's cause.
func byNumber(l *attemptLog, steps ...func(ctx context.Context, a deadline.AttemptInfo) (int, error)) func(context.Context, deadline.AttemptInfo) (int, error) {
	return func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
		l.record(ctx, a)
		v, err := steps[a.Number-1](ctx, a)
		return v, err
	}
}

// slow returns the attempt's number after d, or the context's error.
func slow(d time.Duration) func(context.Context, deadline.AttemptInfo) (int, error) {
	return func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
		if err := sleepOr(ctx, d); err != nil {
			return 0, err
		}
		return a.Number, nil
	}
}

func TestHedgeStartsAtTheDelayAndTheFirstSuccessWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		var l attemptLog
		var loserCause atomic.Value
		start := time.Now()
		v, err := deadline.DoHedged(context.Background(), deadline.New(time.Second), hedgePolicy(3, 30*time.Millisecond, 1, rec),
			byNumber(&l,
				func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
					<-ctx.Done()
					loserCause.Store(context.Cause(ctx))
					return 0, ctx.Err()
				},
				slow(10*time.Millisecond)))
		require.NoError(t, err)
		assert.Equal(t, 2, v, "the hedge's value")
		assert.Equal(t, 40*time.Millisecond, time.Since(start), "hedge at 30ms, done 10ms later")
		require.Len(t, l.infos, 2)
		assert.False(t, l.infos[0].Hedge)
		assert.True(t, l.infos[1].Hedge)
		assert.Equal(t, 30*time.Millisecond, l.starts[1].Sub(l.starts[0]))
		assert.Equal(t, 970*time.Millisecond, l.infos[1].Granted, "a lease of its own from the shared deadline")
		assert.Equal(t, deadline.ErrHedgeLost, loserCause.Load())
		assert.ErrorIs(t, deadline.ErrHedgeLost, context.Canceled)
		assert.Equal(t, []string{"CallStart", "AttemptStart 1", "AttemptStart 2", "AttemptEnd 2 completed", "AttemptEnd 1 hedge_lost", "CallEnd success"}, rec.events)
		require.Len(t, rec.ends, 2)
		assert.True(t, rec.ends[0].HedgeWinner)
		assert.False(t, rec.ends[1].HedgeWinner)
		assert.Equal(t, 40*time.Millisecond, rec.ends[1].Duration)
		require.Len(t, rec.calls, 1)
		c := rec.calls[0]
		assert.Equal(t, 2, c.Attempts)
		assert.Equal(t, 1, c.Hedges)
		assert.Zero(t, c.CeilingTimeouts)
		assert.Zero(t, c.DeadlineCuts)
		assert.Equal(t, deadline.VerdictOK, deadline.VerdictOf(c))
	})
}

// The winner's context is live through its AttemptEnd and then released
// on its own: what op left running sees context.Canceled as its cause, not
// ErrHedgeLost, which only the losers get.
func TestHedgeWinnerReleasedNotLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var winner, loser context.Context
		var errAtEnd error
		p := hedgePolicy(3, 30*time.Millisecond, 1, &recorder{})
		p.Hooks = &deadline.Hooks{AttemptEnd: func(ctx context.Context, a deadline.AttemptInfo, r deadline.AttemptResult) {
			if r.EndedBy == deadline.EndedCompleted {
				errAtEnd = ctx.Err()
			}
		}}
		v, err := deadline.DoHedged(context.Background(), deadline.New(time.Second), p,
			func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
				if !a.Hedge {
					loser = ctx
					<-ctx.Done()
					return 0, ctx.Err()
				}
				winner = ctx
				return a.Number, nil
			})
		require.NoError(t, err)
		assert.Equal(t, 2, v)
		assert.NoError(t, errAtEnd, "the winner's context during its AttemptEnd")
		assert.Equal(t, context.Canceled, context.Cause(winner))
		assert.Equal(t, deadline.ErrHedgeLost, context.Cause(loser))
		assert.ErrorIs(t, loser.Err(), context.Canceled)
	})
}

func TestHedgeNotNeededWhenTheAttemptIsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		v, err := deadline.DoHedged(context.Background(), deadline.New(time.Second), hedgePolicy(3, 30*time.Millisecond, 2, rec), slow(29*time.Millisecond))
		require.NoError(t, err)
		assert.Equal(t, 1, v)
		assert.Equal(t, []string{"CallStart", "AttemptStart 1", "AttemptEnd 1 completed", "CallEnd success"}, rec.events)
		assert.False(t, rec.ends[0].HedgeWinner, "no other attempt ran")
		assert.Zero(t, rec.calls[0].Hedges)
	})
}

// A loser whose context ended at its limit, not by the hedge, would be too
// slow: the loser here carries a ceiling it never reaches.
func TestHedgeLoserIsNotTooSlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		p := hedgePolicy(3, 30*time.Millisecond, 1, rec)
		p.AttemptTimeout = 200 * time.Millisecond
		v, err := deadline.DoHedged(context.Background(), deadline.New(time.Second), p, byNumber(&attemptLog{}, hang, slow(50*time.Millisecond)))
		require.NoError(t, err)
		assert.Equal(t, 2, v)
		c := rec.calls[0]
		assert.Zero(t, c.CeilingTimeouts, "the loser was canceled, not slow")
		assert.Zero(t, c.DeadlineCuts)
		assert.Equal(t, deadline.VerdictOK, deadline.VerdictOf(c))
		// Had the call failed afterwards, the verdict would not be
		// operation_too_slow either: only a reached ceiling counts.
		c.Reason = deadline.ReasonExhausted
		assert.Equal(t, deadline.VerdictFailed, deadline.VerdictOf(c))
	})
}

// No hedge starts at or below the floor: the first attempt here ignores its
// context and overruns its lease.
func TestHedgeNotBelowTheFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		p := hedgePolicy(5, 30*time.Millisecond, 3, rec)
		p.Floor = 50 * time.Millisecond
		p.Retryable = func(error) bool { return false }
		var l attemptLog
		ignore := func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
			time.Sleep(80 * time.Millisecond)
			return 0, errFatal
		}
		_, err := deadline.DoHedged(context.Background(), deadline.New(100*time.Millisecond), p, byNumber(&l, ignore, ignore, ignore))
		require.Error(t, err)
		// At 30ms 70ms remain (> floor): one hedge, granted 20ms. At 60ms
		// only 40ms remain: none.
		require.Len(t, l.infos, 2)
		assert.Equal(t, 20*time.Millisecond, l.infos[1].Granted)
		assert.Equal(t, 1, rec.calls[0].Hedges)
	})
}

func TestHedgeCountsAgainstMaxAttemptsAndMaxHedges(t *testing.T) {
	for _, tc := range []struct {
		name              string
		attempts, hedges  int
		started, inFlight int
	}{
		{"MaxAttempts binds", 2, 5, 2, 2},
		{"MaxHedges binds", 6, 2, 3, 3},
		{"one hedge at a time", 6, 1, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &recorder{}
				var now, most atomic.Int32
				var l attemptLog
				op := func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
					l.record(ctx, a)
					n := now.Add(1)
					defer now.Add(-1)
					for {
						m := most.Load()
						if n <= m || most.CompareAndSwap(m, n) {
							break
						}
					}
					if err := sleepOr(ctx, 100*time.Millisecond); err != nil {
						return 0, err
					}
					return a.Number, nil
				}
				v, err := deadline.DoHedged(context.Background(), deadline.New(time.Second), hedgePolicy(tc.attempts, 10*time.Millisecond, tc.hedges, rec), op)
				require.NoError(t, err)
				assert.Equal(t, 1, v, "the first attempt finishes first")
				assert.Len(t, l.infos, tc.started)
				assert.EqualValues(t, tc.inFlight, most.Load())
				assert.Equal(t, tc.started, rec.calls[0].Attempts)
				assert.Equal(t, tc.started-1, rec.calls[0].Hedges)
			})
		})
	}
}

// Hedges draw on the retry budget: a denied hedge does not start.
func TestHedgeDrawsOnTheRetryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(t, deadline.WithRetryRatio(0), deadline.WithMinRetryRate(1), deadline.WithRetryWindow(time.Second))
		rec := &recorder{}
		p := hedgePolicy(5, 10*time.Millisecond, 3, rec)
		p.RetryBudget = b
		var l attemptLog
		_, err := deadline.DoHedged(context.Background(), deadline.New(time.Second), p, func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
			l.record(ctx, a)
			return a.Number, sleepOr(ctx, 100*time.Millisecond)
		})
		require.NoError(t, err)
		assert.Len(t, l.infos, 2, "one token: one hedge")
		assert.Equal(t, 0, b.Balance())
	})
}

// A failure while another attempt runs does not end the call; when all the
// round's attempts fail, the call retries as usual.
func TestHedgeFailureWaitsForTheOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		var l attemptLog
		v, err := deadline.DoHedged(context.Background(), deadline.New(time.Second), hedgePolicy(3, 30*time.Millisecond, 1, rec), byNumber(&l,
			after(50*time.Millisecond, errFatal),
			slow(40*time.Millisecond)))
		require.NoError(t, err)
		assert.Equal(t, 2, v)
		assert.Equal(t, []string{"CallStart", "AttemptStart 1", "AttemptStart 2", "AttemptEnd 1 error", "AttemptEnd 2 completed", "CallEnd success"}, rec.events)

		rec = &recorder{}
		l = attemptLog{}
		flaky := after(50*time.Millisecond, deadline.Retryable(errFlaky))
		start := time.Now()
		v, err = deadline.DoHedged(context.Background(), deadline.New(time.Second), hedgePolicy(3, 30*time.Millisecond, 1, rec), byNumber(&l, flaky, flaky, slow(5*time.Millisecond)))
		require.NoError(t, err)
		assert.Equal(t, 3, v)
		assert.Equal(t, 85*time.Millisecond, time.Since(start), "the retry starts when the hedge failed at 80ms")
		assert.Equal(t, []string{"CallStart", "AttemptStart 1", "AttemptStart 2", "AttemptEnd 1 error", "AttemptEnd 2 error", "Backoff 2 policy", "AttemptStart 3", "AttemptEnd 3 completed", "CallEnd success"}, rec.events)
	})
}

// A loser that returns a value anyway hands it to Discard before Do returns.
func TestHedgeDiscardsALateSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var discarded []any
		p := hedgePolicy(3, 30*time.Millisecond, 1, &recorder{})
		p.Hedge.Discard = func(v any) { mu.Lock(); discarded = append(discarded, v); mu.Unlock() }
		ignore := func(context.Context, deadline.AttemptInfo) (int, error) {
			time.Sleep(100 * time.Millisecond)
			return 1, nil
		}
		start := time.Now()
		v, err := deadline.DoHedged(context.Background(), deadline.New(time.Second), p, byNumber(&attemptLog{}, ignore, slow(10*time.Millisecond)))
		require.NoError(t, err)
		assert.Equal(t, 2, v)
		assert.Equal(t, 100*time.Millisecond, time.Since(start), "Do waits for its attempts")
		assert.Equal(t, []any{1}, discarded)
	})
}

func TestHedgeCanceledByTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		_, err := deadline.DoHedged(ctx, deadline.New(time.Second), hedgePolicy(3, 30*time.Millisecond, 1, rec), hang)
		assert.Equal(t, deadline.ReasonCanceled, stopErr(err).Reason)
		require.Len(t, rec.events, 6)
		assert.Equal(t, []string{"CallStart", "AttemptStart 1", "AttemptStart 2"}, rec.events[:3])
		// Both end at the same instant, in the order their goroutines
		// report.
		assert.ElementsMatch(t, []string{"AttemptEnd 1 canceled", "AttemptEnd 2 canceled"}, rec.events[3:5])
		assert.Equal(t, "CallEnd canceled", rec.events[5])
	})
}

func TestHedgeDelaySource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l attemptLog
		p := hedgePolicy(3, 30*time.Millisecond, 1, &recorder{})
		p.Hedge.DelaySource = delaySource{"step": 12 * time.Millisecond}
		_, err := deadline.DoHedged(context.Background(), deadline.New(time.Second), p, byNumber(&l, slow(100*time.Millisecond), slow(100*time.Millisecond)))
		require.NoError(t, err)
		require.Len(t, l.infos, 2)
		assert.Equal(t, 12*time.Millisecond, l.starts[1].Sub(l.starts[0]))
	})
}

type delaySource map[string]time.Duration

func (s delaySource) HedgeDelay(step string) (time.Duration, bool) {
	d, ok := s[step]
	return d, ok
}

// A panic in a hedge goes on once every attempt has returned and been
// closed.
func TestHedgePanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		boom := func(context.Context, deadline.AttemptInfo) (int, error) {
			time.Sleep(5 * time.Millisecond)
			panic("boom")
		}
		assert.PanicsWithValue(t, "boom", func() {
			_, _ = deadline.DoHedged(context.Background(), deadline.New(time.Second), hedgePolicy(3, 30*time.Millisecond, 1, rec), byNumber(&attemptLog{}, hang, boom))
		})
		assert.Equal(t, []string{"CallStart", "AttemptStart 1", "AttemptStart 2", "AttemptEnd 2 panic", "AttemptEnd 1 panic", "CallEnd panic"}, rec.events)
	})
}

func TestHedgeBadInput(t *testing.T) {
	for _, tc := range []struct {
		h     deadline.Hedge
		field string
	}{
		{deadline.Hedge{Delay: time.Millisecond, MaxHedges: -1}, "Policy.Hedge.MaxHedges"},
		{deadline.Hedge{MaxHedges: 1}, "Policy.Hedge.Delay"},
		{deadline.Hedge{Delay: -time.Millisecond, MaxHedges: 1}, "Policy.Hedge.Delay"},
		{deadline.Hedge{Delay: -time.Millisecond}, "Policy.Hedge.Delay"},
	} {
		p := deadline.Policy{MaxAttempts: 2, Hedge: &tc.h}
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, ok)
		pe, isPE := errors.AsType[*deadline.PolicyError](err)
		require.True(t, isPE, "%+v: %v", tc.h, err)
		assert.Equal(t, tc.field, pe.Field, "%+v", tc.h)
		assert.Equal(t, err, p.Validate())
	}
	for _, h := range []*deadline.Hedge{nil, {}, {Delay: time.Millisecond}} {
		assert.NoError(t, deadline.Policy{MaxAttempts: 1, Hedge: h}.Validate(), "hedging off")
	}
}

// Do refuses a policy that hedges, naming DoHedged: its attempts would run
// on goroutines of their own, which would make every caller's op escape.
func TestDoRefusesAHedgingPolicy(t *testing.T) {
	p := deadline.Policy{MaxAttempts: 2, Hedge: &deadline.Hedge{Delay: time.Millisecond, MaxHedges: 1}}
	called := false
	_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, func(context.Context, deadline.AttemptInfo) (int, error) {
		called = true
		return 1, nil
	})
	pe, isPE := errors.AsType[*deadline.PolicyError](err)
	require.True(t, isPE, "%v", err)
	assert.Equal(t, "Policy.Hedge", pe.Field)
	assert.Contains(t, err.Error(), "DoHedged")
	assert.False(t, called)
}

// A closure passed to Do stays on the caller's stack: Do allocates no more
// for an op that captures variables than for one that does not. (DoHedged,
// whose attempts run on goroutines, makes its op escape; Do must not.)
func TestDoOpDoesNotEscape(t *testing.T) {
	d := deadline.New(time.Hour)
	p := deadline.Policy{MaxAttempts: 2}
	plain := testing.AllocsPerRun(200, func() { _, _ = deadline.Do(context.Background(), d, p, ok) })
	x, y := 1, "captured"
	capturing := testing.AllocsPerRun(200, func() {
		_, _ = deadline.Do(context.Background(), d, p, func(context.Context, deadline.AttemptInfo) (int, error) {
			return x + len(y), nil
		})
	})
	assert.Equal(t, plain, capturing)
}

// A zero Hedge is off: Do allocates nothing more than without one.
func TestHedgeOffAllocatesNothing(t *testing.T) {
	p := deadline.Policy{MaxAttempts: 2, Hedge: &deadline.Hedge{}}
	d := deadline.New(time.Hour)
	allocs := testing.AllocsPerRun(100, func() { _, _ = deadline.Do(context.Background(), d, p, ok) })
	p.Hedge = nil
	assert.Equal(t, testing.AllocsPerRun(100, func() { _, _ = deadline.Do(context.Background(), d, p, ok) }), allocs)
}

func TestLogHooksHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		p := hedgePolicy(3, 30*time.Millisecond, 1, &recorder{})
		p.Hooks = deadline.LogHooks(textLogger(&buf, slog.LevelDebug))
		_, err := deadline.DoHedged(context.Background(), deadline.New(time.Second), p, byNumber(&attemptLog{}, hang, slow(10*time.Millisecond)))
		require.NoError(t, err)
		assert.Equal(t, `level=DEBUG msg="deadline attempt" step=step attempt=2 granted=970ms limited_by=deadline remaining=970ms duration=10ms ended_by=completed hedge=true hedge_winner=true
level=DEBUG msg="deadline attempt" step=step attempt=1 granted=1s limited_by=deadline remaining=1s duration=40ms ended_by=hedge_lost
level=INFO msg="deadline call" step=step reason=success verdict=ok attempts=2 duration=40ms remaining=960ms hedges=1
`, buf.String())
	})
}

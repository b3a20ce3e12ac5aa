package deadline_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sleepOp returns after dur, or with the context's error if it ends first.
func sleepOp(dur time.Duration, label string) func(context.Context, deadline.AttemptInfo) (string, error) {
	return func(ctx context.Context, a deadline.AttemptInfo) (string, error) {
		select {
		case <-time.After(dur):
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

type step struct {
	name     string
	op       func(context.Context, deadline.AttemptInfo) (string, error)
	ceiling  time.Duration
	attempts int
}

type grant struct {
	step    string
	attempt int
	granted time.Duration
}

func seedPlan() []step {
	return []step{
		{"search", sleepOp(10*time.Millisecond, "results"), 250 * time.Millisecond, 2},
		{"fetch", hangsFirst(1), 100 * time.Millisecond, 3},
		{"extract", sleepOp(10*time.Millisecond, "fields"), 250 * time.Millisecond, 2},
	}
}

// runPlan runs the source article's plan under one budget and records every
// grant, the way the article's trace list does.
func runPlan(t *testing.T, budget time.Duration) (map[string]string, []grant, time.Duration, error) {
	t.Helper()
	d := deadline.New(budget)
	rng := rand.New(rand.NewPCG(7, 7))
	var trace []grant
	results := map[string]string{}
	for _, s := range seedPlan() {
		p := deadline.Policy{
			Name: s.name, MaxAttempts: s.attempts, AttemptTimeout: s.ceiling,
			Floor:   20 * time.Millisecond,
			Backoff: deadline.Backoff{Base: 50 * time.Millisecond, Max: 400 * time.Millisecond},
			Rand:    rng.Int64N,
		}
		op := s.op
		v, err := deadline.Do(context.Background(), d, p, func(ctx context.Context, a deadline.AttemptInfo) (string, error) {
			trace = append(trace, grant{s.name, a.Number, a.Granted})
			return op(ctx, a)
		})
		if err != nil {
			return results, trace, d.Remaining(), err
		}
		results[s.name] = v
	}
	return results, trace, d.Remaining(), nil
}

func TestSeedPlan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		results, trace, left, err := runPlan(t, time.Second)
		require.NoError(t, err)
		assert.Equal(t, "body", results["fetch"])
		var seq []string
		for _, g := range trace {
			seq = append(seq, g.step+" "+string(rune('0'+g.attempt)))
			assert.LessOrEqual(t, g.granted, 250*time.Millisecond)
		}
		assert.Equal(t, []string{"search 1", "fetch 1", "fetch 2", "extract 1"}, seq)
		assert.Equal(t, 100*time.Millisecond, trace[1].granted, "fetch 1 gets its whole ceiling")
		assert.Greater(t, left, time.Duration(0))
	})
}

func TestSeedPlanRefusedBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, trace, _, err := runPlan(t, 10*time.Millisecond)
		require.Error(t, err)
		assert.Empty(t, trace, "op never called")
		assert.ErrorIs(t, err, deadline.ErrRefused)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		var se *deadline.StopError
		require.True(t, errors.As(err, &se))
		assert.Equal(t, deadline.ReasonRefused, se.Reason)
		assert.Equal(t, 0, se.Attempts)
	})
}

func TestSeedPlanTightBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		results, trace, left, err := runPlan(t, 300*time.Millisecond)
		require.NoError(t, err)
		assert.Equal(t, "fields", results["extract"])
		last := trace[len(trace)-1]
		assert.Equal(t, "extract", last.step)
		// 300ms - search 10ms - fetch 100ms - sleep s - fetch 10ms, less the 20ms floor.
		assert.Less(t, last.granted, 250*time.Millisecond, "extract's grant is cut by the deadline")
		assert.InDelta(t, float64(300-10-100-10-20)*float64(time.Millisecond), float64(last.granted), float64(50*time.Millisecond))
		assert.Greater(t, left, time.Duration(0))
	})
}

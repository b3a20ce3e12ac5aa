package test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cloudwego/eino/adk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
)

// runs is how many runs each measurement makes: EINO_RUNS, else 200 (the
// figures in docs/benchmarks.md use EINO_RUNS=1000).
func runs(t *testing.T) int {
	if v := os.Getenv("EINO_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		return n
	}
	return 200
}

func quantile(xs []time.Duration, q float64) time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// TestOvershootTenTurns measures the ten-turn agent whose tool turns slow
// (half of the runs: ignoring its context) at a random turn, in virtual
// time, with and without a reserve: the overshoot past the deadline, the
// calls started at or below the floor, the stops, the answers.
func TestOvershootTenTurns(t *testing.T) {
	n := runs(t)
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, reserve := range []time.Duration{0, 200 * time.Millisecond} {
		var over []time.Duration
		var answers, typed, stops, abandoned, belowFloor int
		for i := range n {
			slowFrom, ignore := 1+rnd.IntN(10), i%2 == 1
			synctest.Test(t, func(t *testing.T) {
				p, lk := tenTurns(slowFrom, ignore)
				a := newAgent(t, newBudget(t, reserve), p, lk, "http://provider.test/v1", memTransport{H: p}, nil)
				res, took, err := a.run(context.Background(), budget)
				over = append(over, took-budget)
				if res != nil && res.Answer != nil {
					answers++
				}
				if err != nil {
					stops++
					if _, ok := errors.AsType[*deadline.StopError](err); ok && errors.Is(err, context.DeadlineExceeded) {
						typed++
					}
				}
				if res != nil {
					abandoned += len(res.Abandoned)
				}
				for _, c := range append(p.Requests(), lk.calls()...) {
					if !c.HasBudget || c.Remaining <= floor {
						belowFloor++
					}
				}
				time.Sleep(5 * time.Second) // abandoned tools finish
			})
		}
		p99, worst := quantile(over, 0.99), slices.Max(over)
		t.Logf("reserve %v, %d runs (virtual time): overshoot p99 %v, max %v; answers %d/%d (%.1f%%); stops %d, typed %d; abandoned tools %d; calls started at or below the floor %d",
			reserve, n, p99, worst, answers, n, 100*float64(answers)/float64(n), stops, typed, abandoned, belowFloor)
		assert.LessOrEqual(t, p99, 5*time.Millisecond, "overshoot p99")
		assert.LessOrEqual(t, worst, 5*time.Millisecond, "overshoot max")
		assert.Zero(t, belowFloor, "no call starts at or below the floor")
		assert.Equal(t, stops, typed, "every stop is the typed stop and matches context.DeadlineExceeded")
		if reserve > 0 {
			assert.GreaterOrEqual(t, float64(answers), 0.95*float64(n), "with a reserve, >= 95%% of the runs answer")
		}
	}
}

// TestEinoDefaultsOverrun measures the same agent with Eino's defaults and
// the only thing a user can do today, a context timeout: a tool that
// ignores its context holds the run past the deadline; a slow tool that
// honours it leaves no answer. It fails if Eino starts to do better, so
// that docs/benchmarks.md's comparison is checked.
func TestEinoDefaultsOverrun(t *testing.T) {
	for _, ignore := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			p, lk := tenTurns(4, ignore)
			a := newAgent(t, nil, p, lk, "http://provider.test/v1", memTransport{H: p}, nil)
			answer, took, err := a.runDefault(budget)
			t.Logf("Eino defaults, tool ignoring its context %v: run took %v (deadline %v), %d model calls, %d tool calls, answer %v, err %v",
				ignore, took, budget, len(p.Requests()), len(lk.calls()), answer != nil, err)
			require.Error(t, err)
			assert.Nil(t, answer)
			if ignore {
				assert.Greater(t, took, budget+time.Second, "the run waits for the tool that ignores its context")
			}
			_, typed := errors.AsType[*deadline.StopError](err)
			assert.False(t, typed)
			time.Sleep(5 * time.Second)
		})
	}
}

// TestEinoDefaultsRetrySleep measures Eino's own retry with a 2s
// BackoffFunc against a provider that answers 429 with retry-after-ms
// 2000, under a 1s context timeout: Eino sleeps past the deadline and
// sends requests after it. The same agent through the Budget
// (TestRetryAfterMsBeyondBudget) returns at once with the typed stop.
func TestEinoDefaultsRetrySleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &provider{Turns: 0, ToolFor: func(int) string { return "lookup" }, Reject: func(int) (int, http.Header) {
			return http.StatusTooManyRequests, http.Header{"Retry-After-Ms": {"2000"}}
		}}
		lk := &lookup{name: "lookup", latencyFor: func(int) time.Duration { return 0 }}
		retry := &adk.ModelRetryConfig{MaxRetries: 2, BackoffFunc: func(context.Context, int) time.Duration { return 2 * time.Second }}
		a := newAgent(t, nil, p, lk, "http://provider.test/v1", memTransport{H: p}, retry)
		start := time.Now()
		answer, took, err := a.runDefault(budget)
		late := 0
		for _, r := range p.Requests() {
			if r.At.Sub(start) >= budget {
				late++
			}
		}
		t.Logf("Eino defaults, 429 retry-after-ms 2000, BackoffFunc 2s: run took %v (deadline %v), %d model attempts, %d started after the deadline, err %v",
			took, budget, len(p.Requests()), late, err)
		require.Error(t, err)
		assert.Nil(t, answer)
		assert.Greater(t, took, budget+time.Second, "Eino's retry sleeps past the deadline")
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "Eino's retry error unwraps to its own sentinel only")
		_, typed := errors.AsType[*deadline.StopError](err)
		assert.False(t, typed)
	})
}

package deadline_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
)

// TestHedgeProperty runs Do with hedging on random scenarios (durations,
// outcomes and limits on the millisecond grid, operations that honour their
// context or not) and checks the documented invariants, not a full model:
// hedges count as attempts and never exceed MaxHedges in flight, none
// starts at or below the floor, every AttemptStart is closed by one
// AttemptEnd before CallEnd, the counts of CallResult match the attempts'
// ends, a loser counts in neither CeilingTimeouts nor DeadlineCuts, the
// call succeeds exactly when it returns a winner's value, and Do returns
// only when every attempt has.
func TestHedgeProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 3278))
	const cases = 3000
	won, hedged := 0, 0
	for i := range cases {
		budget := time.Duration(20+r.IntN(300)) * time.Millisecond
		p := deadline.Policy{
			Name: "prop", MaxAttempts: 1 + r.IntN(5),
			Floor: time.Duration(r.IntN(30)) * time.Millisecond,
			Hedge: &deadline.Hedge{Delay: time.Duration(1+r.IntN(60)) * time.Millisecond, MaxHedges: 1 + r.IntN(3)},
		}
		if r.IntN(2) == 0 {
			p.AttemptTimeout = time.Duration(1+r.IntN(150)) * time.Millisecond
		}
		type step struct {
			dur        time.Duration
			coop, fail bool
		}
		var steps [8]step
		for k := range steps {
			steps[k] = step{dur: time.Duration(r.IntN(200)) * time.Millisecond, coop: r.IntN(4) != 0, fail: r.IntN(3) == 0}
		}
		synctest.Test(t, func(t *testing.T) {
			var mu sync.Mutex
			var starts []deadline.AttemptInfo
			var ends []deadline.AttemptResult
			open, most, running := 0, 0, 0
			var call []deadline.CallResult
			p.Hooks = &deadline.Hooks{
				AttemptStart: func(ctx context.Context, a deadline.AttemptInfo) context.Context {
					starts = append(starts, a)
					open++
					most = max(most, open)
					return nil
				},
				AttemptEnd: func(ctx context.Context, a deadline.AttemptInfo, res deadline.AttemptResult) {
					ends = append(ends, res)
					open--
				},
				CallEnd: func(ctx context.Context, res deadline.CallResult) {
					assert.Zero(t, open, "case %d: every attempt closed before CallEnd", i)
					call = append(call, res)
				},
			}
			v, err := deadline.DoHedged(context.Background(), deadline.New(budget), p, func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
				mu.Lock()
				running++
				mu.Unlock()
				defer func() { mu.Lock(); running--; mu.Unlock() }()
				s := steps[a.Number-1]
				if s.coop {
					if err := sleepOr(ctx, s.dur); err != nil {
						return 0, err
					}
				} else {
					time.Sleep(s.dur)
				}
				if s.fail {
					return 0, deadline.Retryable(errFlaky)
				}
				return a.Number, nil
			})
			mu.Lock()
			assert.Zero(t, running, "case %d: Do returned with an attempt running", i)
			mu.Unlock()
			require.Len(t, call, 1)
			c := call[0]
			assert.LessOrEqual(t, c.Attempts, p.MaxAttempts, "case %d", i)
			assert.Len(t, starts, c.Attempts, "case %d", i)
			assert.Len(t, ends, c.Attempts, "case %d", i)
			assert.LessOrEqual(t, most, 1+p.Hedge.MaxHedges, "case %d", i)
			nh, timeouts, cuts, winners := 0, 0, 0, 0
			for k, a := range starts {
				assert.Equal(t, k+1, a.Number)
				assert.Greater(t, a.Remaining, p.Floor, "case %d: attempt %d started at or below the floor", i, a.Number)
				if a.Hedge {
					nh++
				}
			}
			for _, e := range ends {
				switch e.EndedBy {
				case deadline.EndedAttemptTimeout:
					timeouts++
				case deadline.EndedDeadline:
					cuts++
				}
				if e.HedgeWinner {
					winners++
				}
			}
			assert.Equal(t, nh, c.Hedges, "case %d", i)
			assert.Equal(t, timeouts, c.CeilingTimeouts, "case %d", i)
			assert.Equal(t, cuts, c.DeadlineCuts, "case %d", i)
			if err == nil {
				won++
				assert.Equal(t, deadline.ReasonSuccess, c.Reason)
				assert.Equal(t, deadline.VerdictOK, deadline.VerdictOf(c))
				assert.False(t, steps[v-1].fail, "case %d: the value is a success's", i)
				assert.LessOrEqual(t, winners, 1, "case %d", i)
			} else {
				assert.Zero(t, winners, "case %d", i)
				for _, e := range ends {
					assert.NotEqual(t, deadline.EndedHedgeLost, e.EndedBy, "case %d: no loser without a winner", i)
				}
			}
			if nh > 0 {
				hedged++
			}
		})
	}
	t.Logf("%d cases: %d succeeded, %d started a hedge", cases, won, hedged)
	assert.Greater(t, hedged, cases/4, "the cases exercise hedging")
}

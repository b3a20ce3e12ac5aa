package goodput

import (
	"encoding/json"
	"flag"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/deadlinebudget/budget/bench/peers"
)

var (
	reportOut  = flag.String("goodput.out", "", "TestGoodputReport: write the totals of every library as JSON to this file (no file: the test is skipped)")
	reportRuns = flag.Int("goodput.runs", 10000, "TestGoodputReport: runs per library")
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestGoodputReport produces scenario 6's table data. It runs only when
// -goodput.out is given, as cmd/compare does.
func TestGoodputReport(t *testing.T) {
	if *reportOut == "" {
		t.Skip("run by cmd/compare with -goodput.out")
	}
	m := Default()
	rep := Report{Model: m.String(), Runs: *reportRuns}
	for _, r := range peers.All() {
		synctest.Test(t, func(t *testing.T) {
			tot, err := Simulate(r, m, *reportRuns, 64)
			require.NoError(t, err)
			rep.Totals = append(rep.Totals, tot)
		})
	}
	// This project with the learned floor (issue 21), after the peers so
	// that the rows of peers.All keep their order.
	synctest.Test(t, func(t *testing.T) {
		tot, err := Simulate(Learned(), m, *reportRuns, 64)
		require.NoError(t, err)
		rep.Totals = append(rep.Totals, tot)
	})
	// The same, its estimate counting only successes.
	synctest.Test(t, func(t *testing.T) {
		tot, err := Simulate(LearnedSuccesses(), m, *reportRuns, 64)
		require.NoError(t, err)
		rep.Totals = append(rep.Totals, tot)
	})
	// Ablation: this project without its floor, to show what the 20ms
	// reserve costs in a model where an answer arriving at the deadline is
	// still in time.
	synctest.Test(t, func(t *testing.T) {
		m0 := m
		m0.Call.Floor = 0
		tot, err := Simulate(peers.Deadline{}, m0, *reportRuns, 64)
		require.NoError(t, err)
		tot.Library = AblationNoFloor
		rep.Totals = append(rep.Totals, tot)
	})
	b, err := json.MarshalIndent(rep, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(*reportOut, b, 0o644))
}

func TestProviderIsSeeded(t *testing.T) {
	m := Default()
	a, b, other := newProvider(m, 7), newProvider(m, 7), newProvider(m, 8)
	same := 0
	now := time.Now()
	for range 100 {
		now = now.Add(time.Hour) // past any rate-limit window
		x, y, z := a.next(now), b.next(now), other.next(now)
		assert.Equal(t, x, y, "same seed and run: same answers")
		if x == z {
			same++
		}
	}
	assert.Less(t, same, 100, "another run draws other answers")
}

func TestProviderShares(t *testing.T) {
	m := Default()
	p := newProvider(m, 1)
	const n = 100000
	count := map[int]int{}
	var tail, below int
	now := time.Now()
	for range n {
		now = now.Add(time.Hour)
		a := p.next(now)
		count[a.status]++
		if a.status == 200 {
			if a.latency >= m.TailMin*2 {
				tail++
			}
			if a.latency < m.Median {
				below++
			}
		}
	}
	// With a fixed seed these are exact counts; the bounds state the model.
	assert.InDelta(t, m.Share503, float64(count[503])/n, 0.01)
	assert.InDelta(t, m.Share429, float64(count[429])/n, 0.01)
	assert.InDelta(t, 0.5, float64(below)/float64(count[200]), 0.03, "the median is the median")
	assert.Greater(t, tail, count[200]/100, "the tail is heavy: over 1% of answers take more than twice its minimum")
}

// TestGoodput runs a few hundred runs per library and checks the
// accounting: every good run sent at least one request per step, nobody
// returns after the deadline (the caller's context carries it), and this
// project never sends a request it then abandons at the deadline while a
// doomed attempt would have been refused.
func TestGoodput(t *testing.T) {
	m := Default()
	const runs = 300
	for _, r := range peers.All() {
		t.Run(r.Name(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tot, err := Simulate(r, m, runs, 32)
				require.NoError(t, err)
				assert.Equal(t, runs, tot.Runs)
				assert.Positive(t, tot.Good, "some runs succeed")
				assert.Less(t, tot.Good, runs, "the fault model makes some runs fail")
				assert.GreaterOrEqual(t, tot.Requests, tot.Good*m.Steps, "a good run sends one request per step at least")
				assert.Zero(t, tot.Late, "the context's deadline bounds every run (largest lateness %v)", tot.MaxLate)
				assert.Positive(t, tot.Wasted)
				assert.LessOrEqual(t, tot.Abandoned, tot.Requests)
			})
		})
	}
}

func TestSimulateRejectsBadInput(t *testing.T) {
	_, err := Simulate(peers.Baseline{}, Default(), 0, 1)
	assert.Error(t, err)
	m := Default()
	m.Call.MaxAttempts = 0
	_, err = Simulate(peers.Baseline{}, m, 1, 1)
	assert.Error(t, err)
}

func TestProviderRateLimitWindow(t *testing.T) {
	m := Default()
	m.Share503, m.Share429 = 0, 1 // every admitted request opens a window
	p := newProvider(m, 3)
	now := time.Now()
	first := p.next(now)
	require.Equal(t, 429, first.status)
	require.Equal(t, m.RetryAfter, first.retryAfter)
	early := p.next(now.Add(300 * time.Millisecond))
	assert.Equal(t, 429, early.status, "inside the window")
	assert.Equal(t, time.Second, early.retryAfter, "700ms left, asked in whole seconds")
	m.Share429 = 0
	p.m = m
	after := p.next(now.Add(m.RetryAfter))
	assert.Equal(t, 200, after.status, "the window is over")
}

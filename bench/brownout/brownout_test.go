package brownout

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
	reportOut   = flag.String("brownout.out", "", "TestBrownoutReport: write every library's results as JSON to this file (no file: the test is skipped)")
	reportSeeds = flag.Int("brownout.seeds", 5, "TestBrownoutReport: seeds to run (the model's seed and the ones after it)")
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestBrownoutReport produces the brownout table's data. It runs only when
// -brownout.out is given, as cmd/compare does.
func TestBrownoutReport(t *testing.T) {
	if *reportOut == "" {
		t.Skip("run by cmd/compare with -brownout.out")
	}
	m := Default()
	rep := Report{Model: m.String()}
	for i := range *reportSeeds {
		m.Seed = Default().Seed + uint64(i)
		rep.Seeds = append(rep.Seeds, m.Seed)
		for _, r := range Libraries() {
			synctest.Test(t, func(t *testing.T) {
				res, err := Simulate(r, m)
				require.NoError(t, err)
				res.Seconds = nil
				rep.Results = append(rep.Results, res)
			})
		}
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(*reportOut, b, 0o644))
}

// TestBrownout runs the model for this project with and without the
// learned floor and a peer, and checks the accounting and the claim the
// scenario exists for: the learned floor sends fewer doomed attempts.
func TestBrownout(t *testing.T) {
	m := Default()
	results := map[string]Result{}
	for _, r := range []peers.Retrier{peers.Deadline{}, Learned(), peers.Cenkalti{}} {
		synctest.Test(t, func(t *testing.T) {
			res, err := Simulate(r, m)
			require.NoError(t, err)
			assert.Equal(t, m.Clients*60, res.Calls, "one call per client and second")
			assert.LessOrEqual(t, res.Doomed, res.Requests)
			assert.LessOrEqual(t, res.BrownoutDoomed, res.Doomed)
			assert.GreaterOrEqual(t, res.Requests, res.Calls-res.Good, "every failed call sent a request or was refused")
			assert.Greater(t, res.Baseline, 0.99, "the provider is healthy before the brownout")
			sum := 0
			for _, s := range res.Seconds[20:40] {
				sum += s.Good
			}
			assert.Less(t, sum, 20*m.Clients/2, "the brownout makes most calls fail")
			results[res.Library] = res
		})
	}
	this, learned := results[peers.Deadline{}.Name()], results[Learned().Name()]
	assert.Less(t, learned.Doomed, this.Doomed, "the learned floor refuses doomed attempts")
	assert.Less(t, learned.Requests, this.Requests)
	assert.GreaterOrEqual(t, learned.FirstSuccess, time.Duration(0), "a success after the brownout")
}

func TestSimulateRejectsBadInput(t *testing.T) {
	m := Default()
	m.Workers = 0
	_, err := Simulate(peers.Baseline{}, m)
	assert.Error(t, err)
	m = Default()
	m.Slow = 0.5
	_, err = Simulate(peers.Baseline{}, m)
	assert.Error(t, err)
}

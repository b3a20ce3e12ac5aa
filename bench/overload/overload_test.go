package overload

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

var (
	reportOut = flag.String("overload.out", "", "TestOverloadReport: write every row's results as JSON to this file (no file: the test is skipped)")
	onlyRow   = flag.String("overload.row", "", "TestOverloadReport: run only the rows whose name is this (plus the no-limiter and oracle references)")
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOverloadReport produces the overload tables' data. It runs only when
// -overload.out is given, as cmd/compare does; with -short it runs the
// short model, one seed, loads 1× and 5×, and the two-route model at 5×.
func TestOverloadReport(t *testing.T) {
	if *reportOut == "" {
		t.Skip("run by cmd/compare with -overload.out")
	}
	t0 := time.Now()
	seeds, loads, two := Seeds, Loads, TwoRouteLoads
	shrink := func(m Model) Model { return m }
	if testing.Short() {
		seeds, loads, shrink = seeds[:1], []float64{1, 5}, Short
	}
	rows := Rows()
	if *onlyRow != "" {
		var keep []Row
		for _, r := range rows {
			if r.Name == *onlyRow || r.Name == NoLimiter || r.Name == Oracle {
				keep = append(keep, r)
			}
		}
		rows = keep
	}
	rep := Report{Model: shrink(Default(seeds[0], loads[0])).String(), TwoRouteModel: shrink(TwoRoutes(seeds[0], two[0])).String(),
		Capacity: Default(0, 1).Capacity(), TwoRouteCapacity: TwoRoutes(0, 1).Capacity(),
		Seeds: seeds, Loads: loads, TwoRouteLoads: two, Short: testing.Short()}
	for _, r := range rows {
		rep.Rows = append(rep.Rows, RowInfo{Name: r.Name, Config: r.Config})
	}
	var mu sync.Mutex
	run := func(t *testing.T, m Model, row Row, into *[]Result) {
		t.Run(fmt.Sprintf("%s/%gx/%d", row.Name, m.Load, m.Seed), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				res, err := Simulate(row, m)
				require.NoError(t, err)
				mu.Lock()
				*into = append(*into, res)
				mu.Unlock()
			})
		})
	}
	t.Run("runs", func(t *testing.T) {
		for _, seed := range seeds {
			for _, load := range loads {
				for _, row := range rows {
					run(t, shrink(Default(seed, load)), row, &rep.Results)
				}
			}
			for _, load := range two {
				for _, row := range rows {
					run(t, shrink(TwoRoutes(seed, load)), row, &rep.TwoRoutes)
				}
			}
		}
	})
	rep.Wall = time.Since(t0).Seconds()
	b, err := json.MarshalIndent(rep, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(*reportOut, b, 0o644))
}

// TestShortModel runs the short model at 5× for the references, one peer
// and this project's client alone (the rows behind the server admission
// cost ten times more under -race, and TestOverloadReport runs them), and
// checks what must hold whatever the tuning: the oracle wastes
// nothing and beats sending everything, which wastes much of the
// downstream's time.
func TestShortModel(t *testing.T) {
	m := Short(Default(Seeds[0], 5))
	by := map[string]Result{}
	for _, row := range Rows() {
		switch row.Name {
		case NoLimiter, Oracle, FailsafeAL, ThisNewClient:
		default:
			continue
		}
		synctest.Test(t, func(t *testing.T) {
			res, err := Simulate(row, m)
			require.NoError(t, err)
			by[row.Name] = res
		})
	}
	none, oracle := by[NoLimiter], by[Oracle]
	assert.Zero(t, oracle.Steady.Wasted, "the oracle sends nothing that misses")
	assert.Greater(t, oracle.Steady.Goodput, none.Steady.Goodput)
	assert.Greater(t, none.Steady.Wasted, 0.5, "at 5× a FIFO queue of 2s serves mostly calls whose callers have left")
	assert.Less(t, none.Steady.Capacity, 0.2)
	for name, r := range by {
		t.Logf("%s: cold %.0f/s (%.0f%%) wasted %.0f%%; steady %.0f/s (%.0f%%) wasted %.0f%% p99 %v; onset %v recovery %v",
			name, r.Cold.Goodput, 100*r.Cold.Capacity, 100*r.Cold.Wasted, r.Steady.Goodput, 100*r.Steady.Capacity, 100*r.Steady.Wasted, r.Steady.P99, r.Onset, r.Recovery)
	}
}

// TestModel checks the model's arithmetic and validation.
func TestModel(t *testing.T) {
	m := Default(1, 5)
	require.NoError(t, m.Validate())
	// Log-normal mean 40ms·e^(0.125) = 45.3ms; tail mean ≈ 945ms; mixed ≈ 63.3ms.
	assert.InDelta(t, 63.3, float64(m.Mean())/float64(time.Millisecond), 0.5)
	assert.InDelta(t, 790, m.Capacity(), 10)
	bad := m
	bad.Deadlines = []Deadline{{time.Second, 0.5}}
	assert.ErrorContains(t, bad.Validate(), "sum to")
	bad = m
	bad.Workers = 0
	assert.ErrorContains(t, bad.Validate(), "Workers")
	_, err := Simulate(Rows()[0], bad)
	assert.Error(t, err)
}

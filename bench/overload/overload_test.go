package overload

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
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
	onlyRow   = flag.String("overload.row", "", "TestOverloadReport: run only the rows whose name is this (plus the references: no limiter, the oracle, the fixed limit)")
	onlySets  = flag.String("overload.sets", "", "TestOverloadReport: comma-separated sets to run (uniform, default, propagated, two routes; default: all)")
	nSeeds    = flag.Int("overload.seeds", 0, "TestOverloadReport: run the first n seeds (default: all, 1 with -short)")
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// reportSet is one set of TestOverloadReport: its model at a load, its
// loads in the full and the short run, its rows.
type reportSet struct {
	kind              string
	model             func(seed uint64, load float64) Model
	loads, shortLoads []float64
	rows              func() []Row
}

// reportSets are the sets of the report, in the order of the tables.
var reportSets = []reportSet{
	{SetUniform, Uniform, UniformLoads, []float64{1.2, 10}, UniformRows},
	{SetDefault, Default, Loads, []float64{2, 10}, Rows},
	{SetPropagated, func(seed uint64, load float64) Model {
		m := Default(seed, load)
		m.Propagate = true
		return m
	}, PropagatedLoads, []float64{10}, Rows},
	{SetTwoRoutes, TwoRoutes, TwoRouteLoads, []float64{5}, Rows},
}

// TestOverloadReport produces the overload tables' data. It runs only when
// -overload.out is given, as cmd/compare does; with -short it runs the
// short models, one seed, and fewer loads.
func TestOverloadReport(t *testing.T) {
	if *reportOut == "" {
		t.Skip("run by cmd/compare with -overload.out")
	}
	t0 := time.Now()
	seeds := Seeds
	shrink := func(m Model) Model { return m }
	if testing.Short() {
		seeds, shrink = seeds[:1], Short
	}
	if *nSeeds > 0 {
		seeds = Seeds[:min(*nSeeds, len(Seeds))]
	}
	want := map[string]bool{}
	for _, s := range strings.Split(*onlySets, ",") {
		if s = strings.TrimSpace(s); s != "" {
			want[s] = true
		}
	}
	rep := Report{Seeds: seeds, Short: testing.Short()}
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
	var sets []*Set
	t.Run("runs", func(t *testing.T) {
		for _, rs := range reportSets {
			if len(want) > 0 && !want[rs.kind] {
				continue
			}
			loads := rs.loads
			if testing.Short() {
				loads = rs.shortLoads
			}
			var rows []Row
			for _, r := range rs.rows() {
				switch {
				case *onlyRow == "", r.Name == *onlyRow, r.Name == NoLimiter, r.Name == Oracle, r.Name == FixedLimit:
					rows = append(rows, r)
				}
			}
			m := shrink(rs.model(seeds[0], loads[0]))
			set := &Set{Kind: rs.kind, Model: m.String(), Capacity: m.Capacity(), Floor: m.Floor(1_000_000), Loads: loads}
			for _, r := range rows {
				set.Rows = append(set.Rows, RowInfo{Name: r.Name, Config: r.Config})
			}
			sets = append(sets, set)
			for _, seed := range seeds {
				for _, load := range loads {
					for _, row := range rows {
						run(t, shrink(rs.model(seed, load)), row, &set.Results)
					}
				}
			}
		}
	})
	for _, s := range sets {
		rep.Sets = append(rep.Sets, *s)
	}
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
	// The propagated variant: the same downstream, its handler stopping at
	// the deadline the request carries, spends far less on calls whose
	// caller has left.
	prop := m
	prop.Propagate = true
	synctest.Test(t, func(t *testing.T) {
		res, err := Simulate(Rows()[0], prop)
		require.NoError(t, err)
		by["propagated: "+NoLimiter] = res
	})
	none, oracle := by[NoLimiter], by[Oracle]
	assert.Less(t, by["propagated: "+NoLimiter].Steady.Wasted, none.Steady.Wasted/2)
	assert.Greater(t, by["propagated: "+NoLimiter].Steady.Goodput, none.Steady.Goodput)
	assert.Zero(t, oracle.Steady.Wasted, "the oracle sends nothing that misses")
	assert.Greater(t, oracle.Steady.Goodput, none.Steady.Goodput)
	assert.Greater(t, none.Steady.Wasted, 0.5, "at 5× a FIFO queue of 2s serves mostly calls whose callers have left")
	assert.Less(t, none.Steady.Capacity, 0.2)
	for name, r := range by {
		t.Logf("%s: cold %.0f/s (%.0f%%) wasted %.0f%%; steady %.0f/s (%.0f%%) wasted %.0f%% p99 %v; onset %v recovery %v",
			name, r.Cold.Goodput, 100*r.Cold.Capacity, 100*r.Cold.Wasted, r.Steady.Goodput, 100*r.Steady.Capacity, 100*r.Steady.Wasted, r.Steady.P99, r.Onset, r.Recovery)
	}
}

// TestUniformReference runs the uniform-budget model's short form at 3×
// for its references: the fixed limit serves the downstream's capacity
// within the deadline and wastes nothing, no limiter (an unbounded queue)
// serves almost nothing.
func TestUniformReference(t *testing.T) {
	m := Short(Uniform(Seeds[0], 3))
	by := map[string]Result{}
	for _, row := range UniformRows()[:2] {
		synctest.Test(t, func(t *testing.T) {
			res, err := Simulate(row, m)
			require.NoError(t, err)
			by[row.Name] = res
		})
	}
	fixed, none := by[FixedLimit], by[NoLimiter]
	assert.Greater(t, fixed.Steady.Capacity, 0.95)
	assert.Zero(t, fixed.Steady.Wasted)
	assert.Less(t, none.Steady.Capacity, 0.05)
	assert.Greater(t, none.Steady.Wasted, 0.9)
}

// TestModel checks the model's arithmetic and validation.
func TestModel(t *testing.T) {
	m := Default(1, 5)
	require.NoError(t, m.Validate())
	// Log-normal mean 40ms·e^(0.125) = 45.3ms; tail mean ≈ 945ms; mixed ≈ 63.3ms.
	assert.InDelta(t, 63.3, float64(m.Mean())/float64(time.Millisecond), 0.5)
	assert.InDelta(t, 790, m.Capacity(), 10)
	// 29% of the work is calls slower than their own deadline (issue 31's
	// figure, from 2 million calls).
	assert.InDelta(t, 0.29, m.Floor(200_000), 0.02)
	assert.Zero(t, Uniform(1, 2).Floor(1000))
	assert.InDelta(t, 500, Uniform(1, 2).Capacity(), 1e-9)
	bad := m
	bad.Deadlines = []Deadline{{time.Second, 0.5}}
	assert.ErrorContains(t, bad.Validate(), "sum to")
	bad = m
	bad.Workers = 0
	assert.ErrorContains(t, bad.Validate(), "Workers")
	_, err := Simulate(Rows()[0], bad)
	assert.Error(t, err)
}

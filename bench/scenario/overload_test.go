package scenario

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/bench/overload"
)

// TestOverloadTables pins the overload tables' ranges and goals on a
// hand-built report: two seeds, given in reverse order.
func TestOverloadTables(t *testing.T) {
	phase := func(good, capa, wasted float64) overload.Phase {
		return overload.Phase{Goodput: good, Capacity: capa, Wasted: wasted, P99: 120 * time.Millisecond}
	}
	res := func(row string, seed uint64, load, steady, wasted float64, onset, recovery time.Duration) overload.Result {
		return overload.Result{Row: row, Seed: seed, Load: load, Cold: phase(steady/2, steady/2/790, wasted),
			Steady: phase(steady, steady/790, wasted), Onset: onset, Recovery: recovery}
	}
	this := overload.ThisNew
	rep := overload.Report{Model: "m", TwoRouteModel: "m2", Capacity: 790, TwoRouteCapacity: 354, Seeds: []uint64{1, 2},
		Loads: []float64{5}, TwoRouteLoads: []float64{5},
		Rows: []overload.RowInfo{{Name: overload.NoLimiter}, {Name: overload.FailsafeAL}, {Name: this}}}
	rep.Results = []overload.Result{
		res(this, 2, 5, 800, 0.05, 2*time.Second, time.Second),
		res(overload.FailsafeAL, 2, 5, 700, 0.30, -1, 2*time.Second),
		res(overload.NoLimiter, 2, 5, 10, 0.99, -1, -1),
		res(this, 1, 5, 760, 0.08, 3*time.Second, time.Second),
		res(overload.FailsafeAL, 1, 5, 750, 0.25, -1, time.Second),
		res(overload.NoLimiter, 1, 5, 12, 0.98, -1, -1),
	}
	rep.TwoRoutes = []overload.Result{
		res(this, 1, 5, 300, 0.05, time.Second, 0),
		res(overload.FailsafeAL, 1, 5, 260, 0.3, -1, 0),
		res(this, 2, 5, 400, 0.05, time.Second, 0),
		res(overload.FailsafeAL, 2, 5, 300, 0.3, -1, 0),
	}
	ts := OverloadTables(rep)
	require.Len(t, ts, 3)
	var buf bytes.Buffer
	for _, tb := range ts {
		tb.Markdown(&buf)
	}
	out := buf.String()
	rows := map[string][]string{}
	for _, r := range ts[0].Rows {
		rows[r[0]] = r
	}
	assert.Equal(t, "760–800 (96–101%)", rows[this][4])
	assert.Equal(t, "5–8%", rows[this][5])
	assert.Equal(t, "2–3 s", rows[this][7])
	assert.Equal(t, "not reached", rows[overload.FailsafeAL][7])
	assert.Equal(t, "not within the run", rows[overload.NoLimiter][8])
	// Per seed: 760 ≥ 750 and 800 ≥ 700; wasted ≤ 10%; onset ≤ 5s;
	// recovery 1s against the best peer's 1s and 2s.
	assert.Equal(t, "steady goodput ≥ best peer: met; wasted ≤ 10%: met; onset ≤ 5s: met; recovery no slower than the best peer: met", rows[this][9])
	assert.Equal(t, "—", rows[overload.FailsafeAL][9])
	// Two routes: 300 < 1.2 × 260 on seed 1.
	assert.Equal(t, "steady goodput ≥ 20% above the best peer: **missed**", ts[1].Rows[1][9])
	assert.True(t, strings.HasPrefix(ts[1].Notes[0], "Model: m2"))

	// A peer better on one seed misses the goodput goal.
	rep.Results[4].Steady.Goodput = 770
	rows = map[string][]string{}
	for _, r := range OverloadTables(rep)[0].Rows {
		rows[r[0]] = r
	}
	assert.Contains(t, rows[this][9], "steady goodput ≥ best peer: **missed**")
	assert.Contains(t, out, "Scenario 10: how each row is configured")
}

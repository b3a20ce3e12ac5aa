package scenario

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/bench/overload"
)

// TestOverloadTables pins the overload tables' ranges and issue 38's goals
// on a hand-built report: two seeds, given in reverse order.
func TestOverloadTables(t *testing.T) {
	phase := func(good, wasted, floor float64, p99 time.Duration) overload.Phase {
		return overload.Phase{Goodput: good, Capacity: good / 790, Wasted: wasted, Floor: floor, P99: p99}
	}
	res := func(row string, seed uint64, load, good, wasted, floor float64, p99 time.Duration) overload.Result {
		p := phase(good, wasted, floor, p99)
		return overload.Result{Row: row, Seed: seed, Load: load, Cold: p, Steady: p, Whole: p, Onset: time.Second, Recovery: -1}
	}
	ms := time.Millisecond
	this, client := overload.ThisNew, overload.ThisNewClient
	def := overload.Set{Kind: overload.SetDefault, Model: "m", Capacity: 790, Floor: 0.29, Loads: []float64{2, 5},
		Rows: []overload.RowInfo{{Name: overload.NoLimiter}, {Name: overload.FailsafeAL}, {Name: overload.Gradient2}, {Name: this}, {Name: client}}}
	def.Results = []overload.Result{
		res(this, 2, 5, 800, 0.20, 0.18, 300*ms),
		res(overload.FailsafeAL, 2, 5, 700, 0.30, 0.25, 140*ms),
		res(overload.Gradient2, 2, 5, 720, 0.30, 0.25, 160*ms), // the best peer of seed 2
		res(overload.NoLimiter, 2, 5, 10, 0.99, 0.30, 900*ms),
		res(this, 1, 5, 760, 0.25, 0.20, 250*ms),
		res(overload.FailsafeAL, 1, 5, 750, 0.25, 0.20, 120*ms),
		res(overload.NoLimiter, 1, 5, 12, 0.98, 0.30, 900*ms),
		res(client, 1, 2, 700, 0.3, 0.3, 200*ms),
		res(overload.FailsafeAL, 1, 2, 690, 0.3, 0.3, 150*ms),
		res(client, 2, 2, 700, 0.3, 0.3, 200*ms),
		res(overload.FailsafeAL, 2, 2, 710, 0.3, 0.3, 150*ms),
	}
	uni := overload.Set{Kind: overload.SetUniform, Model: "u", Capacity: 500, Loads: []float64{3},
		Rows: []overload.RowInfo{{Name: overload.FixedLimit}, {Name: overload.ThisDefault}}}
	uni.Results = []overload.Result{
		res(overload.FixedLimit, 1, 3, 500, 0, 0, 90*ms),
		res(overload.ThisDefault, 1, 3, 480, 0, 0, 90*ms),
		res(overload.FixedLimit, 2, 3, 400, 0, 0, 90*ms),
		res(overload.ThisDefault, 2, 3, 360, 0, 0, 90*ms),
	}
	rep := overload.Report{Seeds: []uint64{1, 2}, Sets: []overload.Set{uni, def}}
	ts := OverloadTables(rep)
	require.Len(t, ts, 5) // goals, uniform 3×, default 2× and 5×, configurations
	var buf bytes.Buffer
	for _, tb := range ts {
		tb.Markdown(&buf)
	}
	assert.Contains(t, buf.String(), "Scenario 10: how each row is configured")

	// The uniform model: 480/500 = 96% and 360/400 = 90%.
	require.Len(t, ts[1].Rows, 2)
	assert.Equal(t, []string{overload.ThisDefault, "90–96%", "90–96%", "360–480 (46–61%)", "90–96%", "0%", "0%", "90 ms", "not within the run"}, ts[1].Rows[1])

	rows := map[string][]string{}
	for _, r := range ts[3].Rows {
		rows[r[0]] = r
	}
	assert.Equal(t, "760–800 (96–101%)", rows[this][1])
	assert.Equal(t, "20–25%", rows[this][2])
	assert.Equal(t, "18–20%", rows[this][3])
	assert.Equal(t, "250–300 ms", rows[this][4])

	goals := map[string]string{}
	for _, r := range ts[0].Rows {
		goals[r[0]+" @ "+r[1]] = r[2] + " | " + r[3] + " | " + r[4]
	}
	// 96% on seed 1, 90% on seed 2: missed.
	assert.Equal(t, "90–96% | fixed limit 400–500/s | **missed**", goals["≥ 95% of the fixed limit's goodput: "+overload.ThisDefault+" @ uniform, 3×, whole overload"])
	// Per seed: 760 ≥ 750, 800 ≥ 720 (Gradient2, seed 2's best).
	assert.Equal(t, "760–800/s | best peer 720–750/s | met", goals["whole project's goodput ≥ the best peer's @ default, 5×, steady"])
	// 250 > 2 × 120 on seed 1.
	assert.Equal(t, "250–300 ms | best peer 120–160 ms | **missed**", goals["whole project's p99 of good calls ≤ 2× the best peer's (the peer of the best goodput) @ default, 5×, cold"])
	// 25% ≤ 20% + 3 fails on seed 1.
	assert.Equal(t, "20–25% | floor 18–20% | **missed**", goals["whole project's wasted work ≤ its floor + 3 points @ default, 5×, steady"])
	// The client alone: 700 ≥ 690, 700 < 710.
	assert.Equal(t, "700/s | adaptivelimiter 690–710/s | **missed**", goals["client alone's goodput ≥ failsafe-go adaptivelimiter's @ default, 2×, cold"])
}

package scenario

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/deadlinebudget/budget/bench/overload"
)

// Issue 31's goals, judged on this project's rows against the peers (every
// row but no limiter, the oracle and this project's own), on every seed.
const (
	// OverloadWasteGoal bounds the wasted share of the downstream's busy
	// time in steady overload at 5× and 10×.
	OverloadWasteGoal = 0.10
	// OverloadOnsetGoal bounds the time from the onset of the overload to
	// a second at 90% of capacity.
	OverloadOnsetGoal = 5 * time.Second
	// TwoRouteGoal is the least ratio of this project's steady goodput to
	// the best peer's in the two-route model.
	TwoRouteGoal = 1.20
)

// isThisOverload reports whether a row of the overload scenario is this
// project's.
func isThisOverload(name string) bool { return strings.HasPrefix(name, "deadline (this)") }

// isPeerOverload reports whether a row is a peer's.
func isPeerOverload(name string) bool {
	return !isThisOverload(name) && name != overload.NoLimiter && name != overload.Oracle
}

// OverloadTables renders the overload scenario from the report of
// TestOverloadReport: one table per load, then the two-route model, then
// the rows' configurations. Each cell is the range over the seeds.
func OverloadTables(rep overload.Report) []Table {
	var out []Table
	for _, load := range rep.Loads {
		var rs []overload.Result
		for _, r := range rep.Results {
			if r.Load == load {
				rs = append(rs, r)
			}
		}
		title := fmt.Sprintf("Scenario 10: overload at %g× capacity, virtual time (testing/synctest), %d seeds", load, len(rep.Seeds))
		if rep.Short {
			title += " (short model)"
		}
		out = append(out, overloadTable(title, rep, rs, rep.Capacity, func(name string, by map[string][]overload.Result) string {
			return overloadGoal(name, load, by)
		}))
	}
	for _, load := range rep.TwoRouteLoads {
		var rs []overload.Result
		for _, r := range rep.TwoRoutes {
			if r.Load == load {
				rs = append(rs, r)
			}
		}
		title := fmt.Sprintf("Scenario 10b: two routes (20ms and 200ms) sharing the downstream, overload at %g× capacity, %d seeds", load, len(rep.Seeds))
		if rep.Short {
			title += " (short model)"
		}
		t := overloadTable(title, rep, rs, rep.TwoRouteCapacity, twoRouteGoal)
		t.Notes = append([]string{"Model: " + rep.TwoRouteModel + "."}, t.Notes[1:]...)
		out = append(out, t)
	}
	cfg := Table{Title: "Scenario 10: how each row is configured", Header: []string{"row", "configuration"}}
	for _, r := range rep.Rows {
		cfg.Rows = append(cfg.Rows, []string{r.Name, r.Config})
	}
	return append(out, cfg)
}

// overloadTable renders one load's results.
func overloadTable(title string, rep overload.Report, rs []overload.Result, capacity float64, goal func(string, map[string][]overload.Result) string) Table {
	t := Table{Title: title, Header: []string{"row",
		"cold: goodput within deadline (calls/s, % of capacity)", "cold: wasted work", "cold: p99 of good calls",
		"steady: goodput within deadline (calls/s, % of capacity)", "steady: wasted work", "steady: p99 of good calls",
		"onset to 90% of capacity", "recovery after the overload", "goal"}}
	by := map[string][]overload.Result{}
	for _, r := range rs {
		by[r.Row] = append(by[r.Row], r)
	}
	for _, v := range by { // the runs end in any order: index them by seed
		slices.SortFunc(v, func(a, b overload.Result) int { return cmp.Compare(a.Seed, b.Seed) })
	}
	for _, info := range rep.Rows {
		v := by[info.Name]
		if len(v) == 0 {
			continue
		}
		t.Rows = append(t.Rows, []string{info.Name,
			oRange(v, func(r overload.Result) float64 { return r.Cold.Goodput }, "%.0f") + " (" + oRange(v, func(r overload.Result) float64 { return 100 * r.Cold.Capacity }, "%.0f") + "%)",
			oRange(v, func(r overload.Result) float64 { return 100 * r.Cold.Wasted }, "%.0f") + "%",
			oRange(v, func(r overload.Result) float64 { return float64(r.Cold.P99) / 1e6 }, "%.0f") + " ms",
			oRange(v, func(r overload.Result) float64 { return r.Steady.Goodput }, "%.0f") + " (" + oRange(v, func(r overload.Result) float64 { return 100 * r.Steady.Capacity }, "%.0f") + "%)",
			oRange(v, func(r overload.Result) float64 { return 100 * r.Steady.Wasted }, "%.0f") + "%",
			oRange(v, func(r overload.Result) float64 { return float64(r.Steady.P99) / 1e6 }, "%.0f") + " ms",
			oDurations(v, func(r overload.Result) time.Duration { return r.Onset }, "not reached"),
			oDurations(v, func(r overload.Result) time.Duration { return r.Recovery }, "not within the run"),
			goal(info.Name, by)})
	}
	t.Notes = append(t.Notes,
		"Model: "+rep.Model+".",
		fmt.Sprintf("Capacity = %.0f calls/s. Goodput = calls answered within their own deadline, per second of the phase, by the second they started in. "+
			"Wasted work = the share of the downstream's busy time (service time of every request it accepted) spent on requests answered after their caller "+
			"had left (its deadline or its attempt's lease passed). Onset = from the start of the overload to the end of the first second whose good calls reach 90%% "+
			"of capacity. Recovery = from the end of the overload to the first second from which every second's calls succeed at least 90%% as often as before it. "+
			"Each cell is the range over the seeds %v; the calls (arrivals, service times, deadlines) are the same for every row of a seed.", capacity, rep.Seeds))
	return t
}

// bestPeer returns, per seed index, the best value of f over the peers'
// rows (higher is better).
func bestPeer(by map[string][]overload.Result, i int, f func(overload.Result) float64) float64 {
	best := -1.0
	for name, v := range by {
		if isPeerOverload(name) && i < len(v) {
			best = max(best, f(v[i]))
		}
	}
	return best
}

// overloadGoal judges a row of this project at one load.
func overloadGoal(name string, load float64, by map[string][]overload.Result) string {
	if !isThisOverload(name) {
		return "—"
	}
	v := by[name]
	good := func(r overload.Result) float64 { return r.Steady.Goodput }
	var parts []string
	switch {
	case load >= 5:
		ge, waste := true, true
		for i, r := range v {
			ge = ge && good(r) >= bestPeer(by, i, good)
			waste = waste && r.Steady.Wasted <= OverloadWasteGoal
		}
		parts = append(parts, "steady goodput ≥ best peer: "+verdict(ge), fmt.Sprintf("wasted ≤ %.0f%%: %s", 100*OverloadWasteGoal, verdict(waste)))
	case load <= 1:
		ge := true
		both := func(r overload.Result) float64 { return r.Cold.Goodput + r.Steady.Goodput }
		for i, r := range v {
			ref := bestPeer(by, i, both)
			if n := by[overload.NoLimiter]; i < len(n) {
				ref = max(ref, both(n[i]))
			}
			ge = ge && both(r) >= ref
		}
		parts = append(parts, "goodput ≥ no limiter and every peer: "+verdict(ge))
	}
	if load > 1 {
		onset := true
		for _, r := range v {
			onset = onset && r.Onset >= 0 && r.Onset <= OverloadOnsetGoal
		}
		parts = append(parts, fmt.Sprintf("onset ≤ %v: %s", OverloadOnsetGoal, verdict(onset)))
	}
	rec := true
	for i, r := range v {
		best := time.Duration(-1)
		for n, pv := range by {
			if isPeerOverload(n) && i < len(pv) && pv[i].Recovery >= 0 && (best < 0 || pv[i].Recovery < best) {
				best = pv[i].Recovery
			}
		}
		rec = rec && r.Recovery >= 0 && (best < 0 || r.Recovery <= best)
	}
	parts = append(parts, "recovery no slower than the best peer: "+verdict(rec))
	return strings.Join(parts, "; ")
}

// twoRouteGoal judges a row of this project in the two-route model.
func twoRouteGoal(name string, by map[string][]overload.Result) string {
	if !isThisOverload(name) {
		return "—"
	}
	ok := true
	good := func(r overload.Result) float64 { return r.Steady.Goodput }
	for i, r := range by[name] {
		ok = ok && good(r) >= TwoRouteGoal*bestPeer(by, i, good)
	}
	return fmt.Sprintf("steady goodput ≥ %.0f%% above the best peer: %s", 100*(TwoRouteGoal-1), verdict(ok))
}

// oRange formats the range of f over rs.
func oRange(rs []overload.Result, f func(overload.Result) float64, format string) string {
	vs := make([]float64, len(rs))
	for i, r := range rs {
		vs[i] = f(r)
	}
	lo, hi := fmt.Sprintf(format, slices.Min(vs)), fmt.Sprintf(format, slices.Max(vs))
	if lo == hi {
		return lo
	}
	return lo + "–" + hi
}

// oDurations formats the range of f over rs in seconds; a negative value
// is none.
func oDurations(rs []overload.Result, f func(overload.Result) time.Duration, none string) string {
	var vs []float64
	missing := false
	for _, r := range rs {
		if d := f(r); d >= 0 {
			vs = append(vs, d.Seconds())
		} else {
			missing = true
		}
	}
	if len(vs) == 0 {
		return none
	}
	lo, hi := fmt.Sprintf("%.0f", slices.Min(vs)), fmt.Sprintf("%.0f", slices.Max(vs))
	s := lo + " s"
	if lo != hi {
		s = lo + "–" + hi + " s"
	}
	if missing {
		s += " (" + none + " on some seeds)"
	}
	return s
}

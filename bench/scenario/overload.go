package scenario

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/deadlinebudget/budget/bench/overload"
)

// Issue 38's goals, judged on this project's rows against the peers (every
// row but no limiter, the oracle, the fixed limit and this project's own),
// on every seed.
const (
	// UniformGoal is the least share of the fixed limit's goodput this
	// project's rows keep in the uniform-budget model.
	UniformGoal = 0.95
	// P99Goal bounds the whole project's p99 of good calls, as a multiple
	// of the best peer's, at P99Loads and above.
	P99Goal  = 2.0
	P99Loads = 5
	// FloorGoal bounds the whole project's wasted work above its
	// unavoidable floor, in points, for a downstream that finishes what
	// it started.
	FloorGoal = 0.03
	// PropagatedWasteGoal bounds the whole project's wasted work where the
	// downstream honours the propagated deadline.
	PropagatedWasteGoal = 0.12
	// ClientLoad is the load at which the client alone must match
	// failsafe-go's adaptivelimiter.
	ClientLoad = 2
	// TwoRouteGoal is the least ratio of this project's steady goodput to
	// the best peer's in the two-route model (issue 31's).
	TwoRouteGoal = 1.20
)

// isThisOverload reports whether a row of the overload scenario is this
// project's.
func isThisOverload(name string) bool { return strings.HasPrefix(name, "deadline (this)") }

// isPeerOverload reports whether a row is a peer's.
func isPeerOverload(name string) bool {
	return !isThisOverload(name) && name != overload.NoLimiter && name != overload.Oracle && name != overload.FixedLimit
}

// phase is one phase of a run, as the tables show it.
type phase struct {
	name string
	get  func(overload.Result) overload.Phase
}

var (
	coldPhase   = phase{"cold", func(r overload.Result) overload.Phase { return r.Cold }}
	steadyPhase = phase{"steady", func(r overload.Result) overload.Phase { return r.Steady }}
	wholePhase  = phase{"whole overload", func(r overload.Result) overload.Phase { return r.Whole }}
)

// byRow indexes a set's results at one load by row, each row's by seed.
func byRow(s overload.Set, load float64) map[string][]overload.Result {
	by := map[string][]overload.Result{}
	for _, r := range s.Results {
		if r.Load == load {
			by[r.Row] = append(by[r.Row], r)
		}
	}
	for _, v := range by { // the runs end in any order: index them by seed
		slices.SortFunc(v, func(a, b overload.Result) int { return cmp.Compare(a.Seed, b.Seed) })
	}
	return by
}

// OverloadTables renders the overload scenario from the report of
// TestOverloadReport: issue 38's goals first, then per set one table per
// load, then the rows' configurations. Each cell is the range over the
// seeds.
func OverloadTables(rep overload.Report) []Table {
	out := []Table{overloadGoals(rep)}
	short := ""
	if rep.Short {
		short = " (short model)"
	}
	seeds := fmt.Sprintf("%d seeds", len(rep.Seeds))
	if len(rep.Seeds) == 1 {
		seeds = fmt.Sprintf("seed %d", rep.Seeds[0])
	}
	for _, s := range rep.Sets {
		for _, load := range s.Loads {
			by := byRow(s, load)
			var t Table
			switch s.Kind {
			case overload.SetUniform:
				t = uniformTable(fmt.Sprintf("Scenario 10u: uniform budgets (10 workers, 20ms, every call 100ms), %g× capacity, %s%s", load, seeds, short), rep, s, by)
			case overload.SetDefault:
				t = overloadTable(fmt.Sprintf("Scenario 10: overload at %g× capacity, cold start, downstream finishing what it started, %s%s", load, seeds, short), rep, s, by)
			case overload.SetPropagated:
				t = overloadTable(fmt.Sprintf("Scenario 10p: overload at %g× capacity, cold start, downstream honouring the propagated deadline, %s%s", load, seeds, short), rep, s, by)
			case overload.SetTwoRoutes:
				t = overloadTable(fmt.Sprintf("Scenario 10b: two routes (20ms and 200ms) sharing the downstream, overload at %g× capacity, cold start, %s%s", load, seeds, short), rep, s, by)
			default:
				continue
			}
			out = append(out, t)
		}
	}
	cfg := Table{Title: "Scenario 10: how each row is configured", Header: []string{"row", "configuration"}}
	seen := map[string]bool{}
	for _, s := range rep.Sets {
		for _, r := range s.Rows {
			if !seen[r.Name] {
				seen[r.Name] = true
				cfg.Rows = append(cfg.Rows, []string{r.Name, r.Config})
			}
		}
	}
	return append(out, cfg)
}

// cells formats a phase's goodput, wasted work, floor and p99.
func cells(v []overload.Result, p phase) []string {
	g := func(f func(overload.Phase) float64) func(overload.Result) float64 {
		return func(r overload.Result) float64 { return f(p.get(r)) }
	}
	return []string{
		oRange(v, g(func(p overload.Phase) float64 { return p.Goodput }), "%.0f") + " (" + oRange(v, g(func(p overload.Phase) float64 { return 100 * p.Capacity }), "%.0f") + "%)",
		oRange(v, g(func(p overload.Phase) float64 { return 100 * p.Wasted }), "%.0f") + "%",
		oRange(v, g(func(p overload.Phase) float64 { return 100 * p.Floor }), "%.0f") + "%",
		oRange(v, g(func(p overload.Phase) float64 { return float64(p.P99) / 1e6 }), "%.0f") + " ms",
	}
}

const overloadColumns = "Goodput = calls answered within their own deadline, per second of the phase, by the second they started in. " +
	"Wasted work = the share of the downstream's busy time (the time it spent on the requests it accepted) spent on requests answered after their " +
	"caller had left (its deadline or its attempt's lease passed) or stopped at their deadline. Floor = the share of the same busy time spent on " +
	"calls whose own service time exceeds their deadline: they miss even when started at once, so a downstream that finishes what it started " +
	"wastes that time whoever sends them; wasted − floor is what the row could have avoided. "

// overloadTable renders one load of issue 31's models.
func overloadTable(title string, rep overload.Report, s overload.Set, by map[string][]overload.Result) Table {
	t := Table{Title: title, Header: []string{"row",
		"cold: goodput within deadline (calls/s, % of capacity)", "cold: wasted work", "cold: floor", "cold: p99 of good calls",
		"steady: goodput within deadline (calls/s, % of capacity)", "steady: wasted work", "steady: floor", "steady: p99 of good calls",
		"onset to 90% of capacity", "recovery after the overload"}}
	for _, info := range s.Rows {
		v := by[info.Name]
		if len(v) == 0 {
			continue
		}
		row := append([]string{info.Name}, cells(v, coldPhase)...)
		row = append(row, cells(v, steadyPhase)...)
		t.Rows = append(t.Rows, append(row,
			oDurations(v, func(r overload.Result) time.Duration { return r.Onset }, "not reached"),
			oDurations(v, func(r overload.Result) time.Duration { return r.Recovery }, "not within the run")))
	}
	t.Notes = append(t.Notes,
		"Model: "+s.Model+".",
		fmt.Sprintf("Capacity = %.0f calls/s. %sThe model's own floor (every call sent once, started at once): %.1f%%. "+
			"Onset = from the start of the overload to the end of the first second whose good calls reach 90%% "+
			"of capacity. Recovery = from the end of the overload to the first second from which every second's calls succeed at least 90%% as often as "+
			"before it (after a cold start: as often as the run's calls fit their deadline at all). "+
			"Each cell is the range over the seeds %v; the calls (arrivals, service times, deadlines) are the same for every row of a seed.",
			s.Capacity, overloadColumns, 100*s.Floor, rep.Seeds))
	return t
}

// uniformTable renders one load of the uniform-budget model: each phase's
// goodput also as a share of the fixed limit's on the same seed.
func uniformTable(title string, rep overload.Report, s overload.Set, by map[string][]overload.Result) Table {
	t := Table{Title: title, Header: []string{"row",
		"cold: goodput, % of the fixed limit's", "steady: goodput, % of the fixed limit's",
		"whole overload: goodput within deadline (calls/s, % of capacity)", "whole overload: % of the fixed limit's",
		"whole overload: wasted work", "whole overload: floor", "whole overload: p99 of good calls", "recovery after the overload"}}
	ref := by[overload.FixedLimit]
	share := func(v []overload.Result, p phase) string {
		if len(ref) != len(v) {
			return "—"
		}
		return oRange(v, func(r overload.Result) float64 { return 100 * ratio(p.get(r).Goodput, p.get(refOf(ref, r)).Goodput) }, "%.0f") + "%"
	}
	for _, info := range s.Rows {
		v := by[info.Name]
		if len(v) == 0 {
			continue
		}
		w := cells(v, wholePhase)
		t.Rows = append(t.Rows, []string{info.Name, share(v, coldPhase), share(v, steadyPhase), w[0], share(v, wholePhase), w[1], w[2], w[3],
			oDurations(v, func(r overload.Result) time.Duration { return r.Recovery }, "not within the run")})
	}
	t.Notes = append(t.Notes,
		"Model: "+s.Model+".",
		fmt.Sprintf("Capacity = %.0f calls/s. %sEach cell is the range over the seeds %v; the calls are the same for every row of a seed, and a row's "+
			"share of the fixed limit's goodput is taken seed by seed.", s.Capacity, overloadColumns, rep.Seeds))
	return t
}

// refOf returns the result of refs on r's seed.
func refOf(refs []overload.Result, r overload.Result) overload.Result {
	for _, x := range refs {
		if x.Seed == r.Seed {
			return x
		}
	}
	return overload.Result{}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// bestPeer returns, on r's seed, the peer's result with the best goodput
// in phase p, and false when there is none.
func bestPeer(by map[string][]overload.Result, r overload.Result, p phase) (string, overload.Result, bool) {
	var best overload.Result
	name, ok := "", false
	for n, v := range by {
		if !isPeerOverload(n) {
			continue
		}
		x := refOf(v, r)
		if x.Row != "" && (!ok || p.get(x).Goodput > p.get(best).Goodput) {
			name, best, ok = n, x, true
		}
	}
	return name, best, ok
}

// goalRow is one line of the goals table.
type goalRow struct {
	goal, where, this, ref string
	ok                     bool
}

// overloadGoals judges issue 38's goals on every seed, load and phase.
func overloadGoals(rep overload.Report) Table {
	t := Table{Title: "Scenario 10: issue 38's goals, judged on every seed", Header: []string{"goal", "where", "this project", "reference", "verdict"}}
	var gs []goalRow
	// span formats the range of xs: unit is "%" (xs are shares), " ms"
	// or "/s".
	span := func(xs []float64, unit string) string {
		if len(xs) == 0 {
			return "—"
		}
		scale := 1.0
		if unit == "%" {
			scale = 100
		}
		lo, hi := fmt.Sprintf("%.0f", scale*slices.Min(xs)), fmt.Sprintf("%.0f", scale*slices.Max(xs))
		if lo == hi {
			return lo + unit
		}
		return lo + "–" + hi + unit
	}
	const pct, ms, perS = "%", " ms", "/s"
	for _, s := range rep.Sets {
		for _, load := range s.Loads {
			by := byRow(s, load)
			where := func(p phase) string { return fmt.Sprintf("%s, %g×, %s", s.Kind, load, p.name) }
			switch s.Kind {
			case overload.SetUniform:
				ref := by[overload.FixedLimit]
				for _, name := range []string{overload.ThisDefault, overload.ThisDefaultBT, overload.ThisDefaultWhole} {
					v := by[name]
					if len(v) == 0 || len(ref) == 0 {
						continue
					}
					var mine, refs []float64
					ok := true
					for _, r := range v {
						x := ratio(r.Whole.Goodput, refOf(ref, r).Whole.Goodput)
						mine, refs = append(mine, x), append(refs, refOf(ref, r).Whole.Goodput)
						ok = ok && x >= UniformGoal
					}
					gs = append(gs, goalRow{fmt.Sprintf("≥ %.0f%% of the fixed limit's goodput: %s", 100*UniformGoal, name), where(wholePhase),
						span(mine, pct), "fixed limit " + span(refs, perS), ok})
				}
			case overload.SetDefault, overload.SetPropagated, overload.SetTwoRoutes:
				whole, client := by[overload.ThisNew], by[overload.ThisNewClient]
				for _, p := range []phase{coldPhase, steadyPhase} {
					if len(whole) > 0 {
						var mine, refs []float64
						ok := true
						for _, r := range whole {
							_, b, has := bestPeer(by, r, p)
							mine = append(mine, p.get(r).Goodput)
							if has {
								refs = append(refs, p.get(b).Goodput)
								ok = ok && p.get(r).Goodput >= p.get(b).Goodput
							}
						}
						gs = append(gs, goalRow{"whole project's goodput ≥ the best peer's", where(p), span(mine, perS), "best peer " + span(refs, perS), ok})
						if load >= P99Loads && s.Kind != overload.SetTwoRoutes {
							mine, refs, ok = nil, nil, true
							for _, r := range whole {
								_, b, has := bestPeer(by, r, p)
								mine = append(mine, float64(p.get(r).P99)/1e6)
								if has {
									refs = append(refs, float64(p.get(b).P99)/1e6)
									ok = ok && float64(p.get(r).P99) <= P99Goal*float64(p.get(b).P99)
								}
							}
							gs = append(gs, goalRow{fmt.Sprintf("whole project's p99 of good calls ≤ %g× the best peer's (the peer of the best goodput)", P99Goal),
								where(p), span(mine, ms), "best peer " + span(refs, ms), ok})
						}
						if s.Kind == overload.SetDefault {
							mine, refs, ok = nil, nil, true
							for _, r := range whole {
								mine, refs = append(mine, p.get(r).Wasted), append(refs, p.get(r).Floor)
								ok = ok && p.get(r).Wasted <= p.get(r).Floor+FloorGoal
							}
							gs = append(gs, goalRow{fmt.Sprintf("whole project's wasted work ≤ its floor + %.0f points", 100*FloorGoal), where(p),
								span(mine, pct), "floor " + span(refs, pct), ok})
						}
						if s.Kind == overload.SetPropagated {
							mine, ok = nil, true
							for _, r := range whole {
								mine = append(mine, p.get(r).Wasted)
								ok = ok && p.get(r).Wasted <= PropagatedWasteGoal
							}
							gs = append(gs, goalRow{fmt.Sprintf("whole project's wasted work ≤ %.0f%%", 100*PropagatedWasteGoal), where(p), span(mine, pct), "—", ok})
						}
					}
					if s.Kind == overload.SetDefault && load == ClientLoad && len(client) > 0 {
						var mine, refs []float64
						ok := true
						for _, r := range client {
							f := refOf(by[overload.FailsafeAL], r)
							mine, refs = append(mine, p.get(r).Goodput), append(refs, p.get(f).Goodput)
							ok = ok && p.get(r).Goodput >= p.get(f).Goodput
						}
						gs = append(gs, goalRow{"client alone's goodput ≥ failsafe-go adaptivelimiter's", where(p), span(mine, perS), "adaptivelimiter " + span(refs, perS), ok})
					}
				}
			}
		}
	}
	for _, g := range gs {
		t.Rows = append(t.Rows, []string{g.goal, g.where, g.this, g.ref, verdict(g.ok)})
	}
	t.Notes = append(t.Notes, "The whole project is the row \""+overload.ThisNew+"\" (this project's client against the downstream with its server admission); "+
		"the client alone \""+overload.ThisNewClient+"\". The best peer is, seed by seed, the peer row (failsafe-go, Netflix, Envoy) of the highest goodput in the phase; "+
		"its p99 is that row's. Sets: uniform = the uniform-budget model (every call 100ms, 20ms of service), default = issue 31's model finishing what it started, "+
		"propagated = the same downstream honouring the propagated deadline, two routes = issue 31's two-route model. Each cell is the range over the seeds.")
	return t
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

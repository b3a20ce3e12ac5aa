package scenario

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/deadlinebudget/budget/bench/brownout"
	"github.com/deadlinebudget/budget/bench/peers"
)

// BrownoutFirstSuccessGoal is the bound on the time from the end of
// the brownout to the first success of the learned floor's row.
const BrownoutFirstSuccessGoal = 2 * time.Second

// BrownoutTable renders the brownout scenario from the report of
// TestBrownoutReport: per library, the range over the seeds of each
// figure. The goals are written on the learned floor's row, against this
// project without it and against the peers (not the hand-written loop),
// judged on every seed.
func BrownoutTable(rep brownout.Report) Table {
	t := Table{
		Title: fmt.Sprintf("Brownout: the provider 5× slower for a third of the run, virtual time (testing/synctest), %d seeds", len(rep.Seeds)),
		Header: []string{"library", "logical calls", "requests sent", "doomed attempts (ended by lease or deadline without an answer)",
			"of which during the brownout", "goodput over the run", "first success after the brownout", "time to recover goodput", "goal"},
	}
	var names []string
	by := map[string][]brownout.Result{}
	for _, r := range rep.Results {
		if _, ok := by[r.Library]; !ok {
			names = append(names, r.Library)
		}
		by[r.Library] = append(by[r.Library], r)
	}
	this := by[peers.Deadline{}.Name()]
	for _, name := range names {
		rs := by[name]
		goal := "—"
		if strings.HasPrefix(name, peers.LearnedName) {
			goal = brownoutGoal(rs, this, by)
		}
		t.Rows = append(t.Rows, []string{name,
			span(rs, func(r brownout.Result) float64 { return float64(r.Calls) }, "%.0f"),
			span(rs, func(r brownout.Result) float64 { return float64(r.Requests) }, "%.0f"),
			span(rs, func(r brownout.Result) float64 { return float64(r.Doomed) }, "%.0f"),
			span(rs, func(r brownout.Result) float64 { return float64(r.BrownoutDoomed) }, "%.0f"),
			span(rs, func(r brownout.Result) float64 { return 100 * r.Goodput() }, "%.2f") + "%",
			durations(rs, func(r brownout.Result) time.Duration { return r.FirstSuccess }, "%.2f s", "none"),
			durations(rs, func(r brownout.Result) time.Duration { return r.Recovery }, "%.0f s", "not within the run"),
			goal})
	}
	t.Notes = append(t.Notes,
		"Model: "+rep.Model+fmt.Sprintf("; seeds %v.", rep.Seeds),
		"Doomed attempt = a request whose client stopped waiting (its lease or the deadline ended it) before the provider answered; the provider "+
			"still serves it to the end, holding a worker. Refused attempts are not requests. First success = from the end of the brownout to the first "+
			"answer a client accepted. Time to recover = from the end of the brownout to the first second from which every second's calls succeed at "+
			"least 90% as often as before it. Ranges are over the seeds; the libraries' own jitter is unseeded.")
	return t
}

// brownoutGoal judges the learned floor's row on every seed: doomed
// attempts at most half of this project's without it and fewer than every
// peer's, goodput no lower than either, first success within the bound.
func brownoutGoal(learned, this []brownout.Result, by map[string][]brownout.Result) string {
	half, fewer, good, first := true, true, true, true
	for i, l := range learned {
		if i < len(this) {
			half = half && 2*l.Doomed <= this[i].Doomed
			good = good && l.Goodput() >= this[i].Goodput()
		}
		first = first && l.FirstSuccess >= 0 && l.FirstSuccess <= BrownoutFirstSuccessGoal
		for name, rs := range by {
			if strings.HasPrefix(name, peers.Deadline{}.Name()) || name == (peers.Baseline{}).Name() || i >= len(rs) {
				continue
			}
			fewer = fewer && l.Doomed < rs[i].Doomed
			good = good && l.Goodput() >= rs[i].Goodput()
		}
	}
	return fmt.Sprintf("doomed ≤ 50%% of this project without it: %s; fewer than every peer: %s; goodput no lower: %s; first success ≤ %v: %s",
		verdict(half), verdict(fewer), verdict(good), BrownoutFirstSuccessGoal, verdict(first))
}

// span formats the range of f over rs.
func span(rs []brownout.Result, f func(brownout.Result) float64, format string) string {
	vs := make([]float64, len(rs))
	for i, r := range rs {
		vs[i] = f(r)
	}
	lo, hi := slices.Min(vs), slices.Max(vs)
	if fmt.Sprintf(format, lo) == fmt.Sprintf(format, hi) {
		return fmt.Sprintf(format, lo)
	}
	return fmt.Sprintf(format, lo) + "–" + fmt.Sprintf(format, hi)
}

// durations formats the range of f over rs in seconds; a negative value is
// none.
func durations(rs []brownout.Result, f func(brownout.Result) time.Duration, format, none string) string {
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
	lo, hi := fmt.Sprintf(format, slices.Min(vs)), fmt.Sprintf(format, slices.Max(vs))
	s := lo
	if lo != hi {
		s = strings.TrimSuffix(lo, " s") + "–" + hi
	}
	if missing {
		s += " (" + none + " on some seeds)"
	}
	return s
}

package scenario

import (
	"fmt"
	"strings"

	"github.com/deadlinebudget/budget/bench/goodput"
	"github.com/deadlinebudget/budget/bench/peers"
)

// GoodputTable renders scenario 6 from the report of TestGoodputReport.
func GoodputTable(rep goodput.Report) Table {
	t := Table{
		Title: fmt.Sprintf("Scenario 6: goodput of a three-step plan on a fault model, virtual time (testing/synctest), %d runs per library", rep.Runs),
		Header: []string{"library", "runs", "finished inside the deadline with a result", "requests per run", "abandoned requests per run",
			"wasted provider time per run", "runs past the deadline", "goal"},
	}
	var this, baseline goodput.Totals
	var best goodput.Totals // the best peer library by goodput, then by fewer requests
	for _, tot := range rep.Totals {
		switch tot.Library {
		case peers.Deadline{}.Name():
			this = tot
			continue
		case peers.Baseline{}.Name():
			baseline = tot
			continue
		case goodput.AblationNoFloor:
			continue
		}
		if strings.HasPrefix(tot.Library, peers.LearnedName) {
			continue
		}
		if best.Runs == 0 || tot.Good > best.Good || (tot.Good == best.Good && tot.Requests < best.Requests) {
			best = tot
		}
	}
	for _, tot := range rep.Totals {
		goal := "—"
		if strings.HasPrefix(tot.Library, peers.LearnedName) && this.Runs > 0 && best.Runs > 0 {
			// The same comparison as this project's own goal: against the
			// best peer by goodput.
			goal = fmt.Sprintf("requests per run < best peer's (%s, %.3f): %s; goodput ≥ this project's without it (%.2f%%): %s",
				best.Library, best.RequestsPerRun(), verdict(tot.RequestsPerRun() < best.RequestsPerRun()), 100*this.GoodputShare(),
				verdict(tot.GoodputShare() >= this.GoodputShare()))
		}
		if tot.Library == this.Library && best.Runs > 0 {
			goal = fmt.Sprintf("goodput ≥ best peer (%s, %.2f%%): %s; requests per run ≤ its %.3f: %s", best.Library, 100*best.GoodputShare(),
				verdict(this.GoodputShare() >= best.GoodputShare()), best.RequestsPerRun(), verdict(this.RequestsPerRun() <= best.RequestsPerRun()))
			if baseline.Runs > 0 {
				goal += fmt.Sprintf(" (versus the hand-written loop: goodput %+.2f points, requests per run %+.3f)",
					100*(this.GoodputShare()-baseline.GoodputShare()), this.RequestsPerRun()-baseline.RequestsPerRun())
			}
		}
		t.Rows = append(t.Rows, []string{tot.Library, fmt.Sprint(tot.Runs), fmt.Sprintf("%.2f%% (%d)", 100*tot.GoodputShare(), tot.Good),
			fmt.Sprintf("%.3f", tot.RequestsPerRun()), fmt.Sprintf("%.3f", float64(tot.Abandoned)/float64(max(tot.Runs, 1))),
			ms(tot.WastedPerRun()), fmt.Sprint(tot.Late), goal})
	}
	t.Notes = append(t.Notes,
		"Model: "+rep.Model+".",
		"Each run: the caller's context carries the run's deadline and each step's own limit is what is left of it (mode ctx). "+
			"Abandoned = requests the client stopped waiting for (per-attempt timeout or deadline). Wasted provider time = the full latency of "+
			"abandoned requests (the provider finishes what it started) plus the latency of the answers of runs that ended without a result.")
	return t
}

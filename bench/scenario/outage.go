package scenario

import (
	"fmt"
	"time"

	"github.com/deadlinebudget/budget/bench/outage"
	"github.com/deadlinebudget/budget/bench/peers"
)

// AmplificationGoal is the bound on this project's load
// amplification during the outage: requests sent per logical call.
const AmplificationGoal = 1.25

// OutageTable renders scenario 8 from the report of TestOutageReport.
func OutageTable(rep outage.Report) Table {
	t := Table{
		Title: "Scenario 8: outage and metastable recovery, virtual time (testing/synctest)",
		Header: []string{"library", "logical calls", "requests sent", "load amplification during the outage", "time to recover goodput after the outage",
			"goodput over the run", "goodput before the outage", "goal"},
	}
	var this outage.Result
	var bestRecovery time.Duration = -1
	bestGoodput := -1.0
	for _, r := range rep.Results {
		switch r.Library {
		case (&peers.DeadlineBudget{}).Name():
			this = r
			continue
		case peers.Deadline{}.Name(), peers.Baseline{}.Name(), outage.NoRetries:
			continue
		}
		if r.Recovery >= 0 && (bestRecovery < 0 || r.Recovery < bestRecovery) {
			bestRecovery = r.Recovery
		}
		bestGoodput = max(bestGoodput, r.Goodput())
	}
	for _, r := range rep.Results {
		goal := "—"
		if r.Library == this.Library {
			recovered := r.Recovery >= 0 && (bestRecovery < 0 || r.Recovery <= bestRecovery)
			goal = fmt.Sprintf("amplification ≤ %.2f×: %s; recovery no slower than the best peer: %s; goodput ≥ every peer: %s",
				AmplificationGoal, verdict(r.OutageAmplification <= AmplificationGoal),
				verdict(recovered), verdict(r.Goodput() >= bestGoodput))
		}
		t.Rows = append(t.Rows, []string{r.Library, fmt.Sprint(r.Calls), fmt.Sprint(r.Requests), fmt.Sprintf("%.2f×", r.OutageAmplification),
			recovery(r.Recovery), fmt.Sprintf("%.1f%%", 100*r.Goodput()), fmt.Sprintf("%.1f%%", 100*r.Baseline), goal})
	}
	t.Notes = append(t.Notes,
		"Model: "+rep.Model+".",
		"Load amplification = requests sent during the outage per logical call started during it. Time to recover = from the end of the outage "+
			"to the first second from which every second's calls succeed at least 90% as often as before the outage; “not within the run” = "+
			"the server was up and goodput never came back (the metastable state). The no-retries row is a reference, not a library: it shows "+
			"the server does come back once the offered load falls under its capacity. The hand-written loop is not a peer and is left out of the goals.",
		"This project is shown twice: deadline.Do as configured in every other scenario (no retry budget, 3 attempts), and with "+
			"Policy.RetryBudget, one deadline.NewRetryBudget() (its defaults: 20% of first attempts in 10s + 10 retries/s) shared by "+
			"every client, as a service holds one per downstream. The goals are judged on the budgeted row; the peers are configured "+
			"as before, failsafe-go also with its own budget.")
	return t
}

func recovery(d time.Duration) string {
	if d < 0 {
		return "not within the run"
	}
	return fmt.Sprintf("%.0f s", d.Seconds())
}

package scenario

import (
	"fmt"
	"strings"
	"time"

	"github.com/deadlinebudget/budget/bench/outage"
	"github.com/deadlinebudget/budget/bench/peers"
)

// AmplificationGoal is the bound on this project's load
// amplification during the outage: requests sent per logical call.
const AmplificationGoal = 1.25

// AdmissionGoodputGoal is issue 21's least goodput over the run for this
// project's client against the server with admission (the row
// [outage.AdmissionName]).
const AdmissionGoodputGoal = 0.60

// OutageTable renders scenario 8 from the report of TestOutageReport. The
// issue's goals are written on both of this project's budgeted rows, the
// plain retry budget (what a user gets by default) and the retry budget
// with the overload charge (the row that is judged), each against the
// peers only: not this project's other rows, not the hand-written loop, not
// the no-retries reference.
func OutageTable(rep outage.Report) Table {
	t := Table{
		Title: "Scenario 8: outage and metastable recovery, virtual time (testing/synctest)",
		Header: []string{"library", "logical calls", "requests sent", "load amplification during the outage", "time to recover goodput after the outage",
			"goodput over the run", "goodput before the outage", "goal"},
	}
	var bestRecovery time.Duration = -1
	bestGoodput := -1.0
	var charged, ref *outage.Result
	for i, r := range rep.Results {
		switch {
		case isOverloadRow(r.Library):
			charged = &rep.Results[i]
			continue
		case r.Library == outage.NoRetries:
			ref = &rep.Results[i]
			continue
		case r.Library == outage.NoRetriesAdmission:
			continue
		case isThisProject(r.Library), r.Library == peers.Baseline{}.Name():
			continue
		}
		if r.Recovery >= 0 && (bestRecovery < 0 || r.Recovery < bestRecovery) {
			bestRecovery = r.Recovery
		}
		bestGoodput = max(bestGoodput, r.Goodput())
	}
	for _, r := range rep.Results {
		goal := "—"
		if r.Library == (&peers.DeadlineBudget{}).Name() || isOverloadRow(r.Library) {
			recovered := r.Recovery >= 0 && (bestRecovery < 0 || r.Recovery <= bestRecovery)
			goal = fmt.Sprintf("amplification ≤ %.2f×: %s; recovery no slower than the best peer: %s; goodput ≥ every peer: %s",
				AmplificationGoal, verdict(r.OutageAmplification <= AmplificationGoal),
				verdict(recovered), verdict(r.Goodput() >= bestGoodput))
		}
		if r.Library == outage.AdmissionName && ref != nil {
			goal = fmt.Sprintf("amplification ≤ %.2f×: %s; recovery no slower than the no-retries reference: %s; goodput ≥ %.0f%%: %s",
				AmplificationGoal, verdict(r.OutageAmplification <= AmplificationGoal),
				verdict(r.Recovery >= 0 && (ref.Recovery < 0 || r.Recovery <= ref.Recovery)),
				100*AdmissionGoodputGoal, verdict(r.Goodput() >= AdmissionGoodputGoal))
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
		"This project is shown three times: deadline.Do as configured in every other scenario (no retry budget, 3 attempts); with "+
			"Policy.RetryBudget, one deadline.NewRetryBudget() (its defaults: 20% of first attempts in 10s + 10 retries/s) shared by "+
			"every client, as a service holds one per downstream; and with the same budget through deadlinehttp.Transport "+
			fmt.Sprintf("(WithRetryBudget, WithOverloadCharge(%d): each 503 without Retry-After charges the budget %d tokens), ", outage.OverloadCharge, outage.OverloadCharge)+
			"over an in-memory base RoundTripper that calls the model's server and answers its 503s. The goals are judged on the "+
			"overload-charge row, the issue's answer to a storm; they are written on the plain budgeted row too, since that is what a user "+
			"gets without the charge. The peers are configured as before, failsafe-go also with its own budget.")
	t.Notes = append(t.Notes, "The last two rows run against this project's server admission instead of the plain server: "+
		"deadlinehttp.NewHandler with WithAdmissionQueue (one slot, the server working one request at a time; a backlog of the 2 s of work "+
		"the plain server queues) and WithLearnedAdmission (deadline/learn's Kaplan–Meier estimate of the server's own service time, "+
		fmt.Sprintf("threshold %g), in front of the same server, the attempt's lease sent as the budget header. ", outage.AdmissionThreshold)+
		"A request waits for the slot only while what is left of its budget still covers the learned service time, and is refused "+
		"(504 with Deadline-Refused, which this project's transport never retries) as soon as it does not; once a queue stands the newest "+
		"is served first (adaptive LIFO). Its client is this project's deadlinehttp.Transport with the retry budget's defaults alone "+
		"(WithRetryBudget(deadline.NewRetryBudget()), no overload charge): its goals are issue 21's, against the no-retries reference on "+
		"the plain server. The last row is the same server without retries.")
	if charged != nil && ref != nil {
		t.Notes = append(t.Notes, fmt.Sprintf("Against the no-retries reference (reported, not a goal): the overload-charge row recovers in %s "+
			"(the reference: %s), with goodput %.1f%% (the reference: %.1f%%) and %.2f× amplification (the reference: %.2f×).",
			recovery(charged.Recovery), recovery(ref.Recovery), 100*charged.Goodput(), 100*ref.Goodput(),
			charged.OutageAmplification, ref.OutageAmplification))
	}
	return t
}

// OverloadSweepTable renders the sweep of the overload charge from the
// report of TestOutageReport: the same model and the same transport and
// budget as the overload-charge row of [OutageTable], for each charge.
func OverloadSweepTable(rep outage.Report) Table {
	t := Table{
		Title: "Scenario 8b: the overload charge swept, same model, virtual time (testing/synctest)",
		Header: []string{"WithOverloadCharge(n)", "requests sent", "load amplification during the outage", "time to recover goodput after the outage",
			"goodput over the run"},
	}
	for i, r := range rep.Sweep {
		n := r.Library
		if i < len(rep.Charges) {
			n = fmt.Sprint(rep.Charges[i])
			if rep.Charges[i] == outage.OverloadCharge {
				n += " (the row of scenario 8)"
			}
		}
		t.Rows = append(t.Rows, []string{n, fmt.Sprint(r.Requests), fmt.Sprintf("%.2f×", r.OutageAmplification),
			recovery(r.Recovery), fmt.Sprintf("%.1f%%", 100*r.Goodput())})
	}
	t.Notes = append(t.Notes,
		"deadline (this) + retry budget through deadlinehttp.Transport with WithRetryBudget(deadline.NewRetryBudget()) and WithOverloadCharge(n), "+
			"the model and the columns of scenario 8: n tokens are charged to the shared budget per 503 without Retry-After, on top of the one a "+
			"retry takes; n = 0 is the retry budget alone over HTTP.")
	return t
}

// isOverloadRow reports whether library is this project's overload-charge
// row.
func isOverloadRow(library string) bool { return strings.HasPrefix(library, peers.OverloadName) }

// isThisProject reports whether library is one of this project's rows.
func isThisProject(library string) bool {
	return strings.HasPrefix(library, peers.Deadline{}.Name())
}

func recovery(d time.Duration) string {
	if d < 0 {
		return "not within the run"
	}
	return fmt.Sprintf("%.0f s", d.Seconds())
}

package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/deadlinebudget/budget/bench/outage"
	"github.com/deadlinebudget/budget/bench/peers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunMetrics pins the definitions behind the published columns on a
// hand-built run.
func TestRunMetrics(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	r := &Run{Start: at(0), Deadline: at(1000), Return: at(1002)}
	r.attempts = []attemptRec{
		{start: at(0), end: at(400), hasDeadline: true, ctxDeadline: at(400)},
		{start: at(450), end: at(850), hasDeadline: true, ctxDeadline: at(1100)}, // outlives the run
		{start: at(990), end: at(1000), hasDeadline: false},                      // doomed, no deadline
	}
	assert.Equal(t, 2*time.Millisecond, r.Overshoot())
	assert.Equal(t, 3, r.Attempts())
	assert.Equal(t, 1, r.Doomed())
	assert.Equal(t, 1, r.DoomedWithin(FastFailLatency), "10ms left")
	assert.Equal(t, 2, r.DoomedWithin(600*time.Millisecond), "550ms and 10ms left")
	assert.Equal(t, 2, r.WithDeadline())
	assert.Equal(t, 2, r.Unbounded())
	assert.Equal(t, (50+140+2)*time.Millisecond, r.Slept())
	assert.Equal(t, 1, r.SleepsIntoDeadline(), "the 140ms sleep ended 10ms before the deadline; the 2ms pause after the last attempt ended past it")
}

func TestHTTPRunMetrics(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := &HTTPRun{Arrivals: []time.Time{t0, t0.Add(3 * time.Second), t0.Add(3500 * time.Millisecond)}, Status: 0}
	assert.Equal(t, 3, r.Requests())
	assert.Equal(t, 1, r.Early(3*time.Second))
	assert.False(t, r.Names(503))
	r.Err = errors.New(`GET http://127.0.0.1:45033 giving up after 5 attempt(s)`)
	assert.False(t, r.Names(503), "a port is not a status")
	r.Err = errors.New("fetch: attempts exhausted: HTTP 503 Service Unavailable")
	assert.True(t, r.Names(503))
	r.Err = errors.New("transient failure: status 503, Retry-After 3s")
	assert.True(t, r.Names(503))
	r.Err = nil
	r.Status = 503
	assert.True(t, r.Names(503))
}

func TestDurations(t *testing.T) {
	d := Durations{5, 1, 4, 2, 3}
	assert.Equal(t, time.Duration(3), d.Quantile(0.5))
	assert.Equal(t, time.Duration(5), d.Quantile(0.99))
	assert.Equal(t, time.Duration(5), d.Max())
	assert.Equal(t, time.Duration(0), Durations{}.Quantile(0.5))
	lbl, v := tail(d)
	assert.Equal(t, "max", lbl)
	assert.Equal(t, time.Duration(5), v)
}

// TestScenario1ThisProject runs scenario 1's call for this project in
// virtual time, in both modes: no doomed attempt, no return after the
// deadline, every attempt's context bounded by the run's deadline.
func TestScenario1ThisProject(t *testing.T) {
	for _, m := range Modes {
		synctest.Test(t, func(t *testing.T) {
			r := call(peers.Deadline{}, m, peers.Scenario1(), SlowOp)
			assert.LessOrEqual(t, r.Overshoot(), time.Duration(0), m.String())
			assert.Zero(t, r.Doomed())
			assert.Zero(t, r.Unbounded())
			assert.Equal(t, r.Attempts(), r.WithDeadline())
			assert.GreaterOrEqual(t, r.Attempts(), 2, "a slow op is retried while the budget allows")
		})
	}
}

// TestScenario2EveryLibrary runs scenario 2's call for every library in
// virtual time: each makes attempts and none returns more than one attempt's
// duration past the deadline, in either mode.
func TestScenario2EveryLibrary(t *testing.T) {
	for _, r := range peers.All() {
		for _, m := range Modes {
			synctest.Test(t, func(t *testing.T) {
				run := call(r, m, peers.Scenario1(), FastFailOp)
				assert.GreaterOrEqual(t, run.Attempts(), 2, "%s %s", r.Name(), m)
				assert.LessOrEqual(t, run.Overshoot(), 30*time.Millisecond, "%s %s", r.Name(), m)
			})
		}
	}
}

func TestTablesRender(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rs := peers.All()
		res, jobs := PlanScenario(rs, peers.Scenario1(), Options{Runs: 1, Parallel: 4}, FastFailOp)
		require.Len(t, jobs, len(rs)*len(Modes))
		RunAll(4, jobs)
		var b bytes.Buffer
		FastTable(rs, res, peers.Scenario1()).Markdown(&b)
		out := b.String()
		assert.Contains(t, out, "### Scenario 2")
		assert.Equal(t, 2+len(rs)*len(Modes), strings.Count(out, "\n|"), "header, separator and one row per library and mode")
		assert.Contains(t, out, "zero doomed: met")
		assert.Contains(t, out, "attempts started with < 30ms left (total)")
	})
}

// TestPostFaultServer checks scenario 5's server on real loopback: the first
// delivery of each fault fails as described, the second succeeds. Only
// counts and statuses are asserted.
func TestPostFaultServer(t *testing.T) {
	for _, fault := range []string{"503", "reset"} {
		run := sendOnce(peers.OpHTTP{Retrier: peers.Baseline{}}, ModeContext, peers.Scenario1(), http.MethodPost, []byte("x"), PostFault(fault))
		require.NoError(t, run.Err, fault)
		assert.Equal(t, 200, run.Status, fault)
		assert.Equal(t, 2, run.Requests(), fault)
	}
	run := sendOnce(peers.DeadlineHTTP{}, ModeContext, peers.Scenario1(), http.MethodPost, []byte("x"), PostFault("503"))
	assert.Equal(t, 1, run.Requests())
}

// TestOutageTable renders scenario 8 from a hand-made report: this
// project's goal is written on both budgeted rows, judged against the peers
// only (not its own unbudgeted row, not the hand-written loop, not the
// no-retries reference), a run that never recovers says so, and the
// overload-charge row is compared with the no-retries reference in a note.
func TestOutageTable(t *testing.T) {
	overload := fmt.Sprintf("%s %d", peers.OverloadName, outage.OverloadCharge)
	rep := outage.Report{Model: "m", Results: []outage.Result{
		{Library: peers.Deadline{}.Name(), Calls: 100, Good: 60, Requests: 280, OutageAmplification: 2.8, Recovery: time.Second, Baseline: 1},
		{Library: (&peers.DeadlineBudget{}).Name(), Calls: 100, Good: 50, Requests: 120, OutageAmplification: 1.2, Recovery: 2 * time.Second, Baseline: 1},
		{Library: overload, Calls: 100, Good: 70, Requests: 110, OutageAmplification: 1.1, Recovery: 3 * time.Second, Baseline: 1},
		{Library: peers.Failsafe{}.Name(), Calls: 100, Good: 40, Requests: 290, OutageAmplification: 2.9, Recovery: -1, Baseline: 1},
		{Library: peers.Cenkalti{}.Name(), Calls: 100, Good: 55, Requests: 250, OutageAmplification: 2.5, Recovery: 2 * time.Second, Baseline: 1},
		{Library: peers.Baseline{}.Name(), Calls: 100, Good: 90, Requests: 100, OutageAmplification: 1, Recovery: time.Second, Baseline: 1},
		{Library: outage.NoRetries, Calls: 100, Good: 95, Requests: 100, OutageAmplification: 1, Recovery: 0, Baseline: 1},
		{Library: outage.AdmissionName, Calls: 100, Good: 75, Requests: 101, OutageAmplification: 1.01, Recovery: 0, Baseline: 1},
		{Library: outage.NoRetriesAdmission, Calls: 100, Good: 99, Requests: 100, OutageAmplification: 1, Recovery: 0, Baseline: 1},
	}}
	var b bytes.Buffer
	OutageTable(rep).Markdown(&b)
	out := b.String()
	assert.Contains(t, out, "| "+outage.AdmissionName+" | 100 | 101 | 1.01× | 0 s | 75.0% | 100.0% | amplification ≤ 1.25×: met; "+
		"recovery no slower than the no-retries reference: met; goodput ≥ 60%: met |", "judged against the reference, not the peers")
	assert.Contains(t, out, "| "+outage.NoRetriesAdmission+" | 100 | 100 | 1.00× | 0 s | 99.0% | 100.0% | — |", "a reference is not judged, nor a best peer")
	assert.Contains(t, out, "| deadline (this) + retry budget | 100 | 120 | 1.20× | 2 s | 50.0% | 100.0% | amplification ≤ 1.25×: met; "+
		"recovery no slower than the best peer: met; goodput ≥ every peer: **missed** |", "cenkalti's 55% beats it; the unbudgeted row's 60% is not a peer")
	assert.Contains(t, out, "| "+overload+" | 100 | 110 | 1.10× | 3 s | 70.0% | 100.0% | amplification ≤ 1.25×: met; "+
		"recovery no slower than the best peer: **missed**; goodput ≥ every peer: met |", "cenkalti recovers in 2 s")
	assert.Contains(t, out, "| deadline (this) | 100 | 280 | 2.80× | 1 s | 60.0% | 100.0% | — |", "the unbudgeted row is shown, not judged")
	assert.Contains(t, out, "| failsafe-go v0.9.8 | 100 | 290 | 2.90× | not within the run | 40.0% |")
	assert.Contains(t, out, "the overload-charge row recovers in 3 s (the reference: 0 s), with goodput 70.0% (the reference: 95.0%)")
	assert.Contains(t, out, "The goals are judged on the overload-charge row")
}

// TestOverloadSweepTable renders the sweep: one row per charge, the
// published charge marked.
func TestOverloadSweepTable(t *testing.T) {
	rep := outage.Report{
		Sweep: []outage.Result{
			{Library: "a", Calls: 100, Good: 10, Requests: 125, OutageAmplification: 1.25, Recovery: -1},
			{Library: "b", Calls: 100, Good: 60, Requests: 101, OutageAmplification: 1.01, Recovery: 6 * time.Second},
		},
		Charges: []int{0, outage.OverloadCharge},
	}
	var b bytes.Buffer
	OverloadSweepTable(rep).Markdown(&b)
	out := b.String()
	assert.Contains(t, out, "| 0 | 125 | 1.25× | not within the run | 10.0% |")
	assert.Contains(t, out, fmt.Sprintf("| %d (the row of scenario 8) | 101 | 1.01× | 6 s | 60.0%% |", outage.OverloadCharge))
}

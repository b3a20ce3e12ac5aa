package outage

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/deadlinebudget/budget/bench/peers"
)

var reportOut = flag.String("outage.out", "", "TestOutageReport: write every library's result as JSON to this file (no file: the test is skipped)")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestOutageReport produces the outage table's data. It runs only when
// -outage.out is given, as cmd/compare does.
func TestOutageReport(t *testing.T) {
	if *reportOut == "" {
		t.Skip("run by cmd/compare with -outage.out")
	}
	m := Default()
	rs, err := Libraries(m)
	require.NoError(t, err)
	rep := Report{Model: m.String()}
	for _, r := range rs {
		synctest.Test(t, func(t *testing.T) {
			res, err := Simulate(r, m)
			require.NoError(t, err)
			rep.Results = append(rep.Results, res)
		})
	}
	// Reference: a client that never retries, to show that the server does
	// recover when the offered load falls under its capacity.
	synctest.Test(t, func(t *testing.T) {
		m1 := m
		m1.Call.MaxAttempts = 1
		res, err := Simulate(peers.Baseline{}, m1)
		require.NoError(t, err)
		res.Library = NoRetries
		rep.Results = append(rep.Results, res)
	})
	// With the server's admission on: this project's client with the
	// retry budget alone, and the no-retries reference.
	rows, err := AdmissionRows(m)
	require.NoError(t, err)
	for _, row := range rows {
		synctest.Test(t, func(t *testing.T) {
			res, err := Simulate(row.Retrier, row.Model)
			require.NoError(t, err)
			rep.Results = append(rep.Results, res)
		})
	}
	for _, n := range OverloadSweep {
		o, err := peers.NewDeadlineOverload(m.Call, n)
		require.NoError(t, err)
		synctest.Test(t, func(t *testing.T) {
			res, err := Simulate(o, m)
			require.NoError(t, err)
			rep.Sweep = append(rep.Sweep, res)
			rep.Charges = append(rep.Charges, n)
		})
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(*reportOut, b, 0o644))
}

// small is a model that runs quickly: 20 clients on capacity 25.
func small() Model {
	m := Default()
	m.Clients, m.Capacity = 20, 25
	m.Warmup, m.Outage, m.After = 3*time.Second, 3*time.Second, 10*time.Second
	return m
}

// TestNoRetryRecovers checks the model on a client that never retries: it
// sends exactly one request per call and loses the outage; after it, the
// queue of 2s that the outage left drains at capacity minus load (25 − 20
// requests/s, 10s for 50 requests), and goodput comes back once a request
// waits less than an attempt may (400ms): about 8s after the outage.
func TestNoRetryRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := small()
		m.Call.MaxAttempts = 1
		res, err := Simulate(peers.Baseline{}, m)
		require.NoError(t, err)
		assert.InDelta(t, 1.0, res.Baseline, 0.001, "80%% load, evenly spread: every call succeeds")
		assert.InDelta(t, 1.0, res.OutageAmplification, 0.001)
		assert.Equal(t, 20*16, res.Calls)
		for i := 3; i < 6; i++ {
			assert.Zero(t, res.Seconds[i].Good, "second %d is in the outage", i)
		}
		assert.GreaterOrEqual(t, res.Recovery, 7*time.Second, "seconds: %+v", res.Seconds)
		assert.LessOrEqual(t, res.Recovery, 9*time.Second, "seconds: %+v", res.Seconds)
	})
}

// TestRetryStormIsMetastable checks the model's point: the hand-written
// loop's three attempts per call triple the load in the outage, and after
// it the queue holds requests that wait longer than an attempt may, so
// goodput does not come back although the server is up.
func TestRetryStormIsMetastable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		res, err := Simulate(peers.Baseline{}, small())
		require.NoError(t, err)
		assert.Greater(t, res.OutageAmplification, 2.0)
		assert.Equal(t, time.Duration(-1), res.Recovery, "seconds: %+v", res.Seconds)
	})
}

func TestValidate(t *testing.T) {
	m := Default()
	m.Capacity = 0
	_, err := Simulate(peers.Baseline{}, m)
	assert.ErrorContains(t, err, "Capacity is 0")
	m = Default()
	m.Call.MaxAttempts = 0
	assert.ErrorContains(t, m.Validate(), "MaxAttempts")
	assert.NoError(t, Default().Validate())
}

// TestLibraries checks the rows of scenario 8: this project first, then
// its budgeted form, then its budgeted form with the overload charge, then
// failsafe-go followed by its budgeted form, then the other libraries.
func TestLibraries(t *testing.T) {
	rs, err := Libraries(Default())
	require.NoError(t, err)
	require.Len(t, rs, len(peers.All())+3)
	assert.Equal(t, peers.Deadline{}.Name(), rs[0].Name())
	assert.Equal(t, peers.Deadline{}.Name()+" + retry budget", rs[1].Name())
	assert.Equal(t, fmt.Sprintf("%s %d", peers.OverloadName, OverloadCharge), rs[2].Name())
	assert.Equal(t, peers.Failsafe{}.Name(), rs[3].Name())
	assert.Contains(t, rs[4].Name(), "+ budget")
}

// TestOverloadChargeRecovers checks the published model on this project's
// overload-charge row: the 503s of the outage overdraw the shared budget,
// so retries stop, the clients offer only their 200 first attempts per
// second, under the capacity of 250, and the queue the outage left drains
// as it does without retries. With no charge (the same transport and
// budget) the 10 retries per second of the budget's floor and its 20 % keep
// the offered load at the capacity, and goodput never comes back.
func TestOverloadChargeRecovers(t *testing.T) {
	m := Default()
	run := func(n int) Result {
		o, err := peers.NewDeadlineOverload(m.Call, n)
		require.NoError(t, err)
		var res Result
		synctest.Test(t, func(t *testing.T) {
			res, err = Simulate(o, m)
			require.NoError(t, err)
		})
		return res
	}
	var ref Result
	synctest.Test(t, func(t *testing.T) {
		m1 := m
		m1.Call.MaxAttempts = 1
		var err error
		ref, err = Simulate(peers.Baseline{}, m1)
		require.NoError(t, err)
	})
	require.GreaterOrEqual(t, ref.Recovery, time.Duration(0), "the no-retries reference recovers")

	charged := run(OverloadCharge)
	assert.LessOrEqual(t, charged.OutageAmplification, 1.25)
	assert.InDelta(t, 1.0, charged.Baseline, 0.001, "every call succeeds before the outage")
	require.GreaterOrEqual(t, charged.Recovery, time.Duration(0), "recovers within the run; seconds: %+v", charged.Seconds)
	assert.LessOrEqual(t, charged.Recovery, ref.Recovery+time.Second, "about as soon as without retries")
	assert.GreaterOrEqual(t, charged.Goodput(), ref.Goodput()-0.01)

	none := run(0)
	assert.Equal(t, time.Duration(-1), none.Recovery, "no charge: metastable; seconds: %+v", none.Seconds)
	assert.Less(t, none.Goodput(), charged.Goodput())
}

// TestAdmissionRecovers checks the published model with the server's
// admission on and this project's client with only the retry budget's
// defaults: the requests that wait through the outage leave the queue
// refused before their lease ends, so they are not retried and the server
// is left no dead queue; it recovers no slower than the no-retries
// reference against the plain server, with at least its goodput.
func TestAdmissionRecovers(t *testing.T) {
	m := Default()
	var ref Result
	synctest.Test(t, func(t *testing.T) {
		m1 := m
		m1.Call.MaxAttempts = 1
		var err error
		ref, err = Simulate(peers.Baseline{}, m1)
		require.NoError(t, err)
	})
	rows, err := AdmissionRows(m)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	var res [2]Result
	for i, row := range rows {
		synctest.Test(t, func(t *testing.T) {
			res[i], err = Simulate(row.Retrier, row.Model)
			require.NoError(t, err)
		})
		t.Logf("%s: %d requests, amplification %.2f, recovery %v, goodput %.3f, baseline %.3f; seconds %+v",
			row.Retrier.Name(), res[i].Requests, res[i].OutageAmplification, res[i].Recovery, res[i].Goodput(), res[i].Baseline, res[i].Seconds)
	}
	adm := res[0]
	assert.Equal(t, AdmissionName, adm.Library)
	assert.InDelta(t, 1.0, adm.Baseline, 0.001, "every call succeeds before the outage")
	require.GreaterOrEqual(t, adm.Recovery, time.Duration(0), "recovers within the run")
	assert.LessOrEqual(t, adm.Recovery, ref.Recovery, "no slower than the no-retries reference")
	assert.GreaterOrEqual(t, adm.Goodput(), 0.60)
	assert.LessOrEqual(t, adm.OutageAmplification, 1.25)
}

// TestAdmissionNeedsNoClientCooperation checks that the server's admission
// alone ends the metastable state: against it, clients that retry every
// failure three times (the hand-written loop, which storms the plain
// server forever, TestRetryStormIsMetastable) still find the server
// recovered as soon as the outage ends, since no dead request is left in
// its queue and the newest are served first.
func TestAdmissionNeedsNoClientCooperation(t *testing.T) {
	m := Default()
	m.Admission = true
	for _, r := range []peers.Retrier{peers.Baseline{}, peers.Deadline{}} {
		synctest.Test(t, func(t *testing.T) {
			res, err := Simulate(r, m)
			require.NoError(t, err)
			t.Logf("%s against the server with admission: %d requests, amplification %.2f×, recovery %v, goodput %.1f%%",
				r.Name(), res.Requests, res.OutageAmplification, res.Recovery, 100*res.Goodput())
			assert.Greater(t, res.OutageAmplification, 1.5, "the clients do retry")
			assert.Equal(t, time.Duration(0), res.Recovery, "seconds: %+v", res.Seconds)
			assert.GreaterOrEqual(t, res.Goodput(), 0.60)
		})
	}
}

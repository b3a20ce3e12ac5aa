package test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/agenttest"
)

// TestReserveRule measures, in virtual time, agenttest's reserve cases (the
// same as otelbudgeteino's TestReserveRule), 200 runs each: at least 99 %
// answer (the reserve covers one model call in every case), none returns
// after its deadline, no call starts with the floor or less left.
func TestReserveRule(t *testing.T) {
	for _, rc := range agenttest.ReserveCases {
		t.Run(rc.Name, func(t *testing.T) {
			var ta agenttest.ReserveTally
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				prov, tl := &provider{Turns: 10}, &tool{Latency: agenttest.ReserveToolLatency}
				s := newSetup(t, ctx, memTransport{H: prov}, fakeURL, prov, tl, false)
				a := agent(t, rc.Reserve, nil)
				for _, run := range rc.ReserveDraws() {
					prov.Reset()
					tl.starts = nil
					prov.LatencyOf = run.LatencyOf
					d := deadline.New(run.Budget)
					res, err := a.Run(deadline.NewContext(ctx, d), s.g, tenTurns()...)
					end := time.Now()
					res.WaitTools()
					ta.Add(d.End(), end, err == nil && res.Answer != nil, append(starts(prov), tl.starts...))
				}
			})
			t.Logf("genkit, %s: %v", rc.Name, &ta)
			assert.GreaterOrEqual(t, ta.Answered, agenttest.ReserveRuns*99/100, "answered")
			assert.LessOrEqual(t, ta.P99(), time.Duration(0), "overshoot p99")
			assert.Zero(t, ta.Refusals, "calls started with the floor or less left")
		})
	}
}

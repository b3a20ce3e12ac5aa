package test

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/deadlinebudget/budget/otelbudget/budgetconnector"
	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/test/fleettest"
)

// A provider turns 5× slower: a steady stream of attempt spans through a
// real Collector whose connector keeps a 2 s window. Before the shift the
// published ceiling is the old p99 × 1.2 (within 10 %); after it, the
// ceiling reaches the new p99 × 1.2 (within 10 %) within three windows,
// where a connector that never forgets would stay near the old one.
func TestFleetFollowsAShift(t *testing.T) {
	const (
		window   = 2 * time.Second
		interval = 200 * time.Millisecond
		sigma    = 0.3
	)
	oldMedian, newMedian := 10*time.Millisecond, 50*time.Millisecond
	// The truth: a log-normal's p99 × learn's default margin.
	target := func(median time.Duration) float64 {
		return median.Seconds() * math.Exp(2.3263478740408408*sigma) * 1.2
	}
	ctx := context.Background()
	col, err := fleettest.Start(ctx, fleettest.Options{ExportInterval: interval, Connector: "window: " + window.String()})
	require.NoError(t, err)
	defer func() { require.NoError(t, col.Shutdown()) }()

	var median atomic.Int64
	median.Store(int64(oldMedian))
	stop, sent := make(chan struct{}), make(chan error, 1)
	go func() { sent <- sendSteady(ctx, col.OTLP, &median, sigma, stop) }()
	defer func() {
		close(stop)
		require.NoError(t, <-sent)
	}()

	// ceilingAfter waits for an export after since and returns its
	// ceiling for shift/search.
	ceilingAfter := func(since time.Time) (float64, time.Time) {
		for {
			batches, changed := col.Metrics.Batches()
			for i := len(batches) - 1; i >= 0; i-- {
				if ts, ok := exportTime(batches[i]); ok && ts.After(since) {
					if c, ok := fleettest.Gauges(batches[i:i+1], budgetconnector.MetricCeiling)["shift/search"]; ok {
						return c, ts
					}
				}
			}
			select {
			case <-changed:
			case <-time.After(30 * time.Second):
				require.FailNow(t, "no export with a ceiling")
			}
		}
	}
	// Before the shift: a full window of the old latency.
	c, _ := ceilingAfter(time.Now().Add(window))
	assert.InEpsilon(t, target(oldMedian), c, 0.10, "before the shift: %.2fms, want %.2fms", c*1e3, target(oldMedian)*1e3)
	t.Logf("before the shift: ceiling %.2fms (p99 × 1.2 of the truth: %.2fms)", c*1e3, target(oldMedian)*1e3)

	shift := time.Now()
	median.Store(int64(newMedian))
	at := shift
	for {
		c, at = ceilingAfter(at)
		if math.Abs(c-target(newMedian)) <= 0.10*target(newMedian) {
			break
		}
		require.Less(t, at.Sub(shift), 3*window, "the ceiling did not follow the shift within 3 windows (last %.2fms, want %.2fms)", c*1e3, target(newMedian)*1e3)
	}
	t.Logf("after a 5× shift: ceiling %.2fms (truth %.2fms) %s after it, %.2f windows", c*1e3, target(newMedian)*1e3, at.Sub(shift).Round(time.Millisecond), at.Sub(shift).Seconds()/window.Seconds())

	// Once a whole window has passed, only the new latency is left.
	c, _ = ceilingAfter(shift.Add(window + window/4))
	assert.InEpsilon(t, target(newMedian), c, 0.10, "a window after the shift: %.2fms, want %.2fms", c*1e3, target(newMedian)*1e3)
	t.Logf("1.25 windows after the shift: ceiling %.2fms (truth %.2fms)", c*1e3, target(newMedian)*1e3)
}

// exportTime is the time of an export's first gauge point.
func exportTime(md pmetric.Metrics) (time.Time, bool) {
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		ms := rms.At(i).ScopeMetrics().At(0).Metrics()
		for k := range ms.Len() {
			if m := ms.At(k); m.Type() == pmetric.MetricTypeGauge && m.Gauge().DataPoints().Len() > 0 {
				return m.Gauge().DataPoints().At(0).Timestamp().AsTime(), true
			}
		}
	}
	return time.Time{}, false
}

// sendSteady sends 100 completed attempt spans of shift/search every
// 50 ms, log-normal around the current median, ending now, until stop.
func sendSteady(ctx context.Context, otlp string, median *atomic.Int64, sigma float64, stop <-chan struct{}) error {
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	rng := rand.New(rand.NewPCG(7, 11))
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-tick.C:
		}
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "shift")
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		end := time.Now()
		m := time.Duration(median.Load())
		for range 100 {
			d := time.Duration(float64(m) * math.Exp(sigma*rng.NormFloat64()))
			sp := spans.AppendEmpty()
			sp.SetStartTimestamp(pcommon.NewTimestampFromTime(end.Add(-d)))
			sp.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
			sp.Attributes().PutStr("deadline.step", "search")
			sp.Attributes().PutStr("deadline.attempt.ended_by", "completed")
		}
		body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err == nil {
			err = fleettest.SendTraces(ctx, hc, otlp, body)
		}
		if err != nil {
			return err
		}
	}
}

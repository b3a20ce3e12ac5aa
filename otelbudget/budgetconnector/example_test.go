package budgetconnector_test

import (
	"context"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/budgetconnector"
)

// The connector as a Collector runs it: created by its factory, fed
// attempt spans (here 1000 of "fetch", 20 to 39ms, and 10 cut at a 50ms
// ceiling), and exporting at shutdown the suggestion learn derives, p99 ×
// 1.2, the cut attempts counted as "longer than 50ms".
func ExampleNewFactory() {
	f := budgetconnector.NewFactory()
	cfg := f.CreateDefaultConfig().(*budgetconnector.Config)
	cfg.ExportInterval, cfg.Window = time.Hour, 4*time.Hour
	sink := new(consumertest.MetricsSink)
	c, err := f.CreateTracesToMetrics(context.Background(), connectortest.NewNopSettings(f.Type()), cfg, sink)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := c.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		fmt.Println(err)
		return
	}

	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "checkout")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	start := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	for i := range 1010 {
		d, ended := time.Duration(20+i%20)*time.Millisecond, "completed"
		if i >= 1000 {
			d, ended = 52*time.Millisecond, "attempt_timeout"
		}
		sp := spans.AppendEmpty()
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(d)))
		sp.Attributes().PutStr(string(otelbudget.AttrStep), "fetch")
		sp.Attributes().PutStr(string(otelbudget.AttrAttemptEndedBy), ended)
		sp.Attributes().PutInt(string(otelbudget.AttrAttemptGrantedMs), 50)
	}
	if err := c.ConsumeTraces(context.Background(), td); err != nil {
		fmt.Println(err)
		return
	}
	if err := c.Shutdown(context.Background()); err != nil { // exports once more
		fmt.Println(err)
		return
	}
	for _, md := range sink.AllMetrics() {
		printGauge(md, budgetconnector.MetricCeiling)
		printGauge(md, budgetconnector.MetricCensoredShare)
	}
	// Output:
	// checkout fetch deadline.fleet.suggestion.ceiling = 0.0464 s
	// checkout fetch deadline.fleet.suggestion.censored_share = 0.0099 1
}

func printGauge(md pmetric.Metrics, name string) {
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		svc, _ := rms.At(i).Resource().Attributes().Get("service.name")
		ms := rms.At(i).ScopeMetrics().At(0).Metrics()
		for k := range ms.Len() {
			if m := ms.At(k); m.Name() == name {
				dp := m.Gauge().DataPoints().At(0)
				step, _ := dp.Attributes().Get(string(otelbudget.AttrStep))
				fmt.Printf("%s %s %s = %.4f %s\n", svc.Str(), step.Str(), name, math.Round(dp.DoubleValue()*1e4)/1e4, m.Unit())
			}
		}
	}
}

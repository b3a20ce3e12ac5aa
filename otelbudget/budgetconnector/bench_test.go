package budgetconnector

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
)

// benchTraces is n attempt spans as otelbudget records them (all their
// attributes), over 5 services × 4 steps, 100 spans a resource.
func benchTraces(n int) ptrace.Traces {
	rng := rand.New(rand.NewPCG(7, 7))
	td := ptrace.NewTraces()
	var spans ptrace.SpanSlice
	for i := range n {
		if i%100 == 0 {
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", fmt.Sprintf("svc-%d", (i/100)%5))
			rs.Resource().Attributes().PutStr("service.instance.id", "i-1")
			rs.Resource().Attributes().PutStr("telemetry.sdk.language", "go")
			spans = rs.ScopeSpans().AppendEmpty().Spans()
		}
		d := time.Duration(float64(40*time.Millisecond) * math.Exp(0.5*rng.NormFloat64()))
		sp := spans.AppendEmpty()
		step := fmt.Sprintf("step-%d", i%4)
		sp.SetName(step + " attempt")
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Duration(i) * time.Millisecond)))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Duration(i)*time.Millisecond + d)))
		a := sp.Attributes()
		a.PutStr(string(otelbudget.AttrStep), step)
		a.PutInt(string(otelbudget.AttrAttemptNumber), 1)
		a.PutInt(string(otelbudget.AttrAttemptCeilingMs), 100)
		a.PutInt(string(otelbudget.AttrAttemptGrantedMs), 100)
		a.PutInt(string(otelbudget.AttrAttemptRemainingMs), 900)
		a.PutStr(string(otelbudget.AttrAttemptLimitedBy), "ceiling")
		ended := deadline.EndedCompleted
		if d >= 100*time.Millisecond {
			ended = deadline.EndedAttemptTimeout
		}
		a.PutStr(string(otelbudget.AttrAttemptEndedBy), ended.String())
	}
	return td
}

// BenchmarkConsumeTraces measures the attempt spans one connector reads
// per second (run with -cpu 1: per core). Goal: >= 200 000.
func BenchmarkConsumeTraces(b *testing.B) {
	const n = 10000
	td := benchTraces(n)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	c := newConnector(connectorSettingsFor("bench"), cfg, consumertest.NewNop(), nil)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := c.ConsumeTraces(ctx, td); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "spans/s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkBytesPerKey measures the heap one (service, step) key holds
// after 1000 attempts and an export (its delta's memory is kept for the
// next interval): 2000 keys, durations log-normal (σ 0.5, so about 130
// buckets per series) around a median that differs per key, a tenth of
// them cut at a ceiling. Goal: <= 16 KiB. The "wide" case spreads every
// key's durations over the sketch's whole range (1 µs to 5 h): the worst
// case.
func BenchmarkBytesPerKey(b *testing.B) {
	for _, wide := range []bool{false, true} {
		name := "lognormal"
		if wide {
			name = "wide"
		}
		b.Run(name, func(b *testing.B) {
			const keys = 2000
			var perKey float64
			for b.Loop() {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				s := newStore(keys)
				rng := rand.New(rand.NewPCG(1, 2))
				for k := range keys {
					e := s.get(key{"svc", fmt.Sprintf("step-%05d", k)})
					median := time.Duration(5+k%200) * time.Millisecond
					for i := range 1000 {
						var d time.Duration
						if wide {
							d = time.Duration(math.Exp2(10 + 34*rng.Float64()))
						} else {
							d = time.Duration(float64(median) * math.Exp(0.5*rng.NormFloat64()))
						}
						ended := deadline.EndedCompleted
						if i%10 == 0 {
							ended = deadline.EndedAttemptTimeout
						}
						at := t0.Add(time.Duration(i) * time.Millisecond)
						e.add(s.cur, ended, d, at)
					}
					e.pending.reset() // exported: the memory stays for the next delta
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perKey = float64(after.HeapAlloc-before.HeapAlloc) / keys
				runtime.KeepAlive(s)
			}
			b.ReportMetric(perKey, "B/key")
			b.ReportMetric(0, "ns/op")
		})
	}
}

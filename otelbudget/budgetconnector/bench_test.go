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
	c, err := newConnector(connectorSettingsFor("bench"), cfg, consumertest.NewNop())
	if err != nil {
		b.Fatal(err)
	}
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
// with 1000 attempts in each slot of its window and the whole window's
// attempts in its delta, not yet exported: log-normal durations (σ 0.5)
// around a median that differs per key, or "wide", spread over the
// sketch's whole range (1 µs to 5 h): the worst case, which
// TestBytesPerKeyBound holds to maxEntryBytes.
func BenchmarkBytesPerKey(b *testing.B) {
	for _, wide := range []bool{false, true} {
		name := "lognormal"
		if wide {
			name = "wide"
		}
		b.Run(name, func(b *testing.B) {
			var perKey float64
			for b.Loop() {
				perKey = bytesPerKey(wide)
			}
			b.ReportMetric(perKey, "B/key")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// bytesPerKey is the heap 500 keys take, per key, each with 1000
// attempts in every slot of its window and a delta of the whole window not
// yet exported: log-normal around 5 to 205 ms, or (wide) spread over
// learn's whole range, 1 µs to 5 h, the worst case.
func bytesPerKey(wide bool) float64 {
	const keys = 500
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := newStore(keys)
	rng := rand.New(rand.NewPCG(1, 2))
	for slot := range windowSlots + 1 { // the 4 slots, then the delta
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
				if i%2 == 0 {
					ended = deadline.EndedAttemptTimeout
				}
				h := &e.pending
				if slot < windowSlots {
					h = &e.ring[slot]
				}
				h.add(ended, d, t0.Add(time.Duration(i)*time.Millisecond))
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	return float64(after.HeapAlloc-before.HeapAlloc) / keys
}

// BenchmarkExportStall measures how long an export holds the ingestion
// lock (stall-ms: the snapshot, while ConsumeTraces waits) and how long the
// whole export takes (export-ms: the suggestions and the metrics, built
// without the lock), at 1 000 and 10 000 keys with 200 attempts each.
func BenchmarkExportStall(b *testing.B) {
	for _, keys := range []int{1000, 10000} {
		b.Run(fmt.Sprint(keys), func(b *testing.B) {
			cfg := NewFactory().CreateDefaultConfig().(*Config)
			c, err := newConnector(connectorSettingsFor("bench"), cfg, consumertest.NewNop())
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(3, 3))
			fill := func() {
				c.mu.Lock()
				defer c.mu.Unlock()
				for k := range keys {
					e := c.store.get(key{fmt.Sprintf("svc-%d", k%50), fmt.Sprintf("step-%d", k)})
					for i := range 200 {
						d := time.Duration(float64(40*time.Millisecond) * math.Exp(0.5*rng.NormFloat64()))
						e.add(deadline.EndedCompleted, d, t0.Add(time.Duration(i)*time.Millisecond))
					}
				}
			}
			var stall, total time.Duration
			for b.Loop() {
				b.StopTimer()
				fill()
				b.StartTimer()
				began := time.Now()
				snaps, _, _, _ := c.snapshot()
				stall += time.Since(began)
				runtime.KeepAlive(snaps)
				b.StopTimer()
				began = time.Now()
				c.collect() // the rest of the export, as if from that snapshot
				total += time.Since(began)
				b.StartTimer()
			}
			b.ReportMetric(float64(stall.Microseconds())/1e3/float64(b.N), "stall-ms")
			b.ReportMetric(float64(total.Microseconds())/1e3/float64(b.N), "export-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

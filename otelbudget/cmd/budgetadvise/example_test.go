package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Reading a Collector file exporter's OTLP JSON: 100 attempt spans of the
// step fetch, under a 100ms ceiling, give a suggested ceiling of p99 × 1.2.
func Example() {
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i := range 100 {
		sp := spans.AppendEmpty()
		sp.SetName("fetch attempt")
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(10*time.Millisecond + time.Duration(i)*100*time.Microsecond)))
		sp.Attributes().PutStr("deadline.step", "fetch")
		sp.Attributes().PutStr("deadline.attempt.ended_by", "completed")
		sp.Attributes().PutInt("deadline.attempt.ceiling_ms", 100)
		start = start.Add(time.Second)
	}
	line, _ := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	dir, _ := os.MkdirTemp("", "budgetadvise")
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "otlp.jsonl")
	_ = os.WriteFile(file, append(line, '\n'), 0o600)

	code := run(context.Background(), []string{"-min-samples", "100", file}, nil, os.Stdout, os.Stdout)
	fmt.Println("exit", code)
	// Output:
	// budgetadvise: 100 attempt or call spans, 0 attempt-duration points; data from 2026-11-30T12:00:00Z to 2026-11-30T12:01:39Z
	//
	// fetch (from traces)
	//   attempts 100, success 100.0%, errors 0; cut by a limit 0 (0.0%: ceiling timeouts 0, deadline cuts 0)
	//   completed attempts' own durations (100): p50 14.9ms, p90 18.9ms, p99 19.7ms, p99.9 19.7ms
	//   Kaplan–Meier estimate: the same, no attempt was cut
	//   ceiling: current 100ms, suggested 23.7ms (Kaplan–Meier p99 19.7ms × 1.2)
	//   window 2026-11-30T12:00:00Z … 2026-11-30T12:01:39Z
	//   ≤  11.9ms │████████████████████████                 19
	//   ≤  14.1ms │█████████████████████████████            23
	//   ≤  16.8ms │█████████████████████████████████        26
	//   ≤    20ms │████████████████████████████████████████ 32
	//   ≤  23.7ms │                                         0 ◀ suggested 23.7ms
	//   ≤  28.2ms │                                         0
	//   ≤  33.6ms │                                         0
	//   ≤  39.9ms │                                         0
	//   ≤  47.5ms │                                         0
	//   ≤  56.4ms │                                         0
	//   ≤  67.1ms │                                         0
	//   ≤  79.8ms │                                         0
	//   ≤  94.9ms │                                         0
	//   ≤   113ms │                                         0 ◀ current 100ms
	//
	// plan fetch (from traces): suggested budget 24ms, P(success) 1.0000 (target 0.99)
	// exit 0
}

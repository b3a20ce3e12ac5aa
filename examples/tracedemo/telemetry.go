package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// defaultExportGrace is how long exporting the spans and the metrics to a
// collector, under one deadline, may take after the run: the process ends
// within its budget plus this grace (and the time to start), even when the
// collector is unreachable. Writing to stdout is not bounded by it: that
// takes as long as the work (-runs makes thousands of spans), and cutting it
// would only lose what was already measured.
const defaultExportGrace = 500 * time.Millisecond

// telemetry is the run's OpenTelemetry SDK: a TracerProvider whose spans
// wait in memory, and a MeterProvider whose reader exports when it is shut
// down. Nothing is exported during the run; flush exports both signals
// under one deadline.
type telemetry struct {
	tp      *sdktrace.TracerProvider
	spans   *spanBuffer
	spanExp sdktrace.SpanExporter // nil: spans are not exported
	spanTo  string

	mp       metric.MeterProvider     // the no-op provider when metrics are not exported
	sdkMP    *sdkmetric.MeterProvider // nil when metrics are not exported
	points   *sdkmetric.ManualReader  // counts the points the run recorded
	metricTo string
}

// newTelemetry builds the SDK for exporter kind (see -exporter), the stdout
// exporters writing to stdout. Call flush once the run has ended.
func newTelemetry(ctx context.Context, kind string, stdout io.Writer, getenv func(string) string) (*telemetry, error) {
	res, err := newResource(ctx)
	if err != nil {
		return nil, fmt.Errorf("resource: %w", err)
	}
	spanExp, spanTo, err := newSpanExporter(ctx, kind, stdout, getenv)
	if err != nil {
		return nil, err
	}
	reader, metricTo, err := newMetricReader(ctx, kind, stdout, getenv)
	if err != nil {
		if spanExp != nil {
			err = errors.Join(err, spanExp.Shutdown(ctx))
		}
		return nil, err
	}
	t := &telemetry{
		spans: &spanBuffer{}, spanExp: spanExp, spanTo: spanTo,
		mp: metricnoop.NewMeterProvider(), metricTo: metricTo,
	}
	t.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(t.spans), sdktrace.WithResource(res))
	if reader != nil {
		// The exporting reader does not say what it sent, so a second,
		// manual reader on the same provider counts the points: one per
		// instrument and attribute set, what the one export at shutdown
		// sends.
		t.points = sdkmetric.NewManualReader()
		t.sdkMP = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithReader(t.points), sdkmetric.WithResource(res))
		t.mp = t.sdkMP
	}
	return t, nil
}

// writesStdout reports whether an exporter writes to the standard output,
// which must then carry nothing else: `make demo | jq` reads it.
func (t *telemetry) writesStdout() bool {
	return writesStdout(t.spanTo) || writesStdout(t.metricTo)
}

// flush ends the providers and exports every span and metric point (even if
// ctx is already canceled: a run interrupted by ^C still reports what it
// did). An export to a collector must end within timeout of the call; one to
// stdout is written in full, however long that takes. The two signals are
// exported concurrently, so that one slow collector costs the timeout once,
// except when both go to stdout: there, one after the other, so that their
// JSON objects do not interleave. Nothing it starts outlives it.
func (t *telemetry) flush(ctx context.Context, timeout time.Duration) exportReport {
	local := context.WithoutCancel(ctx)
	remote, cancel := context.WithTimeout(local, timeout)
	defer cancel()
	within := func(to string) context.Context {
		if writesStdout(to) {
			return local
		}
		return remote
	}
	r := exportReport{spans: signalReport{what: "span", to: t.spanTo}, points: signalReport{what: "metric point", to: t.metricTo}}
	_ = t.tp.Shutdown(local) // every span has ended: the syncer has handed them all to t.spans
	var exports []func()
	if t.spanExp != nil {
		r.spans.exported = true
		exports = append(exports, func() { r.spans.n, r.spans.err = t.spans.flush(within(t.spanTo), t.spanExp) })
	}
	if t.sdkMP != nil {
		r.points.exported = true
		exports = append(exports, func() { r.points.n, r.points.err = t.flushMetrics(local, within(t.metricTo)) })
	}
	if writesStdout(t.spanTo) && writesStdout(t.metricTo) {
		for _, export := range exports {
			export()
		}
	} else {
		var wg sync.WaitGroup
		for _, export := range exports {
			wg.Go(export)
		}
		wg.Wait()
	}
	for _, s := range []*signalReport{&r.spans, &r.points} {
		if s.err != nil && !writesStdout(s.to) && remote.Err() != nil {
			s.err = fmt.Errorf("gave up after %s: %w", timeout, s.err)
		}
	}
	return r
}

// flushMetrics counts the points the run recorded (in memory, under count,
// which has no deadline: the count is right even when the export fails),
// then shuts the MeterProvider down under export: the exporting reader
// collects them once more and exports them. It returns the count and the
// export's error.
func (t *telemetry) flushMetrics(count, export context.Context) (int, error) {
	var rm metricdata.ResourceMetrics
	if err := t.points.Collect(count, &rm); err != nil {
		return 0, errors.Join(err, t.sdkMP.Shutdown(export))
	}
	return countPoints(&rm), t.sdkMP.Shutdown(export)
}

// countPoints returns the number of data points in rm.
func countPoints(rm *metricdata.ResourceMetrics) int {
	n := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				n += len(d.DataPoints)
			case metricdata.Histogram[int64]:
				n += len(d.DataPoints)
			case metricdata.ExponentialHistogram[float64]:
				n += len(d.DataPoints)
			case metricdata.ExponentialHistogram[int64]:
				n += len(d.DataPoints)
			case metricdata.Sum[float64]:
				n += len(d.DataPoints)
			case metricdata.Sum[int64]:
				n += len(d.DataPoints)
			case metricdata.Gauge[float64]:
				n += len(d.DataPoints)
			case metricdata.Gauge[int64]:
				n += len(d.DataPoints)
			case metricdata.Summary:
				n += len(d.DataPoints)
			}
		}
	}
	return n
}

// exportReport is what flush did.
type exportReport struct {
	spans  signalReport
	points signalReport
}

// signalReport is what flush did with one signal.
type signalReport struct {
	what     string // "span", "metric point"
	to       string // where it went: "stdout", "otlp grpc", …
	exported bool   // an exporter was configured
	n        int    // how many were handed over
	err      error  // why the export failed
}

func (s signalReport) count() string { return plural(s.n, s.what) }

// line says in one line what was exported where, or what was not and why;
// "" when nothing was to be exported.
func (r exportReport) line() string {
	var parts []string
	failed := false
	switch s, p := r.spans, r.points; {
	case s.exported && p.exported && s.err == nil && p.err == nil && s.to == p.to:
		parts = append(parts, fmt.Sprintf("exported %s and %s to %s", s.count(), p.count(), s.to))
	default:
		for _, x := range []signalReport{s, p} {
			switch {
			case !x.exported:
			case x.err == nil:
				parts = append(parts, fmt.Sprintf("exported %s to %s", x.count(), x.to))
			default:
				failed = true
				parts = append(parts, fmt.Sprintf("%s not exported to %s: %s", x.count(), x.to, oneLine(x.err)))
			}
		}
	}
	if len(parts) == 0 {
		return ""
	}
	line := "tracedemo: " + strings.Join(parts, "; ")
	if failed {
		line += " (the run itself is unaffected)"
	}
	return line
}

// spanBuffer is a span exporter that keeps every span in memory until
// flush hands them all to the real exporter in one export, under the
// caller's deadline. The SDK's batch processor would keep exporting (and
// retrying an unreachable collector) in a goroutine after a timed-out
// shutdown; this way the export is bounded, its one error is reported once,
// and nothing outlives the run.
type spanBuffer struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

// ExportSpans keeps spans; it never fails.
func (b *spanBuffer) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.spans = append(b.spans, spans...)
	return nil
}

// snapshot returns the spans kept so far, those flush will export.
func (b *spanBuffer) snapshot() []sdktrace.ReadOnlySpan {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]sdktrace.ReadOnlySpan(nil), b.spans...)
}

// Shutdown does nothing: flush does the work.
func (b *spanBuffer) Shutdown(context.Context) error { return nil }

// flush exports every span kept to exp and shuts exp down, both within ctx.
// It returns how many spans it handed over and the first error; a Shutdown
// that only ran out of time after the export is not one.
func (b *spanBuffer) flush(ctx context.Context, exp sdktrace.SpanExporter) (int, error) {
	b.mu.Lock()
	spans := b.spans
	b.spans = nil
	b.mu.Unlock()
	var err error
	if len(spans) > 0 {
		err = exp.ExportSpans(ctx, spans)
	}
	if serr := exp.Shutdown(ctx); serr != nil && !errors.Is(serr, context.DeadlineExceeded) {
		err = errors.Join(err, serr)
	}
	return len(spans), err
}

package otelbudget

import (
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/deadlinebudget/budget/deadline"
)

// The metric instruments, created once by New. Durations are histograms in
// seconds, as the semantic conventions ask of duration metrics
// (http.client.request.duration and friends); span attributes stay in
// integer milliseconds.
const (
	// MetricCallDuration is the duration of a logical call, from CallStart to
	// CallEnd (histogram, s; attributes step, stop_reason, verdict).
	MetricCallDuration = "deadline.call.duration"
	// MetricAttemptDuration is the duration of one attempt (histogram, s;
	// attributes step, attempt.ended_by).
	MetricAttemptDuration = "deadline.attempt.duration"
	// MetricCallAttempts is the number of attempts a call started
	// (histogram, {attempt}; attributes step, stop_reason, verdict).
	MetricCallAttempts = "deadline.call.attempts"
	// MetricRefusals counts calls refused below the floor (counter,
	// {refusal}; attribute step).
	MetricRefusals = "deadline.call.refusals"
	// MetricCallSlack is the budget left when a call ended, 0 when it ended
	// at or after the deadline (histogram, s; attributes step, stop_reason,
	// verdict). Mostly high: deadlines are loose; piled at 0: too tight.
	MetricCallSlack = "deadline.call.slack"
)

type instruments struct {
	callDuration    metric.Float64Histogram
	attemptDuration metric.Float64Histogram
	attempts        metric.Int64Histogram
	refusals        metric.Int64Counter
	slack           metric.Float64Histogram
}

// newInstruments creates the instruments on m. An error (an SDK rejecting
// an instrument) goes to otel.Handle and leaves a no-op instrument in place.
func newInstruments(m metric.Meter) instruments {
	var ins instruments
	var err error
	handle := func(e error) {
		if e != nil {
			otel.Handle(e)
		}
	}
	nm := metricnoop.Meter{}
	// The semantic conventions' advisory boundaries for HTTP durations, in
	// seconds.
	durationBuckets := []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	attemptBuckets := []float64{1, 2, 3, 4, 5, 6, 8, 10}
	if ins.callDuration, err = m.Float64Histogram(MetricCallDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of a logical call made under a deadline budget, retries and backoff included."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		handle(err)
		ins.callDuration, _ = nm.Float64Histogram(MetricCallDuration)
	}
	if ins.attemptDuration, err = m.Float64Histogram(MetricAttemptDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of one attempt of a logical call."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		handle(err)
		ins.attemptDuration, _ = nm.Float64Histogram(MetricAttemptDuration)
	}
	if ins.attempts, err = m.Int64Histogram(MetricCallAttempts, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts started by a logical call."),
		metric.WithExplicitBucketBoundaries(attemptBuckets...)); err != nil {
		handle(err)
		ins.attempts, _ = nm.Int64Histogram(MetricCallAttempts)
	}
	if ins.refusals, err = m.Int64Counter(MetricRefusals, metric.WithUnit("{refusal}"),
		metric.WithDescription("Calls refused locally because what was left of the budget was at or below the floor.")); err != nil {
		handle(err)
		ins.refusals, _ = nm.Int64Counter(MetricRefusals)
	}
	if ins.slack, err = m.Float64Histogram(MetricCallSlack, metric.WithUnit("s"),
		metric.WithDescription("Budget left when a logical call ended (0 when it ended at or after the deadline)."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		handle(err)
		ins.slack, _ = nm.Float64Histogram(MetricCallSlack)
	}
	return ins
}

// maxCached bounds each cache below: step names come from code and are few,
// but a caller who puts an ID in Policy.Name must not grow memory without
// end. Past the bound, options are built per call.
const maxCached = 512

type callMetricKey struct {
	step    string
	reason  deadline.Reason
	verdict Verdict
}

type attemptMetricKey struct {
	step  string
	ended deadline.EndedBy
}

// callOpts are the pre-built measurement options of one (step, reason,
// verdict): built once, they make recording allocation-free in the
// observer.
type callOpts struct {
	rec []metric.RecordOption
	add []metric.AddOption // step only, for the refusal counter
}

// caches holds pre-built attribute options and span names, keyed by step.
// Plain maps under a read-write lock: a struct key with a string in a
// sync.Map would be boxed, which allocates on every lookup.
type caches struct {
	mu       sync.RWMutex
	call     map[callMetricKey]callOpts
	attempt  map[attemptMetricKey][]metric.RecordOption
	attemptN map[string]string // step -> "<step> attempt"
}

func (c *caches) callOpts(k callMetricKey) callOpts {
	c.mu.RLock()
	v, ok := c.call[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	set := attribute.NewSet(AttrStep.String(k.step), AttrStopReason.String(k.reason.String()), AttrVerdict.String(string(k.verdict)))
	v = callOpts{
		rec: []metric.RecordOption{metric.WithAttributeSet(set)},
		add: []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(AttrStep.String(k.step)))},
	}
	c.mu.Lock()
	if len(c.call) < maxCached {
		if c.call == nil {
			c.call = make(map[callMetricKey]callOpts)
		}
		c.call[k] = v
	}
	c.mu.Unlock()
	return v
}

func (c *caches) attemptOpts(k attemptMetricKey) []metric.RecordOption {
	c.mu.RLock()
	v, ok := c.attempt[k]
	c.mu.RUnlock()
	if ok {
		return v
	}
	v = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(AttrStep.String(k.step), AttrAttemptEndedBy.String(k.ended.String())))}
	c.mu.Lock()
	if len(c.attempt) < maxCached {
		if c.attempt == nil {
			c.attempt = make(map[attemptMetricKey][]metric.RecordOption)
		}
		c.attempt[k] = v
	}
	c.mu.Unlock()
	return v
}

// attemptName returns the attempt span's name, "<step> attempt", or
// "deadline.attempt" for an unnamed step.
func (c *caches) attemptName(step string) string {
	if step == "" {
		return "deadline.attempt"
	}
	c.mu.RLock()
	v, ok := c.attemptN[step]
	c.mu.RUnlock()
	if ok {
		return v
	}
	v = step + " attempt"
	c.mu.Lock()
	if len(c.attemptN) < maxCached {
		if c.attemptN == nil {
			c.attemptN = make(map[string]string)
		}
		c.attemptN[step] = v
	}
	c.mu.Unlock()
	return v
}

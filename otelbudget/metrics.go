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
// (http.client.request.duration and friends), with explicit bucket
// boundaries from 1 ms to 30 s; span attributes stay in integer
// milliseconds.
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
	// MetricRefusals counts calls refused below the floor, fixed or learned
	// (stop reasons refused and refused_learned) (counter,
	// {refusal}; attribute step).
	MetricRefusals = "deadline.call.refusals"
	// MetricCallSlack is the budget left when a call ended, 0 when it ended
	// at or after the deadline (histogram, s; attributes step, stop_reason,
	// verdict). Mostly high: deadlines are loose; piled at 0: too tight.
	MetricCallSlack = "deadline.call.slack"
	// MetricRetryBudgetDenials counts calls whose retry the shared retry
	// budget denied, stop reason retry_budget_exhausted (counter, {denial};
	// attribute step). A rise says a downstream fails for many callers at
	// once and retries are being shed.
	MetricRetryBudgetDenials = "deadline.retry_budget.denials"
	// MetricLimitRefusals counts calls a [overload.Limiter] or client-side
	// throttling refused before an attempt went out, stop reasons limited,
	// downstream_open and throttled (counter, {refusal}; attributes step,
	// stop_reason, verdict). A rise says the downstream is at its capacity
	// (limited, throttled) or failing (downstream_open).
	MetricLimitRefusals = "deadline.limit.refusals"
)

// durationBuckets are the explicit bucket boundaries, in seconds, of the
// duration histograms: 1, 2.5 and 5 per decade from 1 ms to 10 s, then 30 s.
// Attempts and calls under a deadline budget run from about a millisecond
// (a local call, a refusal) to the budget, and 30 s is
// deadlinehttp.DefaultBudget, the longest a call gets unless told
// otherwise; three steps per decade keep each bucket within a factor 2.5 of
// the next, fine enough to read a p99 against a 100 ms or a 1 s budget.
// The semantic conventions' HTTP boundaries (5 ms to 10 s) would put every
// fast attempt in one bucket and every call that ran out a 30 s budget in
// the overflow.
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// DurationInstruments returns the names of the observer's duration
// histograms, in seconds: [MetricCallDuration], [MetricAttemptDuration] and
// [MetricCallSlack]. They advise explicit bucket boundaries (0.001, 0.0025,
// 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 and 30 s).
//
// The metric API cannot choose an aggregation, so an application that
// wants base-2 exponential histograms (which a Collector can merge across
// instances) selects them in its SDK: with one View per name,
//
//	sdkmetric.NewView(
//		sdkmetric.Instrument{Name: name, Scope: instrumentation.Scope{Name: otelbudget.ScopeName}},
//		sdkmetric.Stream{Aggregation: sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: 160, MaxScale: 20}})
//
// (the pattern "deadline.*.duration" selects the two durations in one
// View), or, for OTLP exporters, with the standard variable
// OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION=base2_exponential_bucket_histogram,
// which applies to every histogram the exporter sends. It returns a new
// slice on every call.
func DurationInstruments() []string {
	return []string{MetricCallDuration, MetricAttemptDuration, MetricCallSlack}
}

type instruments struct {
	callDuration    metric.Float64Histogram
	attemptDuration metric.Float64Histogram
	attempts        metric.Int64Histogram
	refusals        metric.Int64Counter
	denials         metric.Int64Counter
	limited         metric.Int64Counter
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
	if ins.denials, err = m.Int64Counter(MetricRetryBudgetDenials, metric.WithUnit("{denial}"),
		metric.WithDescription("Calls whose retry the shared retry budget denied: the retry was not taken.")); err != nil {
		handle(err)
		ins.denials, _ = nm.Int64Counter(MetricRetryBudgetDenials)
	}
	if ins.limited, err = m.Int64Counter(MetricLimitRefusals, metric.WithUnit("{refusal}"),
		metric.WithDescription("Calls a concurrency limiter, its breaker or client-side throttling refused before an attempt went out.")); err != nil {
		handle(err)
		ins.limited, _ = nm.Int64Counter(MetricLimitRefusals)
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
	verdict deadline.Verdict
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
	add []metric.AddOption // step only, for the refusal and denial counters
	all []metric.AddOption // step, stop_reason, verdict: the limit refusals counter
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
		all: []metric.AddOption{metric.WithAttributeSet(set)},
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

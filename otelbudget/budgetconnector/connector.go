package budgetconnector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/internal/metadata"
	"github.com/deadlinebudget/budget/otelbudget/fleetceilings"
)

// CeilingsPublisher receives each service's ceilings at every export: the
// deadlinebudget_opamp extension implements it and serves them to the
// service's OpAMP agents. The connector finds it among the host's
// extensions by [Config.OpAMP]. PublishCeilings must not block for long
// and must not keep c.Steps beyond the call if it changes it.
type CeilingsPublisher interface {
	PublishCeilings(c fleetceilings.Ceilings)
}

// outcomes of a span read (deadline.fleet.outcome).
const (
	outAccepted = iota
	outNotAttempt
	outUnnamed
	outType
	outNotRecorded
	outBadDuration
	outNameTooLong
	outBadTime
	outRejected // a point refused
	nOutcomes
)

var outcomeNames = [nOutcomes]string{"accepted", "not_attempt", "unnamed_step", "attribute_type", "not_recorded", "bad_duration", "name_too_long", "bad_time", "rejected"}

// budgetConnector is one connector instance, shared by its traces and
// metrics pipelines through sharedcomponent: started by the first, shut
// down by the last.
type budgetConnector struct {
	cfg    *Config
	logger *zap.Logger
	next   consumer.Metrics
	clock  clock

	tel      *metadata.TelemetryBuilder
	outcomes [nOutcomes]metric.AddOption // the outcome attribute of each

	mu         sync.Mutex
	store      *store
	lastExport time.Time
	lastRotate time.Time
	scratch    learn.Histogram // check's, under mu
	lookup     spanAttrs

	exportMu      sync.Mutex      // one export at a time
	exportScratch learn.Histogram // the export's, under exportMu
	windowFull    int64           // deltas a window could not take (overflow), under exportMu
	snaps         []keySnap       // the export's, under exportMu

	stop      chan struct{} // Start, Shutdown: serialized by sharedcomponent
	done      chan struct{}
	publisher CeilingsPublisher
}

var (
	_ connector.Traces  = (*budgetConnector)(nil)
	_ connector.Metrics = (*budgetConnector)(nil)
)

func newConnector(set connector.Settings, cfg *Config, next consumer.Metrics) (*budgetConnector, error) {
	tel, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	c := &budgetConnector{cfg: cfg, logger: set.Logger, next: next, clock: wallClock{},
		store: newStore(cfg.MaxKeys), tel: tel}
	for o, name := range outcomeNames {
		c.outcomes[o] = metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrOutcome, name)))
	}
	return c, nil
}

// tally is what one call counted, recorded in the connector's telemetry
// (component.TelemetrySettings) once the lock is released.
type tally struct {
	spans                           [nOutcomes]int64
	points                          [2]int64 // accepted, rejected
	refused, evicted, expired, keys int64    // keys: the change in the number kept
}

// storeMark is the store's counters before a change, for a tally.
type storeMark struct {
	evicted, expired uint64
	keys             int
}

func (s *store) mark() storeMark { return storeMark{s.evicted, s.expired, len(s.entries)} }

// since adds the store's changes since m to t.
func (t *tally) since(s *store, m storeMark) {
	t.evicted += int64(s.evicted - m.evicted)
	t.expired += int64(s.expired - m.expired)
	t.keys += int64(len(s.entries) - m.keys)
}

// record adds t to the connector's telemetry.
func (c *budgetConnector) record(ctx context.Context, t *tally) {
	for o, n := range t.spans {
		if n > 0 {
			c.tel.DeadlinebudgetSpans.Add(ctx, n, c.outcomes[o])
		}
	}
	if t.points[0] > 0 {
		c.tel.DeadlinebudgetPoints.Add(ctx, t.points[0], c.outcomes[outAccepted])
	}
	if t.points[1] > 0 {
		c.tel.DeadlinebudgetPoints.Add(ctx, t.points[1], c.outcomes[outRejected])
	}
	for _, x := range []struct {
		n int64
		c metric.Int64Counter
	}{{t.refused, c.tel.DeadlinebudgetKeysRefused}, {t.evicted, c.tel.DeadlinebudgetKeysEvicted}, {t.expired, c.tel.DeadlinebudgetKeysExpired}} {
		if x.n > 0 {
			x.c.Add(ctx, x.n)
		}
	}
	if t.keys != 0 {
		c.tel.DeadlinebudgetKeys.Add(ctx, t.keys)
	}
}

// Capabilities: the connector reads its input and does not change it.
func (c *budgetConnector) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

// ErrNoPublisher is returned by Start when Config.OpAMP names an extension
// the host does not have, or one that is not a [CeilingsPublisher].
var ErrNoPublisher = errors.New("deadlinebudget: the opamp extension named is not there")

// Start finds the OpAMP extension (when configured) and starts the export
// loop. Of a connector's pipelines, the first to start calls it
// (sharedcomponent).
func (c *budgetConnector) Start(_ context.Context, host component.Host) error {
	if c.cfg.OpAMP != nil {
		ext, ok := host.GetExtensions()[*c.cfg.OpAMP]
		if !ok {
			return fmt.Errorf("%w: %q is not among the service's extensions (service::extensions)", ErrNoPublisher, c.cfg.OpAMP.String())
		}
		p, ok := ext.(CeilingsPublisher)
		if !ok {
			return fmt.Errorf("%w: %q is a %T, not a deadlinebudget_opamp extension", ErrNoPublisher, c.cfg.OpAMP.String(), ext)
		}
		c.publisher = p
	}
	c.mu.Lock()
	now := c.now()
	c.lastExport, c.lastRotate = now, now
	c.mu.Unlock()
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	go c.loop(host, c.stop, c.done)
	return nil
}

// Shutdown stops the export loop, after a last export. Of a connector's
// pipelines, the last to shut down calls it (sharedcomponent), or the
// first if none started.
func (c *budgetConnector) Shutdown(ctx context.Context) error {
	defer c.tel.Shutdown()
	if c.stop == nil {
		return nil
	}
	close(c.stop)
	c.stop = nil
	select {
	case <-c.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return c.export(ctx)
}

// clock is the connector's time: the wall clock in a Collector; a test
// injects its own, so that the export loop is driven without real time.
type clock interface {
	Now() time.Time
	// Ticker returns a channel that receives every d, and its stop.
	Ticker(d time.Duration) (<-chan time.Time, func())
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) Ticker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

func (c *budgetConnector) now() time.Time { return c.clock.Now() }

// loop exports at every tick until stop. A panic ends it and is reported
// to the host as a fatal error (the Collector then shuts down, as for any
// component's fatal error), not raised in a goroutine nobody recovers.
func (c *budgetConnector) loop(host component.Host, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	defer func() {
		if r := recover(); r != nil {
			c.logger.Error("deadlinebudget: the export loop panicked", zap.Any("panic", r), zap.Stack("stack"))
			componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(fmt.Errorf("deadlinebudget: the export loop panicked: %v", r)))
		}
	}()
	tick, stopTicker := c.clock.Ticker(c.cfg.ExportInterval)
	defer stopTicker()
	for {
		select {
		case <-stop:
			return
		case <-tick:
			if err := c.export(context.Background()); err != nil {
				c.logger.Warn("deadlinebudget: export failed", zap.Error(err))
			}
		}
	}
}

// spanAttrs reads a pdata span's attributes for otelbudget.ReadAttemptSample.
type spanAttrs struct{ m pcommon.Map }

func (a *spanAttrs) Lookup(k attribute.Key) (attribute.Value, bool) {
	v, ok := a.m.Get(string(k))
	if !ok {
		return attribute.Value{}, false
	}
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return attribute.StringValue(v.Str()), true
	case pcommon.ValueTypeInt:
		return attribute.Int64Value(v.Int()), true
	case pcommon.ValueTypeDouble:
		return attribute.Float64Value(v.Double()), true
	case pcommon.ValueTypeBool:
		return attribute.BoolValue(v.Bool()), true
	}
	return attribute.Value{}, true
}

// serviceName is the resource's service.name, "" when it has none.
func serviceName(res pcommon.Resource) string {
	if v, ok := res.Attributes().Get("service.name"); ok {
		return v.AsString()
	}
	return ""
}

// ConsumeTraces reads the attempt spans: each one the rule of
// otelbudget.ReadAttemptSample accepts is added to its (service.name,
// deadline.step) key; the others are counted by outcome.
func (c *budgetConnector) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	var t tally
	c.consumeTraces(td, &t)
	c.record(ctx, &t)
	return nil
}

func (c *budgetConnector) consumeTraces(td ptrace.Traces, t *tally) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer t.since(c.store, c.store.mark())
	rss := td.ResourceSpans()
	var last *entry
	maxLen := c.cfg.MaxNameLength
	latest := c.now().Add(c.cfg.MaxClockSkew)
	for i := range rss.Len() {
		rs := rss.At(i)
		svc := serviceName(rs.Resource())
		last = nil
		if len(svc) > maxLen {
			t.spans[outNameTooLong] += int64(spanCount(rs))
			continue
		}
		sss := rs.ScopeSpans()
		for j := range sss.Len() {
			spans := sss.At(j).Spans()
			for k := range spans.Len() {
				sp := spans.At(k)
				c.lookup.m = sp.Attributes()
				s, err := otelbudget.ReadAttemptSample(&c.lookup, sp.StartTimestamp().AsTime(), sp.EndTimestamp().AsTime())
				if err != nil {
					t.spans[outcomeOf(err)]++
					continue
				}
				switch {
				case len(s.Step) > maxLen:
					t.spans[outNameTooLong]++
					continue
				case s.End.After(latest) || s.End.UnixMilli() < 1:
					t.spans[outBadTime]++
					continue
				}
				t.spans[outAccepted]++
				e := last
				if e == nil || e.key.step != s.Step {
					e = c.store.get(key{svc, s.Step})
					last = e
				}
				e.add(s.EndedBy, s.Duration, s.End)
			}
		}
	}
	c.lookup.m = pcommon.Map{}
}

// spanCount is the number of spans of a resource.
func spanCount(rs ptrace.ResourceSpans) int {
	n := 0
	sss := rs.ScopeSpans()
	for j := range sss.Len() {
		n += sss.At(j).Spans().Len()
	}
	return n
}

// outcomeOf maps a ReadAttemptSample error to its outcome.
func outcomeOf(err error) int {
	switch {
	case errors.Is(err, otelbudget.ErrNotAttemptSpan):
		return outNotAttempt
	case errors.Is(err, otelbudget.ErrUnnamedStep):
		return outUnnamed
	case errors.Is(err, otelbudget.ErrAttributeType):
		return outType
	case errors.Is(err, otelbudget.ErrNotRecorded):
		return outNotRecorded
	}
	return outBadDuration
}

// ConsumeMetrics merges the connector's own data metrics (another
// instance's export: the merge tier) into the keys; every other metric is
// ignored. A key's points in one resource (one export of one service) are
// validated and applied together, or refused together and counted
// (mergeResource): a stray or partial point set never reaches a key.
func (c *budgetConnector) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	var t tally
	c.consumeMetrics(md, &t)
	c.record(ctx, &t)
	return nil
}

func (c *budgetConnector) consumeMetrics(md pmetric.Metrics, t *tally) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer t.since(c.store, c.store.mark())
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		rm := rms.At(i)
		c.mergeResource(serviceName(rm.Resource()), rm.ScopeMetrics(), t)
	}
}

package budgetconnector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"

	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget"
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
	outRejected // a point refused
	nOutcomes
)

var outcomeNames = [nOutcomes]string{"accepted", "not_attempt", "unnamed_step", "attribute_type", "not_recorded", "bad_duration", "rejected"}

// budgetConnector is one connector instance, shared by its traces and
// metrics pipelines.
type budgetConnector struct {
	cfg     *Config
	logger  *zap.Logger
	next    consumer.Metrics
	release func()
	now     func() time.Time

	mu         sync.Mutex
	store      *store
	spans      [nOutcomes]uint64 // by outcome
	points     [2]uint64         // accepted, rejected
	inconsist  uint64
	lastExport time.Time
	started    time.Time
	scratch    learn.Histogram
	lookup     spanAttrs

	life      sync.Mutex // Start, Shutdown
	refs      int
	stop      chan struct{}
	done      chan struct{}
	publisher CeilingsPublisher
}

var (
	_ connector.Traces  = (*budgetConnector)(nil)
	_ connector.Metrics = (*budgetConnector)(nil)
)

func newConnector(set connector.Settings, cfg *Config, next consumer.Metrics, release func()) *budgetConnector {
	now := time.Now()
	return &budgetConnector{cfg: cfg, logger: set.Logger, next: next, release: release, now: time.Now,
		store: newStore(cfg.MaxKeys), lastExport: now, started: now}
}

// Capabilities: the connector reads its input and does not change it.
func (c *budgetConnector) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

// ErrNoPublisher is returned by Start when Config.OpAMP names an extension
// the host does not have, or one that is not a [CeilingsPublisher].
var ErrNoPublisher = errors.New("deadlinebudget: the opamp extension named is not there")

// Start finds the OpAMP extension (when configured) and starts the export
// loop. Both pipelines of a connector call it; the first starts.
func (c *budgetConnector) Start(_ context.Context, host component.Host) error {
	c.life.Lock()
	defer c.life.Unlock()
	c.refs++
	if c.refs > 1 {
		return nil
	}
	if c.cfg.OpAMP != nil {
		ext, ok := host.GetExtensions()[*c.cfg.OpAMP]
		if !ok {
			c.refs--
			return fmt.Errorf("%w: %q is not among the service's extensions (service::extensions)", ErrNoPublisher, c.cfg.OpAMP.String())
		}
		p, ok := ext.(CeilingsPublisher)
		if !ok {
			c.refs--
			return fmt.Errorf("%w: %q is a %T, not a deadlinebudget_opamp extension", ErrNoPublisher, c.cfg.OpAMP.String(), ext)
		}
		c.publisher = p
	}
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	go c.loop(c.stop, c.done)
	return nil
}

// Shutdown stops the export loop when the last pipeline shuts down, after
// a last export.
func (c *budgetConnector) Shutdown(ctx context.Context) error {
	c.life.Lock()
	defer c.life.Unlock()
	if c.refs > 1 {
		c.refs--
		return nil
	}
	c.refs = 0
	if c.release != nil {
		c.release()
	}
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

func (c *budgetConnector) loop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(c.cfg.ExportInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
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
func (c *budgetConnector) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	rss := td.ResourceSpans()
	var last *entry
	for i := range rss.Len() {
		rs := rss.At(i)
		svc := serviceName(rs.Resource())
		last = nil
		sss := rs.ScopeSpans()
		for j := range sss.Len() {
			spans := sss.At(j).Spans()
			for k := range spans.Len() {
				sp := spans.At(k)
				c.lookup.m = sp.Attributes()
				s, err := otelbudget.ReadAttemptSample(&c.lookup, sp.StartTimestamp().AsTime(), sp.EndTimestamp().AsTime())
				if err != nil {
					c.spans[outcomeOf(err)]++
					continue
				}
				c.spans[outAccepted]++
				e := last
				if e == nil || e.key.step != s.Step {
					e = c.store.get(key{svc, s.Step})
					last = e
				}
				e.total.add(s.EndedBy, s.Duration, s.End)
				e.pending.add(s.EndedBy, s.Duration, s.End)
			}
		}
	}
	c.lookup.m = pcommon.Map{}
	return nil
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
// ignored, and a point of ours that is not what the connector exports is
// refused and counted.
func (c *budgetConnector) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		rm := rms.At(i)
		svc := serviceName(rm.Resource())
		sms := rm.ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				c.mergeMetric(svc, ms.At(k))
			}
		}
	}
	return nil
}

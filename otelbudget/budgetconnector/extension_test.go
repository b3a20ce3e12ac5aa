package budgetconnector

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/internal/agenttest"
	"github.com/deadlinebudget/budget/otelbudget/fleetceilings"
)

// The connector publishes each service's ceilings to the extension it
// names, at every export.
func TestConnectorPublishes(t *testing.T) {
	xf := NewExtensionFactory()
	xcfg := xf.CreateDefaultConfig().(*ExtensionConfig)
	xcfg.ServerConfig.NetAddr.Endpoint = "127.0.0.1:0"
	ext, err := xf.Create(context.Background(), extensiontest.NewNopSettings(xf.Type()), xcfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, ext.Shutdown(context.Background())) }()

	id := component.MustNewID(ExtensionType)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.ExportInterval, cfg.OpAMP = time.Hour, &id
	cfg.Suggest.Quantile = 0.9
	f := NewFactory()
	sink := new(consumertest.MetricsSink)
	c, err := f.CreateTracesToMetrics(context.Background(), newSettings(t), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background(), hostWith{id: id, ext: ext}))
	defer func() { require.NoError(t, c.Shutdown(context.Background())) }()
	bc := c.(*shared).Unwrap()
	require.NoError(t, bc.ConsumeTraces(context.Background(), tracesOf(genSamples(6000, 4))))
	md := exportOnce(t, bc, sink)

	a := agenttest.Start(t, ext.(interface{ Addr() net.Addr }).Addr().String(), DefaultOpAMPPath, "checkout", agenttest.Options{})
	require.Eventually(t, func() bool { return len(a.Got()) == 1 }, 10*time.Second, 5*time.Millisecond)
	got := a.Got()[0]
	ceil := gauges(md, MetricCeiling)
	require.Len(t, got.Steps, 2)
	for step, s := range got.Steps {
		assert.InDelta(t, ceil[key{"checkout", step}]*1000, s.CeilingMS, 1e-9, step)
		assert.Equal(t, 0.9, s.Quantile)
	}
	assert.Equal(t, t0, got.WindowStart.UTC())
	fmt.Fprintln(testWriter{t}, "ceilings served:", got.Steps)
}

func newSettings(t *testing.T) connectorSettings {
	s := connectorSettingsFor(t.Name())
	return s
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// orderRecorder records, in order, the ceilings published and the metrics
// sent on.
type orderRecorder struct {
	nopComponent
	mu     sync.Mutex
	events []string
}

func (r *orderRecorder) PublishCeilings(c fleetceilings.Ceilings) {
	r.mu.Lock()
	defer r.mu.Unlock()
	steps := make([]string, 0, len(c.Steps))
	for s := range c.Steps {
		steps = append(steps, s)
	}
	sort.Strings(steps)
	r.events = append(r.events, "publish "+strings.Join(steps, ","))
}

func (r *orderRecorder) ConsumeMetrics(context.Context, pmetric.Metrics) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "metrics")
	return nil
}

// An export's ceilings are served before its metrics are sent on: whoever
// sees an export's suggestions downstream (a dashboard, fleetdemo) and then
// connects a client gets that export's ceilings, not the previous
// export's.
func TestCeilingsPublishedBeforeMetrics(t *testing.T) {
	rec := &orderRecorder{}
	id := component.MustNewID(ExtensionType)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	cfg.ExportInterval, cfg.OpAMP = time.Hour, &id
	next, err := consumer.NewMetrics(rec.ConsumeMetrics)
	require.NoError(t, err)
	c, err := NewFactory().CreateTracesToMetrics(context.Background(), newSettings(t), cfg, next)
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background(), hostWith{id: id, ext: rec}))
	defer func() { require.NoError(t, c.Shutdown(context.Background())) }()
	bc := c.(*shared).Unwrap()
	require.NoError(t, bc.ConsumeTraces(context.Background(), tracesOf(genSamples(6000, 4))))
	require.NoError(t, bc.export(context.Background()))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Contains(t, rec.events, "publish search")
	assert.Equal(t, "metrics", rec.events[len(rec.events)-1], "every publish before the metrics: %v", rec.events)
}

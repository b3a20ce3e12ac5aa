package budgetconnector

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"

	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/internal/metadata"
)

// Type names the connector in a Collector's configuration.
const Type = "deadlinebudget"

// Stability of the connector's traces → metrics and metrics → metrics
// pipelines.
const Stability = metadata.TracesToMetricsStability

// componentType is Type as a component.Type.
var componentType = metadata.Type

// NewFactory returns the connector's factory: traces → metrics (attempt
// spans in, histograms and suggestions out) and metrics → metrics (another
// connector's histograms in: the merge tier). Both pipelines of one
// connector ID share one instance, one store and one export.
func NewFactory() connector.Factory {
	f := &factory{instances: map[component.ID]*budgetConnector{}}
	return connector.NewFactory(componentType, createDefaultConfig,
		connector.WithTracesToMetrics(f.createTracesToMetrics, metadata.TracesToMetricsStability),
		connector.WithMetricsToMetrics(f.createMetricsToMetrics, metadata.MetricsToMetricsStability))
}

func createDefaultConfig() component.Config {
	return &Config{ExportInterval: DefaultExportInterval, MaxKeys: DefaultMaxKeys, Window: DefaultWindow,
		MaxNameLength: DefaultMaxNameLength, MaxClockSkew: DefaultMaxClockSkew}
}

// factory holds the instances by ID, so that a connector in a traces and a
// metrics pipeline is one.
type factory struct {
	mu        sync.Mutex
	instances map[component.ID]*budgetConnector
}

func (f *factory) instance(set connector.Settings, cfg component.Config, next consumer.Metrics) (*budgetConnector, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.instances[set.ID]
	if c == nil {
		var err error
		c, err = newConnector(set, cfg.(*Config), next, func() {
			f.mu.Lock()
			delete(f.instances, set.ID)
			f.mu.Unlock()
		})
		if err != nil {
			return nil, err
		}
		f.instances[set.ID] = c
	}
	return c, nil
}

func (f *factory) createTracesToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
	return f.instance(set, cfg, next)
}

func (f *factory) createMetricsToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Metrics, error) {
	return f.instance(set, cfg, next)
}

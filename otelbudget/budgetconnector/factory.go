package budgetconnector

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/internal/metadata"
	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/internal/sharedcomponent"
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
	f := new(factory)
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
	instances sharedcomponent.Map[component.ID, *budgetConnector]
}

func (f *factory) instance(set connector.Settings, cfg component.Config, next consumer.Metrics) (*shared, error) {
	c, err := f.instances.LoadOrStore(set.ID, func() (*budgetConnector, error) {
		return newConnector(set, cfg.(*Config), next)
	})
	if err != nil {
		return nil, err
	}
	return &shared{c}, nil
}

func (f *factory) createTracesToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Traces, error) {
	return f.instance(set, cfg, next)
}

func (f *factory) createMetricsToMetrics(_ context.Context, set connector.Settings, cfg component.Config, next consumer.Metrics) (connector.Metrics, error) {
	return f.instance(set, cfg, next)
}

// shared is one pipeline's connector: Start and Shutdown counted across the
// pipelines of its ID, the data straight to the one instance.
type shared struct {
	*sharedcomponent.Component[*budgetConnector]
}

// Capabilities are the instance's.
func (s *shared) Capabilities() consumer.Capabilities { return s.Unwrap().Capabilities() }

// ConsumeTraces hands the spans to the instance.
func (s *shared) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	return s.Unwrap().ConsumeTraces(ctx, td)
}

// ConsumeMetrics hands the metrics to the instance.
func (s *shared) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	return s.Unwrap().ConsumeMetrics(ctx, md)
}

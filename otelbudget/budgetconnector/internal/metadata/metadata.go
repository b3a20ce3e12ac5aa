// Package metadata holds the components' identity as collector-contrib's
// mdatagen generates it (generated_status.go there): their type names, the
// scope of their telemetry, their stability. metadata.yaml beside the
// connector's package says the same for tooling.
package metadata

import "go.opentelemetry.io/collector/component"

var (
	// Type is the connector's type.
	Type = component.MustNewType("deadlinebudget")
	// ExtensionType is the OpAMP extension's type.
	ExtensionType = component.MustNewType("deadlinebudget_opamp")
	// ScopeName is the instrumentation scope of the connector's metrics.
	ScopeName = "github.com/deadlinebudget/budget/otelbudget/budgetconnector"
)

// Stability of each pipeline and of the extension.
const (
	TracesToMetricsStability  = component.StabilityLevelAlpha
	MetricsToMetricsStability = component.StabilityLevelAlpha
	ExtensionStability        = component.StabilityLevelAlpha
)

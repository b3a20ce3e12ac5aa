// Package metadata holds the extension's identity in the shape
// collector's mdatagen generates from ../../metadata.yaml
// (generated_status.go there).
package metadata

import "go.opentelemetry.io/collector/component"

var (
	// Type is the extension's type.
	Type = component.MustNewType("deadlinebudget_opamp")
	// ScopeName is the instrumentation scope of the extension's telemetry.
	ScopeName = "github.com/deadlinebudget/budget/otelbudget/budgetconnector/opampextension"
)

// ExtensionStability is the extension's stability.
const ExtensionStability = component.StabilityLevelAlpha

package metadata

import "go.opentelemetry.io/collector/component"

// ExtensionType is the OpAMP extension's type, while the extension is
// served from this package's parent (its own package, with its own
// metadata.yaml, takes it over).
var ExtensionType = component.MustNewType("deadlinebudget_opamp")

// ExtensionStability is the OpAMP extension's stability.
const ExtensionStability = component.StabilityLevelAlpha

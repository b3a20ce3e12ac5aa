package budgetconnector

import (
	"go.opentelemetry.io/collector/extension"

	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/opampextension"
)

// The deadlinebudget_opamp extension lives in its own package,
// [opampextension]; these names forward to it.

// ExtensionType names the OpAMP extension in a Collector's configuration.
const ExtensionType = opampextension.Type

// ExtensionStability is the OpAMP extension's stability.
const ExtensionStability = opampextension.Stability

// Defaults of [ExtensionConfig].
const (
	// DefaultOpAMPEndpoint is where the extension listens (loopback).
	DefaultOpAMPEndpoint = opampextension.DefaultEndpoint
	// DefaultOpAMPPath is the URL path of the OpAMP endpoint.
	DefaultOpAMPPath = opampextension.DefaultPath
	// DefaultMaxAgents bounds the agents the extension remembers.
	DefaultMaxAgents = opampextension.DefaultMaxAgents
)

// ExtensionConfig is the OpAMP extension's configuration:
// [opampextension.Config].
type ExtensionConfig = opampextension.Config

// NewExtensionFactory returns the OpAMP extension's factory:
// [opampextension.NewFactory].
func NewExtensionFactory() extension.Factory { return opampextension.NewFactory() }

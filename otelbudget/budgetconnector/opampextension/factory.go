// Package opampextension is the deadlinebudget_opamp extension under the
// name the Collector builder (ocb) calls, NewFactory, in a package of its
// own as a builder config lists one component per package:
//
//	extensions:
//	  - gomod: github.com/deadlinebudget/budget/otelbudget/budgetconnector v0.1.0
//	    import: github.com/deadlinebudget/budget/otelbudget/budgetconnector/opampextension
//
// The extension itself is budgetconnector's (budgetconnector.NewExtensionFactory).
package opampextension

import (
	"go.opentelemetry.io/collector/extension"

	"github.com/deadlinebudget/budget/otelbudget/budgetconnector"
)

// NewFactory returns the deadlinebudget_opamp extension's factory:
// budgetconnector.NewExtensionFactory.
func NewFactory() extension.Factory { return budgetconnector.NewExtensionFactory() }

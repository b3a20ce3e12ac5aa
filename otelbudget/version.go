package otelbudget

// ScopeName is the instrumentation scope name of the tracer and the meter
// the observer uses: this package's import path.
const ScopeName = "github.com/deadlinebudget/budget/otelbudget"

// version is the instrumentation scope version reported with ScopeName.
const version = "0.1.0"

// Version returns the instrumentation scope version reported with
// [ScopeName], e.g. "0.1.0".
func Version() string { return version }

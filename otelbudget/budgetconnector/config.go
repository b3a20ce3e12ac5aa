package budgetconnector

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// Defaults of [Config].
const (
	// DefaultExportInterval is how often the connector exports its
	// histograms and suggestions.
	DefaultExportInterval = 15 * time.Second
	// DefaultMaxKeys bounds the (service, step) keys kept.
	DefaultMaxKeys = 10000
)

// Config is the connector's configuration (the `deadlinebudget` key of a
// Collector's connectors section). The zero value is not valid: use the
// factory's default ([component.Factory.CreateDefaultConfig]).
type Config struct {
	// ExportInterval is how often the histograms (the delta since the last
	// export) and the suggestions are exported, and the suggestions
	// published to the OpAMP extension; > 0.
	ExportInterval time.Duration `mapstructure:"export_interval"`
	// MaxKeys is the most (service, step) keys kept; a new key beyond it
	// evicts the least recently updated one (counted in
	// deadline.fleet.keys.evicted). >= 1.
	MaxKeys int `mapstructure:"max_keys"`
	// Suggest configures the ceilings, as learn.SuggestOptions.
	Suggest SuggestConfig `mapstructure:"suggest"`
	// Plans are run budgets to suggest: each a service's steps in order.
	Plans []PlanConfig `mapstructure:"plans"`
	// OpAMP names a deadlinebudget_opamp extension (e.g.
	// "deadlinebudget_opamp") that the connector publishes each service's
	// ceilings to; empty: none. The extension must be in the service's
	// extensions.
	OpAMP *component.ID `mapstructure:"opamp"`

	// Prevents unkeyed literal initialization.
	_ struct{}
}

// SuggestConfig is learn.SuggestOptions in the Collector's configuration:
// 0 means learn's default for each.
type SuggestConfig struct {
	// Quantile in (0, 1); 0: 0.99.
	Quantile float64 `mapstructure:"quantile"`
	// Margin >= 1; 0: 1.2.
	Margin float64 `mapstructure:"margin"`
	// MinCeiling and MaxCeiling bound the ceiling; 0: no bound.
	MinCeiling time.Duration `mapstructure:"min_ceiling"`
	MaxCeiling time.Duration `mapstructure:"max_ceiling"`
	// MinSamples is the fewest attempts a suggestion rests on; 0:
	// max(100, 10/(1-quantile)).
	MinSamples int `mapstructure:"min_samples"`
}

func (s SuggestConfig) options() learn.SuggestOptions {
	return learn.SuggestOptions{Quantile: s.Quantile, Margin: s.Margin, Min: s.MinCeiling, Max: s.MaxCeiling, MinSamples: s.MinSamples}
}

// PlanConfig is a plan whose run budget is suggested (learn's
// Recorder.SuggestBudget): a service's steps, run one after another under
// one deadline.
type PlanConfig struct {
	// Name names the plan (the deadline.plan attribute); not empty, unique.
	Name string `mapstructure:"name"`
	// Service is the service.name whose steps these are; not empty.
	Service string `mapstructure:"service"`
	// Target is the success probability aimed at, in (0, 1); 0: 0.99.
	Target float64 `mapstructure:"target"`
	// Steps in order; at least one.
	Steps []PlanStep `mapstructure:"steps"`
}

// PlanStep is one step of a plan: the deadline.Policy fields the budget
// depends on.
type PlanStep struct {
	// Step is deadline.step; not empty.
	Step string `mapstructure:"step"`
	// MaxAttempts >= 1.
	MaxAttempts int `mapstructure:"max_attempts"`
	// Floor is the policy's floor, >= 0.
	Floor time.Duration `mapstructure:"floor"`
	// BackoffBase and BackoffMax are the policy's backoff (full jitter);
	// 0: no backoff.
	BackoffBase time.Duration `mapstructure:"backoff_base"`
	BackoffMax  time.Duration `mapstructure:"backoff_max"`
}

func (p PlanStep) policy() deadline.Policy {
	return deadline.Policy{Name: p.Step, MaxAttempts: p.MaxAttempts, Floor: p.Floor,
		Backoff: deadline.Backoff{Base: p.BackoffBase, Max: p.BackoffMax, Jitter: deadline.JitterFull}}
}

// ErrInvalidConfig matches every error of [Config.Validate].
var ErrInvalidConfig = errors.New("deadlinebudget: invalid config")

// ConfigError names a field of [Config] that is not valid, the value
// given and what is allowed. It matches [ErrInvalidConfig]; Err is the
// underlying error, if any.
type ConfigError struct {
	Field   string
	Value   any
	Allowed string
	Err     error
}

func (e *ConfigError) Error() string {
	s := fmt.Sprintf("deadlinebudget: invalid %s %v: want %s", e.Field, e.Value, e.Allowed)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is reports whether target is [ErrInvalidConfig].
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// Validate checks the configuration (the Collector calls it before
// creating the connector) and returns a [*ConfigError] naming the first
// field that is not valid.
func (c *Config) Validate() error {
	if c.ExportInterval <= 0 {
		return &ConfigError{Field: "export_interval", Value: c.ExportInterval, Allowed: "> 0, e.g. 15s"}
	}
	if c.MaxKeys < 1 {
		return &ConfigError{Field: "max_keys", Value: c.MaxKeys, Allowed: ">= 1"}
	}
	if _, err := learn.Suggest("", nil, c.Suggest.options()); err != nil && !errors.Is(err, learn.ErrNotEnoughSamples) && !errors.Is(err, learn.ErrNoSamples) {
		var oe *learn.OptionError
		if errors.As(err, &oe) {
			return &ConfigError{Field: "suggest", Value: oe.Value, Allowed: oe.Allowed, Err: err}
		}
		return &ConfigError{Field: "suggest", Value: c.Suggest, Allowed: "valid suggestion options", Err: err}
	}
	names := map[string]bool{}
	for i, p := range c.Plans {
		field := func(f string) string { return fmt.Sprintf("plans[%d].%s", i, f) }
		switch {
		case p.Name == "":
			return &ConfigError{Field: field("name"), Value: `""`, Allowed: "a name"}
		case names[p.Name]:
			return &ConfigError{Field: field("name"), Value: p.Name, Allowed: "a name no other plan has"}
		case p.Service == "":
			return &ConfigError{Field: field("service"), Value: `""`, Allowed: "the service.name whose steps these are"}
		case p.Target != 0 && !(p.Target > 0 && p.Target < 1):
			return &ConfigError{Field: field("target"), Value: p.Target, Allowed: "in (0, 1) (0: 0.99)"}
		case len(p.Steps) == 0:
			return &ConfigError{Field: field("steps"), Value: "none", Allowed: "at least one step"}
		}
		names[p.Name] = true
		for j, s := range p.Steps {
			if s.Step == "" {
				return &ConfigError{Field: fmt.Sprintf("plans[%d].steps[%d].step", i, j), Value: `""`, Allowed: "the step's name (deadline.step)"}
			}
			if err := s.policy().Validate(); err != nil {
				return &ConfigError{Field: fmt.Sprintf("plans[%d].steps[%d]", i, j), Value: s.Step, Allowed: "a valid policy", Err: err}
			}
		}
	}
	if c.OpAMP != nil && c.OpAMP.Type().String() == "" {
		return &ConfigError{Field: "opamp", Value: c.OpAMP, Allowed: "an extension's ID, e.g. deadlinebudget_opamp"}
	}
	return nil
}

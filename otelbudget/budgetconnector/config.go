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
	// DefaultWindow is how far back the suggestions look.
	DefaultWindow = 10 * time.Minute
	// DefaultMaxNameLength caps service.name and deadline.step, in bytes.
	DefaultMaxNameLength = 256
	// DefaultMaxClockSkew is how far past the Collector's clock a sample's
	// time may be.
	DefaultMaxClockSkew = 5 * time.Minute
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
	// Window is how far back the suggestions look: they rest on the
	// attempts received in the last Window (kept as 4 slots of Window/4,
	// the oldest dropped whole at the first export after its time is up,
	// so on between 3/4 of it and all of it), and a key with nothing in
	// its window is forgotten. >= ExportInterval; default 10m.
	Window time.Duration `mapstructure:"window"`
	// MaxNameLength caps service.name and deadline.step, in bytes: a span
	// or a merged point with a longer one is dropped and counted (outcome
	// name_too_long). >= 1; default 256.
	MaxNameLength int `mapstructure:"max_name_length"`
	// MaxClockSkew is how far after the Collector's clock a sample's time
	// (a span's end, a merged last_sample) may be; a later one is dropped
	// and counted (outcome bad_time), so that no window ends in the
	// future. > 0; default 5m.
	MaxClockSkew time.Duration `mapstructure:"max_clock_skew"`
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
// creating the connector): it returns every field that is not valid, each
// a [*ConfigError] naming the field's path (plans[0].steps[1].step), joined
// with [errors.Join]; nil when all are.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field string, value any, allowed string, err error) {
		errs = append(errs, &ConfigError{Field: field, Value: value, Allowed: allowed, Err: err})
	}
	if c.ExportInterval <= 0 {
		bad("export_interval", c.ExportInterval, "> 0, e.g. 15s", nil)
	}
	if c.MaxKeys < 1 {
		bad("max_keys", c.MaxKeys, ">= 1", nil)
	}
	if c.Window < c.ExportInterval || c.Window <= 0 {
		bad("window", c.Window, fmt.Sprintf(">= export_interval (%s), e.g. 10m", c.ExportInterval), nil)
	}
	if c.MaxNameLength < 1 {
		bad("max_name_length", c.MaxNameLength, ">= 1 (bytes), e.g. 256", nil)
	}
	if c.MaxClockSkew <= 0 {
		bad("max_clock_skew", c.MaxClockSkew, "> 0, e.g. 5m", nil)
	}
	if _, err := learn.Suggest("", nil, c.Suggest.options()); err != nil && !errors.Is(err, learn.ErrNotEnoughSamples) && !errors.Is(err, learn.ErrNoSamples) {
		var oe *learn.OptionError
		if errors.As(err, &oe) {
			bad("suggest", oe.Value, oe.Allowed, err)
		} else {
			bad("suggest", c.Suggest, "valid suggestion options", err)
		}
	}
	names := map[string]bool{}
	for i, p := range c.Plans {
		field := func(f string) string { return fmt.Sprintf("plans[%d].%s", i, f) }
		if p.Name == "" {
			bad(field("name"), `""`, "a name", nil)
		} else if names[p.Name] {
			bad(field("name"), p.Name, "a name no other plan has", nil)
		}
		names[p.Name] = true
		if p.Service == "" {
			bad(field("service"), `""`, "the service.name whose steps these are", nil)
		}
		if p.Target != 0 && !(p.Target > 0 && p.Target < 1) {
			bad(field("target"), p.Target, "in (0, 1) (0: 0.99)", nil)
		}
		if len(p.Steps) == 0 {
			bad(field("steps"), "none", "at least one step", nil)
		}
		for j, s := range p.Steps {
			if s.Step == "" {
				bad(fmt.Sprintf("plans[%d].steps[%d].step", i, j), `""`, "the step's name (deadline.step)", nil)
				continue
			}
			if err := s.policy().Validate(); err != nil {
				bad(fmt.Sprintf("plans[%d].steps[%d]", i, j), s.Step, "a valid policy", err)
			}
		}
	}
	if c.OpAMP != nil && c.OpAMP.Type().String() == "" {
		bad("opamp", c.OpAMP, "an extension's ID, e.g. deadlinebudget_opamp", nil)
	}
	return errors.Join(errs...)
}

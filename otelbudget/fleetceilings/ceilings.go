// Package fleetceilings is the wire schema of a fleet's ceilings,
// "deadline.fleet.ceilings/v1": the JSON body the deadlinebudget connector
// computes per service and the deadlinebudget_opamp extension serves as
// OpAMP remote configuration (AgentConfigMap entry [ConfigKey]), and that
// budgetopamp's client reads ([Parse]) and applies. It imports the
// standard library and deadline/learn only, so that the Collector side and
// the client side share the type without either linking the other's
// dependencies (docs/ceilings.md, "Clients: fleet ceilings over OpAMP").
package fleetceilings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/deadlinebudget/budget/deadline/learn"
)

// The remote configuration that carries a fleet's ceilings: one entry of
// the OpAMP AgentConfigMap, under ConfigKey, with ContentType, whose body
// is a [Ceilings] document of schema [Schema] (docs/ceilings.md, "Clients:
// fleet ceilings over OpAMP").
const (
	// ConfigKey is the AgentConfigMap key of the ceilings.
	ConfigKey = "deadline.ceilings"
	// ContentType is the content type of the ceilings' config file.
	ContentType = "application/json"
	// Schema is the only schema version this package reads or writes.
	Schema = "deadline.fleet.ceilings/v1"
	// TimeLayout is how the body's times are written: RFC 3339 in UTC with
	// milliseconds. Any RFC 3339 time is read.
	TimeLayout = "2006-01-02T15:04:05.000Z07:00"
)

// ErrInvalidBody is matched (errors.Is) by every error of [Parse].
var ErrInvalidBody = errors.New("fleetceilings: invalid ceilings body")

// BodyError is a ceilings body [Parse] refused: Field names what
// was wrong ("schema", "steps[\"fetch\"].ceiling_ms", or "body" when it is
// not a JSON object of the schema's shape), Value is what it held and
// Allowed what is accepted. It matches [ErrInvalidBody], and unwraps to the
// JSON decoder's error when there is one.
type BodyError struct {
	Field   string
	Value   any
	Allowed string
	Err     error // the decoder's error, or nil
}

func (e *BodyError) Error() string {
	msg := fmt.Sprintf("fleetceilings: invalid ceilings body: %s %v: want %s", e.Field, e.Value, e.Allowed)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes a *BodyError match [ErrInvalidBody].
func (e *BodyError) Is(target error) bool { return target == ErrInvalidBody }

// Unwrap returns the JSON decoder's error, if any.
func (e *BodyError) Unwrap() error { return e.Err }

// Ceilings is the body of the fleet's ceilings, schema
// "deadline.fleet.ceilings/v1": per step, the ceiling the fleet's attempts
// suggest for one service, and the evidence it rests on. The Collector
// side computes it (the deadline connector) and pushes it over OpAMP; a
// client reads it with [Parse]. Fields this version does not know
// are ignored, so that a newer server can add some.
type Ceilings struct {
	// Schema is [Schema].
	Schema string `json:"schema"`
	// Service is the service.name the suggestions were computed for.
	Service string `json:"service"`
	// ComputedAt is when the suggestions were computed; zero when absent.
	ComputedAt time.Time `json:"computed_at"`
	// WindowStart and WindowEnd are the end times of the first and the
	// last sample the suggestions rest on; zero when absent.
	WindowStart time.Time `json:"window_start"`
	WindowEnd   time.Time `json:"window_end"`
	// Steps holds one suggestion per step; a step whose suggestion failed
	// (too few samples, too censored) is absent. Empty: no suggestion.
	Steps map[string]StepCeiling `json:"steps"`
}

// StepCeiling is one step's suggested per-attempt ceiling.
type StepCeiling struct {
	// CeilingMS is the suggested ceiling, in milliseconds: finite, > 0.
	CeilingMS float64 `json:"ceiling_ms"`
	// EstimateMS is the Kaplan–Meier Quantile of the attempts' durations
	// before the margin, in milliseconds.
	EstimateMS float64 `json:"estimate_ms"`
	// Quantile is the quantile the ceiling derives from, in (0, 1).
	Quantile float64 `json:"quantile"`
	// Margin multiplies the estimate.
	Margin float64 `json:"margin"`
	// Samples counts the attempts the suggestion rests on, completed plus
	// censored; Censored, those of them a limit cut.
	Samples  uint64 `json:"samples"`
	Censored uint64 `json:"censored"`
}

// Ceiling returns CeilingMS as a duration, rounded to the nanosecond and
// saturated at the largest duration.
func (s StepCeiling) Ceiling() time.Duration { return msToDuration(s.CeilingMS) }

func msToDuration(ms float64) time.Duration {
	ns := math.Round(ms * 1e6)
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// Parse reads a ceilings body and checks it: a JSON object whose
// "schema" is exactly [Schema], with at most [learn.MaxSteps] steps, each
// with a finite ceiling_ms > 0 and a quantile in (0, 1), and
// no negative estimate_ms or margin. Unknown fields are ignored. It fails
// with a [*BodyError] (matching [ErrInvalidBody]) naming the first thing
// wrong, steps checked in name order; then the Ceilings returned is the
// zero value, and a caller keeps what it had.
func Parse(body []byte) (Ceilings, error) {
	var c Ceilings
	if err := json.Unmarshal(body, &c); err != nil {
		return Ceilings{}, &BodyError{Field: "body", Value: fmt.Sprintf("(%d bytes)", len(body)),
			Allowed: "a JSON object of schema " + Schema, Err: err}
	}
	if c.Schema != Schema {
		return Ceilings{}, &BodyError{Field: "schema", Value: fmt.Sprintf("%q", c.Schema), Allowed: fmt.Sprintf("exactly %q", Schema)}
	}
	if err := c.Validate(); err != nil {
		return Ceilings{}, err
	}
	return c, nil
}

// Validate checks c's steps as [Parse] does (not its Schema, which
// [Ceilings.MarshalJSON] writes), returning a [*BodyError] or nil.
func (c Ceilings) Validate() error {
	if len(c.Steps) > learn.MaxSteps {
		return &BodyError{Field: "steps", Value: fmt.Sprintf("(%d steps)", len(c.Steps)), Allowed: fmt.Sprintf("at most %d steps (learn.MaxSteps)", learn.MaxSteps)}
	}
	names := make([]string, 0, len(c.Steps))
	for name := range c.Steps {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := c.Steps[name]
		field := func(f string) string { return fmt.Sprintf("steps[%q].%s", name, f) }
		switch {
		case !(s.CeilingMS > 0) || math.IsInf(s.CeilingMS, 0):
			return &BodyError{Field: field("ceiling_ms"), Value: s.CeilingMS, Allowed: "a finite number of milliseconds > 0"}
		case !(s.Quantile > 0 && s.Quantile < 1):
			return &BodyError{Field: field("quantile"), Value: s.Quantile, Allowed: "in (0, 1), e.g. 0.99"}
		case !(s.EstimateMS >= 0) || math.IsInf(s.EstimateMS, 0):
			return &BodyError{Field: field("estimate_ms"), Value: s.EstimateMS, Allowed: "a finite number of milliseconds >= 0"}
		case !(s.Margin >= 0) || math.IsInf(s.Margin, 0):
			return &BodyError{Field: field("margin"), Value: s.Margin, Allowed: "finite and >= 0 (0: not given)"}
		}
	}
	return nil
}

// MarshalJSON writes c as the schema says: "schema" is [Schema] whatever
// c.Schema holds, times in [TimeLayout] (UTC, milliseconds; a zero time is
// omitted), "steps" an object (empty rather than null). It does not
// validate c: call [Ceilings.Validate] first.
func (c Ceilings) MarshalJSON() ([]byte, error) {
	steps := c.Steps
	if steps == nil {
		steps = map[string]StepCeiling{}
	}
	ts := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(TimeLayout)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		Schema      string                 `json:"schema"`
		Service     string                 `json:"service"`
		ComputedAt  string                 `json:"computed_at,omitempty"`
		WindowStart string                 `json:"window_start,omitempty"`
		WindowEnd   string                 `json:"window_end,omitempty"`
		Steps       map[string]StepCeiling `json:"steps"`
	}{Schema, c.Service, ts(c.ComputedAt), ts(c.WindowStart), ts(c.WindowEnd), steps})
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), err
}

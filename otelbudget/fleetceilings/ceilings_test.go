package fleetceilings_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/otelbudget/fleetceilings"
)

// contractBody is the example body of the wire contract, with a field this
// version does not know.
const contractBody = `{
  "schema": "deadline.fleet.ceilings/v1",
  "service": "checkout",
  "computed_at": "2026-12-02T03:00:00.000Z",
  "window_start": "2026-12-02T02:50:00.000Z", "window_end": "2026-12-02T02:59:59.999Z",
  "future_field": {"x": 1},
  "steps": {
    "fetch": {"ceiling_ms": 123.4, "estimate_ms": 102.8, "quantile": 0.99, "margin": 1.2,
              "samples": 5000, "censored": 120, "unknown": true},
    "search": {"ceiling_ms": 12, "estimate_ms": 10, "quantile": 0.99, "margin": 1.2, "samples": 1000, "censored": 0}
  }
}`

func TestParseCeilingsReadsTheContractBody(t *testing.T) {
	c, err := fleetceilings.Parse([]byte(contractBody))
	require.NoError(t, err)
	assert.Equal(t, fleetceilings.Schema, c.Schema)
	assert.Equal(t, "checkout", c.Service)
	assert.Equal(t, time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC), c.ComputedAt.UTC())
	assert.Equal(t, time.Date(2026, 12, 2, 2, 59, 59, 999e6, time.UTC), c.WindowEnd.UTC())
	require.Len(t, c.Steps, 2)
	f := c.Steps["fetch"]
	assert.Equal(t, fleetceilings.StepCeiling{CeilingMS: 123.4, EstimateMS: 102.8, Quantile: 0.99, Margin: 1.2, Samples: 5000, Censored: 120}, f)
	assert.Equal(t, 123400*time.Microsecond, f.Ceiling())
}

// What MarshalJSON writes, ParseCeilings reads back unchanged, with the
// times at the millisecond in UTC.
func TestCeilingsRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 2, 3, 0, 0, 123456789, time.FixedZone("x", 3600))
	in := fleetceilings.Ceilings{Service: "checkout", ComputedAt: at, WindowStart: at.Add(-time.Minute), WindowEnd: at,
		Steps: map[string]fleetceilings.StepCeiling{"fetch": {CeilingMS: 250, EstimateMS: 208.3, Quantile: 0.99, Margin: 1.2, Samples: 7, Censored: 1}}}
	b, err := in.MarshalJSON()
	require.NoError(t, err)
	assert.Contains(t, string(b), `"schema":"deadline.fleet.ceilings/v1"`)
	assert.Contains(t, string(b), `"computed_at":"2026-12-02T02:00:00.123Z"`)
	out, err := fleetceilings.Parse(b)
	require.NoError(t, err)
	assert.Equal(t, in.Steps, out.Steps)
	assert.Equal(t, at.Truncate(time.Millisecond).UTC(), out.ComputedAt.UTC())

	empty, err := fleetceilings.Ceilings{Service: "s"}.MarshalJSON()
	require.NoError(t, err)
	assert.JSONEq(t, `{"schema":"deadline.fleet.ceilings/v1","service":"s","steps":{}}`, string(empty))
	c, err := fleetceilings.Parse(empty)
	require.NoError(t, err)
	assert.Empty(t, c.Steps, "no suggestion is a valid body")
}

func TestParseCeilingsRefusesBadBodies(t *testing.T) {
	step := func(s string) string {
		return `{"schema":"deadline.fleet.ceilings/v1","service":"s","steps":{"fetch":` + s + `}}`
	}
	var many strings.Builder
	many.WriteString(`{"schema":"deadline.fleet.ceilings/v1","steps":{`)
	for i := range 257 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `"s%d":{"ceiling_ms":1,"quantile":0.99}`, i)
	}
	many.WriteString("}}")
	for name, tc := range map[string]struct{ body, field, msg string }{
		"not json":       {`{"schema":`, "body", "a JSON object"},
		"not an object":  {`[1]`, "body", "a JSON object"},
		"no schema":      {`{"steps":{}}`, "schema", `exactly "deadline.fleet.ceilings/v1"`},
		"other schema":   {`{"schema":"deadline.fleet.ceilings/v2","steps":{}}`, "schema", `"deadline.fleet.ceilings/v2"`},
		"zero ceiling":   {step(`{"ceiling_ms":0,"quantile":0.99}`), `steps["fetch"].ceiling_ms`, "> 0"},
		"no ceiling":     {step(`{"quantile":0.99}`), `steps["fetch"].ceiling_ms`, "> 0"},
		"negative":       {step(`{"ceiling_ms":-5,"quantile":0.99}`), `steps["fetch"].ceiling_ms`, "-5"},
		"huge number":    {step(`{"ceiling_ms":1e999,"quantile":0.99}`), "body", "1e999"},
		"string ceiling": {step(`{"ceiling_ms":"100","quantile":0.99}`), "body", "string"},
		"quantile 1":     {step(`{"ceiling_ms":100,"quantile":1}`), `steps["fetch"].quantile`, "in (0, 1)"},
		"no quantile":    {step(`{"ceiling_ms":100}`), `steps["fetch"].quantile`, "in (0, 1)"},
		"neg estimate":   {step(`{"ceiling_ms":100,"quantile":0.9,"estimate_ms":-1}`), `steps["fetch"].estimate_ms`, ">= 0"},
		"neg samples":    {step(`{"ceiling_ms":100,"quantile":0.9,"samples":-1}`), "body", "uint64"},
		"too many steps": {many.String(), "steps", "at most 256"},
	} {
		c, err := fleetceilings.Parse([]byte(tc.body))
		require.Error(t, err, name)
		assert.ErrorIs(t, err, fleetceilings.ErrInvalidBody, name)
		var be *fleetceilings.BodyError
		require.True(t, errors.As(err, &be), name)
		assert.Equal(t, tc.field, be.Field, name)
		assert.Contains(t, err.Error(), tc.msg, name)
		assert.Zero(t, c, name)
	}
}

func TestStepCeilingSaturates(t *testing.T) {
	assert.Equal(t, time.Duration(1<<63-1), fleetceilings.StepCeiling{CeilingMS: 1e300}.Ceiling())
	assert.Equal(t, time.Nanosecond, fleetceilings.StepCeiling{CeilingMS: 1e-6}.Ceiling())
}

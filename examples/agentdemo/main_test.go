package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demo's run on loopback, end to end: the waterfall and the stdout
// export hold the GenAI spans, and the run either answered or stopped with
// its typed stop. The budget is generous, so that in the usual case the
// hanging tool is abandoned and the reserve answers; what the run does at
// each instant is the virtual-time tests' of otelbudgetgenkit/test. No
// wall-clock duration is asserted.
func TestDemo(t *testing.T) {
	var out strings.Builder
	err := run(context.Background(), &out, options{
		budget: 4 * time.Second, reserve: 1500 * time.Millisecond, slowAt: 2, slow: 3 * time.Second,
		export: "stdout", waitTools: true,
	})
	require.NoError(t, err)
	s := out.String()
	assert.Contains(t, s, "invoke_agent researcher")
	assert.Contains(t, s, "chat fake-1")
	assert.Regexp(t, `(?m)^(answered from the reserve after|answered after|stopped after) `, s)
	if strings.Contains(s, "answered from the reserve") {
		assert.Contains(t, s, "call_2 abandoned at its lease")
		assert.Contains(t, s, "final call, from the reserve")
	}
	assert.Contains(t, s, `"Name": "invoke_agent researcher"`, "the stdout export")
	assert.Contains(t, s, `"gen_ai.operation.name"`)
}

func TestBadFlags(t *testing.T) {
	err := run(context.Background(), &strings.Builder{}, options{budget: time.Second, export: "otlp"})
	require.ErrorContains(t, err, `-export "otlp": want stdout or none`)
}

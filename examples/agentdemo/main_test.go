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

// The demo's run on loopback: a generous budget, so that under any load
// the hanging tool is abandoned and the reserve answers; the waterfall and
// the stdout export hold the GenAI spans. No wall-clock duration is
// asserted.
func TestDemo(t *testing.T) {
	var out strings.Builder
	err := run(context.Background(), &out, options{
		budget: 2 * time.Second, reserve: 700 * time.Millisecond, slowAt: 2, slow: 2 * time.Second,
		export: "stdout", waitTools: true,
	})
	require.NoError(t, err)
	s := out.String()
	assert.Contains(t, s, "invoke_agent researcher")
	assert.Contains(t, s, "call_2 abandoned at its lease")
	assert.Contains(t, s, "final call, from the reserve")
	assert.Contains(t, s, "answered from the reserve after")
	assert.Contains(t, s, `"Name": "execute_tool lookup"`, "the stdout export")
	assert.Contains(t, s, `"gen_ai.operation.name"`)
}

func TestBadFlags(t *testing.T) {
	err := run(context.Background(), &strings.Builder{}, options{budget: time.Second, export: "otlp"})
	require.ErrorContains(t, err, `-export "otlp": want stdout or none`)
}

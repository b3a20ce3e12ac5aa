package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/otelbudget"
)

// runMain runs the demo's main in a child process (this test binary, see
// TestMain) with args and env added to the test's environment, less its
// OTEL_* and NO_COLOR variables, and returns the child's stdout, stderr and
// exit code.
func runMain(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, "NO_COLOR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// Under -race, a child that exits 0 would otherwise sleep a second
	// first, waiting for late race reports.
	cmd.Env = append(append(cmd.Env, mainEnv+"=1", "GORACE=atexit_sleep_ms=0"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return stdout.String(), stderr.String(), code
}

// TestMainExitCodes runs the demo as a person does and checks its exit
// code and what it says. Every case is one whose outcome does not depend
// on timing: help, bad flags, and budgets below the floor, where every
// step is refused before dialing.
func TestMainExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		env        []string
		code       int
		stdout     []string // substrings
		stderr     []string
		stderrOnly string // the whole of stderr, when set
	}{
		{name: "help", args: []string{"-h"}, code: 0,
			stderr: []string{"Usage of tracedemo", "Output: the spans and metrics as JSON on stdout", "-export-timeout duration", "(default 500ms)"}},
		{name: "a budget of 0", args: []string{"-budget", "0"}, code: 2,
			stderrOnly: "tracedemo: -budget 0s: want a positive duration such as 1s or 300ms\n"},
		{name: "a negative budget", args: []string{"-budget", "-1s"}, code: 2,
			stderrOnly: "tracedemo: -budget -1s: want a positive duration such as 1s or 300ms\n"},
		{name: "an unknown flag", args: []string{"-colour"}, code: 2,
			stderrOnly: "tracedemo: flag provided but not defined: -colour (-h lists the flags)\n"},
		{name: "a budget without a unit", args: []string{"-budget", "1"}, code: 2,
			stderrOnly: "tracedemo: invalid value \"1\" for flag -budget: want a number with a unit, such as 1s, 500ms or 1m30s (-h lists the flags)\n"},
		{name: "an unknown exporter in the environment", env: []string{"OTEL_TRACES_EXPORTER=bogus"}, code: 2,
			stderrOnly: "tracedemo: OTEL_TRACES_EXPORTER=bogus: want otlp, console or none\n"},
		{name: "a budget of the user's is shown, not checked", args: []string{"-budget", "5ms", "-exporter", "none"}, code: 0,
			stdout: []string{
				"verdicts search=deadline_too_small fetch=deadline_too_small extract=deadline_too_small\n",
				"-budget 5ms replaces the scenario's 1s: the verdicts are shown, not checked against its design\n",
			},
			stderrOnly: ""},
		{name: "the scenario's own budget is checked", args: []string{"-scenario", "refused", "-exporter", "none"}, code: 0,
			stdout: []string{"verdicts search=deadline_too_small fetch=deadline_too_small extract=deadline_too_small\n"}, stderrOnly: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runMain(t, tc.env, tc.args...)
			assert.Equal(t, tc.code, code, "exit code; stderr:\n%s", stderr)
			for _, s := range tc.stdout {
				assert.Contains(t, stdout, s)
			}
			for _, s := range tc.stderr {
				assert.Contains(t, stderr, s)
			}
			if tc.stderr == nil {
				assert.Equal(t, tc.stderrOnly, stderr)
			}
		})
	}
}

// TestMainStdoutIsJSON: with the default exporter, the process's stdout
// is nothing but the spans and metrics as JSON (what `make demo | jq`
// reads), and the waterfall, the summary and the export line are on
// stderr. The refused scenario makes the same telemetry whatever the load;
// the ok scenario, with -budget so that its timing does not decide the exit
// code, sends real requests on loopback.
func TestMainStdoutIsJSON(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		stdout, stderr, code := runMain(t, nil, "-scenario", "refused")
		require.Equal(t, 0, code, "stderr:\n%s", stderr)
		spans, metrics := decodeStdout(t, []byte(stdout))
		assert.Len(t, spans, 4, "the run span and 3 call spans")
		assert.Subset(t, metricNames(metrics), []string{otelbudget.MetricRefusals, otelbudget.MetricCallSlack})
		assert.Contains(t, stderr, "step     try   lease")
		assert.Contains(t, stderr, "verdicts search=deadline_too_small fetch=deadline_too_small extract=deadline_too_small\n")
		assert.True(t, strings.HasSuffix(stderr, "\ntracedemo: exported 4 spans and 12 metric points to stdout\n"), stderr)
	})
	t.Run("ok on loopback", func(t *testing.T) {
		stdout, stderr, code := runMain(t, nil, "-budget", "1s")
		require.Equal(t, 0, code, "stderr:\n%s", stderr)
		spans, metrics := decodeStdout(t, []byte(stdout))
		// How many depends on timing; that every byte is JSON does not.
		assert.NotEmpty(t, spans)
		assert.Contains(t, metricNames(metrics), otelbudget.MetricAttemptDuration)
		assert.Contains(t, stderr, "step     try   lease")
		assert.Regexp(t, `\ntracedemo: exported \d+ spans and \d+ metric points to stdout\n$`, stderr)
	})
}

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// make advise prints one run budget: on the spans the demo exports, its
// "plan budget" line and budgetadvise's "suggested budget" line give the
// same budget and the same P(success) (otelbudget.SuggestRunBudget, one
// computation, over the same samples). Before, the demo budgeted from its
// hooks' learning runs and budgetadvise from every exported run: 526ms at
// 0.9970 against 863ms at 0.9990 for 1 000 runs. Skipped in -short mode
// (it builds and runs budgetadvise).
func TestPlanBudgetMatchesBudgetadvise(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs budgetadvise")
	}
	var out, errOut bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		cfg := defaultConfig()
		cfg.runs, cfg.parallel, cfg.stage, cfg.exporter, cfg.scenarioRuns = 1000, 1, memStage, exporterStdout, true
		require.NoError(t, run(t.Context(), cfg, &out, &errOut))
	})
	demo := regexp.MustCompile(`plan budget: (\S+) for P\(success\) (\S+) \(target (\S+)\)`).FindStringSubmatch(errOut.String())
	require.NotNil(t, demo, "the demo's report (stderr):\n%s", errOut.String())

	file := filepath.Join(t.TempDir(), "runs.json")
	require.NoError(t, os.WriteFile(file, out.Bytes(), 0o644))
	cmd := exec.Command("go", "run", ".", file)
	cmd.Dir = filepath.Join("..", "..", "otelbudget", "cmd", "budgetadvise")
	adv, err := cmd.CombinedOutput()
	require.NoError(t, err, "budgetadvise:\n%s", adv)
	advise := regexp.MustCompile(`suggested budget (\S+), P\(success\) (\S+) \(target (\S+)\)`).FindStringSubmatch(string(adv))
	require.NotNil(t, advise, "budgetadvise's advice:\n%s", adv)

	assert.Equal(t, advise[1:], demo[1:], "budget, P(success) and target: budgetadvise %q, the demo %q", advise[0], demo[0])
	t.Logf("demo: %s; budgetadvise: %s", demo[0], advise[0])
}

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMakeDemoStdoutIsJSON runs the README's command as a person does,
// `make demo` from the repository's root, and decodes its stdout as a
// stream of JSON values: `make demo | jq` works only if make itself prints
// nothing there (its recipe is silent). Skipped where make is not installed
// or in -short mode (it builds and runs the demo).
func TestMakeDemoStdoutIsJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the demo")
	}
	mk, err := exec.LookPath("make")
	if err != nil {
		t.Skip("make is not installed")
	}
	cmd := exec.Command(mk, "demo")
	cmd.Dir = "../.."
	// As a person runs it: a top-level make. Under `make test` the
	// variables of the make above would make this one a sub-make, which
	// prints "Entering directory" lines on stdout.
	for _, kv := range os.Environ() {
		switch name, _, _ := strings.Cut(kv, "="); {
		case strings.HasPrefix(name, "OTEL_"), name == "MAKEFLAGS", name == "MFLAGS", name == "MAKELEVEL", name == "MAKEOVERRIDES":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "make demo: stderr:\n%s", stderr.String())
	dec := json.NewDecoder(&stdout)
	n := 0
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "value %d of make demo's stdout is JSON", n+1)
		n++
	}
	assert.Greater(t, n, 1, "spans and metrics on stdout")
	assert.Contains(t, stderr.String(), "verdicts search=ok fetch=ok extract=ok", "the waterfall and summary on stderr")
}

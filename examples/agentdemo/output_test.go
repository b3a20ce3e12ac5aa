package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// By default the terminal gets the waterfall and the summary, ending with
// how many spans were recorded and how to get them, and no JSON (127 KB of
// it followed the waterfall and scrolled it away); -json FILE writes them
// to FILE; -export stdout puts only the JSON on stdout, the waterfall on
// the other writer (stderr).
func TestDemoOutput(t *testing.T) {
	o := options{budget: 4 * time.Second, reserve: 1500 * time.Millisecond, slowAt: 2, slow: 3 * time.Second, export: "none", waitTools: true}

	var term strings.Builder
	require.NoError(t, run(context.Background(), &term, o))
	s := term.String()
	assert.Contains(t, s, "invoke_agent researcher", "the waterfall")
	assert.False(t, strings.Contains(s, `"Name":`), "no JSON on the terminal")
	assert.Regexp(t, `(?m)^\d+ spans recorded \(invoke_agent, chat, execute_tool and Genkit's own\); -json FILE writes them as JSON to FILE, -export stdout to stdout \(the waterfall then on stderr\)$`, s)
	lines := strings.Split(strings.TrimSpace(s), "\n")
	assert.Less(t, len(lines), 60, "the whole output fits a terminal")

	file := filepath.Join(t.TempDir(), "spans.json")
	o.jsonFile = file
	term.Reset()
	require.NoError(t, run(context.Background(), &term, o))
	assert.False(t, strings.Contains(term.String(), `"Name":`), "no JSON on the terminal")
	assert.Regexp(t, `(?m)^\d+ spans written to `+regexp(file)+` as JSON$`, term.String())
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(data), `"Name": "invoke_agent researcher"`), "the spans in the file")

	var stdout, stderr strings.Builder
	o.jsonFile, o.export, o.human = "", "stdout", &stderr
	require.NoError(t, run(context.Background(), &stdout, o))
	assert.True(t, strings.HasPrefix(strings.TrimSpace(stdout.String()), "{"), "stdout holds only JSON")
	assert.False(t, strings.Contains(stdout.String(), " model calls, "), "the summary is on stderr, not in the JSON")
	assert.Contains(t, stderr.String(), "invoke_agent researcher", "the waterfall on stderr")
}

func regexp(s string) string { return strings.NewReplacer(".", `\.`, "(", `\(`, ")", `\)`).Replace(s) }

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRejectsBadFlags(t *testing.T) {
	var out, log bytes.Buffer
	assert.ErrorContains(t, run([]string{"-parallel", "0"}, &out, &log), "-parallel is 0")
	assert.Error(t, run([]string{"-no-such-flag"}, &out, &log))
	assert.ErrorContains(t, run([]string{"-repeat", "0"}, &out, &log), "-repeat is 0")
}

// TestScenario5Only runs the cheapest real scenario end to end on loopback
// and checks the table's shape and this project's row.
func TestScenario5Only(t *testing.T) {
	var out, log bytes.Buffer
	if err := run([]string{"-only", "5", "-runs", "1"}, &out, &log); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	assert.Contains(t, s, "### Scenario 5")
	assert.Contains(t, s, "| deadline (this) | 503 | 1 | 1, 1 | 0/1 | 0/1 | executed once: met |")
	assert.Contains(t, s, "| deadline (this) | reset | 1 | 1, 1 | 0/1 | 0/1 | executed once: met |")
	assert.Contains(t, s, "| hand-written loop | 503 | 1 | 2, 2 | 1/1 | 1/1 | — |", "a replayed POST: executed twice, the caller's call succeeded")
}

// TestRepeatMergesRuns runs scenario 5 twice and checks that one table comes
// out, whose rows hold across both runs, and that the header says so.
func TestRepeatMergesRuns(t *testing.T) {
	var out, log bytes.Buffer
	if err := run([]string{"-only", "5", "-runs", "1", "-repeat", "2"}, &out, &log); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	assert.Equal(t, 1, strings.Count(s, "### Scenario 5"))
	assert.Contains(t, s, "run 2 times in a row")
	assert.Contains(t, s, "clock source ")
	assert.Contains(t, s, "| deadline (this) | 503 | 1 | 1, 1 | 0/1 | 0/1 | executed once: met |")
	assert.Contains(t, log.String(), "run 2 of 2")
}

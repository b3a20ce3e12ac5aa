package main

import (
	"bytes"
	"errors"
	"flag"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tracedemo -h: every flag's help is whole sentences; -runs' stopped at
// "and one run of each scenario".
func TestHelpSentencesEnd(t *testing.T) {
	var out bytes.Buffer
	_, err := parseFlags([]string{"-h"}, func(string) string { return "" }, &out)
	require.True(t, errors.Is(err, flag.ErrHelp), "%v", err)
	usage := out.String()
	runs := regexp.MustCompile(`(?s)\n  -runs int\n(.*?)\n  -`).FindStringSubmatch(usage)
	require.NotNil(t, runs, usage)
	help := strings.Join(strings.Fields(runs[1]), " ")
	assert.Contains(t, help, "The learning runs are exported, with one run of each scenario under the article's ceilings (-scenario-runs), for budgetadvise;")
	assert.NotRegexp(t, `(and|of|the|a|with)$`, help, "-runs' help ends a sentence")
}

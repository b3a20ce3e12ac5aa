package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckChangelog(t *testing.T) {
	rels := []Release{{Set: "stable", Version: "v1.2.0"}, {Set: "experimental", Version: "v0.3.0"}, {Set: "stable", Version: "v1.2.0"}}
	require.NoError(t, checkChangelog([]byte("# Changelog\n\n## [Unreleased]\n\n## [1.2.0/0.3.0] - 2026-12-02\n"), rels))

	err := checkChangelog([]byte("## [Unreleased]\n\n## [1.2.0] - 2026-12-02\n\n### Added\n- 0.3.0 is mentioned, not a heading\n"), rels)
	require.Error(t, err)
	assert.Equal(t, `CHANGELOG.md has no heading for v0.3.0 (module set experimental): add "## [0.3.0] - YYYY-MM-DD" with the release's notes`, err.Error())
}

func TestSplitPackages(t *testing.T) {
	rels := []Release{{Module: Module{Path: "example.com/m"}, Version: "v0.1.0"}, {Module: Module{Path: "example.com/m/cmd/c"}, Version: "v0.1.0"}}
	out := `{"ImportPath":"example.com/m","Name":"m","GoFiles":["m.go"],"Module":{"Path":"example.com/m","Version":"v0.1.0"}}
{"ImportPath":"example.com/m/internal/x","Name":"x","GoFiles":["x.go"],"Module":{"Path":"example.com/m","Version":"v0.1.0"}}
{"ImportPath":"example.com/m/onlytests","Name":"onlytests","Module":{"Path":"example.com/m","Version":"v0.1.0"}}
{"ImportPath":"example.com/m/cmd/c","Name":"main","GoFiles":["main.go"],"Module":{"Path":"example.com/m/cmd/c","Version":"v0.1.0"}}
{"ImportPath":"example.com/m/examples/e","Name":"e","GoFiles":["e.go"],"Module":{"Path":"example.com/m/examples/e","Version":"v0.0.0"}}
`
	libs, cmds, err := splitPackages([]byte(out), rels)
	require.NoError(t, err)
	assert.Equal(t, []string{"example.com/m"}, libs, "internal, test-only and unreleased packages are not imported")
	assert.Equal(t, []string{"example.com/m/cmd/c@v0.1.0"}, cmds)
}

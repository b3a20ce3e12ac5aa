package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// notesUntagged is the changelog of testRepo before v0.1.0 is tagged.
const notesUntagged = "# Changelog\n\n## [Unreleased]\n\n### Added\n\n- `sub`: S.\n\n## [0.1.0] - not yet tagged\n\nThe first release: `example.com/m` and `sub`.\n\n### Added\n\n- A and B.\n\n[Unreleased]: https://example.com/m/commits/main\n"

func (r *testRepo) agree() error {
	r.t.Helper()
	return Agree(io.Discard, Repo{Root: r.dir})
}

// The story of an untagged release agrees; prepare moves [Unreleased]
// under it, and with TAG=1 dates it, links it, commits and tags: the story
// still agrees, and the tags are at the dated commit.
func TestAgreeThroughARelease(t *testing.T) {
	r := newTestRepo(t)
	r.write(changelogFile, notesUntagged)
	r.commit("untagged")
	require.NoError(t, r.agree())

	var out bytes.Buffer
	require.NoError(t, Prepare(&out, r.dir, "", "v0.1.0", false))
	assert.Contains(t, out.String(), "the [Unreleased] entries moved under [0.1.0]")
	got := r.git("show", ":"+changelogFile) // unchanged in the index
	assert.Equal(t, notesUntagged, got)
	moved, err := Repo{Root: r.dir}.ReadFile(changelogFile)
	require.NoError(t, err)
	assert.Equal(t, "# Changelog\n\n## [Unreleased]\n\n## [0.1.0] - not yet tagged\n\nThe first release: `example.com/m` and `sub`.\n\n### Added\n\n- A and B.\n- `sub`: S.\n\n[Unreleased]: https://example.com/m/commits/main\n", string(moved))
	require.NoError(t, r.agree())
	r.commit("prepared")

	out.Reset()
	require.NoError(t, Prepare(&out, r.dir, "", "v0.1.0", true))
	day := time.Now().UTC().Format(time.DateOnly)
	assert.Contains(t, out.String(), "[0.1.0] dated "+day)
	dated := r.git("show", "v0.1.0:"+changelogFile)
	assert.Contains(t, dated, "## [0.1.0] - "+day+"\n")
	assert.Contains(t, dated, "[Unreleased]: https://example.com/m/compare/v0.1.0...HEAD\n[0.1.0]: https://example.com/m/releases/tag/v0.1.0\n")
	assert.Equal(t, strings.TrimSpace(r.git("rev-parse", "HEAD")), strings.TrimSpace(r.git("rev-parse", "sub/v0.1.0^{commit}")))
	require.NoError(t, r.agree())
}

// Each disagreement fails the check, saying what is wrong: a dated release
// without its tags, a module of the set the notes do not name, a link to a
// tag that does not exist, a set version without notes, a pseudo-version.
func TestAgreeFails(t *testing.T) {
	for _, tc := range []struct {
		name, notes, subMod string
		want                []string
	}{{
		name:  "dated without tags",
		notes: strings.Replace(notesUntagged, "not yet tagged", "2026-12-02", 1),
		want:  []string{"CHANGELOG.md:9: [0.1.0] is dated 2026-12-02, but 2 of its 2 tags do not exist (v0.1.0, sub/v0.1.0)", "CHANGELOG.md:9: [0.1.0] has no link definition"},
	}, {
		name:  "a module not named",
		notes: strings.Replace(notesUntagged, " and `sub`", "", 1),
		want:  []string{"CHANGELOG.md:9: section [0.1.0] does not name 1 of the 2 modules versions.yaml releases at v0.1.0: `sub`"},
	}, {
		name:  "a link to no tag",
		notes: strings.Replace(notesUntagged, "commits/main", "compare/v0.1.0...HEAD", 1),
		want:  []string{"CHANGELOG.md:17: [Unreleased] links to https://example.com/m/compare/v0.1.0...HEAD, but tag v0.1.0 does not exist", "[Unreleased] should link to https://example.com/m/commits/main"},
	}, {
		name:  "no section for the set's version",
		notes: strings.Replace(notesUntagged, "[0.1.0]", "[0.0.9]", 1),
		want:  []string{"module set m is at v0.1.0 in versions.yaml, but CHANGELOG.md has no section for it"},
	}, {
		name:   "a pseudo-version",
		notes:  notesUntagged,
		subMod: "module example.com/m/sub\n\ngo 1.26.0\n\nrequire example.com/m v0.0.0-00010101000000-000000000000\n\nreplace example.com/m => ../\n",
		want:   []string{"sub/go.mod:5: requires example.com/m at the pseudo-version v0.0.0-00010101000000-000000000000: a module of this repository is required at a release version, v0.1.0"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newTestRepo(t)
			r.write(changelogFile, tc.notes)
			if tc.subMod != "" {
				r.write("sub/go.mod", tc.subMod)
			}
			r.commit("throwaway")
			err := r.agree()
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// This repository's own story agrees (make release-agree runs the same).
func TestAgreeThisRepository(t *testing.T) {
	top, err := git(".", "rev-parse", "--show-toplevel")
	require.NoError(t, err)
	require.NoError(t, Agree(io.Discard, Repo{Root: strings.TrimSpace(string(top))}))
}

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testRepo is a git repository in a temporary directory holding a root
// module example.com/m and a nested module example.com/m/sub.
type testRepo struct {
	t   *testing.T
	dir string
}

func newTestRepo(t *testing.T) *testRepo {
	t.Helper()
	r := &testRepo{t: t, dir: t.TempDir()}
	r.git("init", "--quiet", "--initial-branch=main")
	r.git("config", "user.email", "test@example.com")
	r.git("config", "user.name", "test")
	r.git("config", "commit.gpgsign", "false")
	r.git("config", "tag.gpgsign", "false")
	r.write("go.mod", "module example.com/m\n\ngo 1.26.0\n")
	r.write("m.go", "// Package m is the root package.\npackage m\n\n// A is kept.\nfunc A() {}\n\n// B is removed in the test.\nfunc B() {}\n")
	r.write("internal/x/x.go", "package x\n\n// X is internal: never compared.\nfunc X() {}\n")
	r.write("sub/go.mod", "module example.com/m/sub\n\ngo 1.26.0\n")
	r.write("sub/sub.go", "// Package sub is a nested module's package.\npackage sub\n\n// S is kept.\nfunc S() {}\n")
	r.versions("v0.1.0")
	return r
}

func (r *testRepo) git(args ...string) string {
	r.t.Helper()
	out, err := git(r.dir, args...)
	require.NoError(r.t, err)
	return string(out)
}

func (r *testRepo) write(name, content string) {
	r.t.Helper()
	p := filepath.Join(r.dir, filepath.FromSlash(name))
	require.NoError(r.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(r.t, os.WriteFile(p, []byte(content), 0o644))
}

func (r *testRepo) versions(version string) {
	r.t.Helper()
	r.write(versionsFile, "module-sets:\n  m:\n    version: "+version+"\n    modules:\n      - example.com/m\n      - example.com/m/sub\n")
}

func (r *testRepo) commit(msg string) {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "--quiet", "-m", msg)
}

// apiCheck runs APICheck on the working tree and returns its output.
func (r *testRepo) apiCheck() (string, error) {
	var out bytes.Buffer
	err := APICheck(&out, Repo{Root: r.dir})
	return out.String(), err
}

func requireTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"git", "go", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not in PATH: %v", tool, err)
		}
	}
}

func TestAPICheckNotYetReleased(t *testing.T) {
	requireTools(t)
	r := newTestRepo(t)
	r.commit("first")

	out, err := r.apiCheck()
	require.NoError(t, err)
	assert.Contains(t, out, "example.com/m: not yet released (no tag vX.Y.Z reachable from HEAD)")
	assert.Contains(t, out, "example.com/m/sub: not yet released (no tag sub/vX.Y.Z reachable from HEAD): nothing to compare; its first release is v0.1.0, \"not yet tagged\" in CHANGELOG.md until make release-prepare VERSION=v0.1.0 TAG=1 tags it")
}

func TestAPICheckIncompatibleChange(t *testing.T) {
	requireTools(t)
	r := newTestRepo(t)
	r.commit("v0.1.0")
	r.git("tag", "v0.1.0")
	r.git("tag", "sub/v0.1.0")

	// B removed; versions.yaml still declares v0.1.0: the break is caught.
	r.write("m.go", "// Package m is the root package.\npackage m\n\n// A is kept.\nfunc A() {}\n")
	out, err := r.apiCheck()
	require.Error(t, err)
	t.Logf("undeclared:\n%s%v", out, err)
	assert.Contains(t, out, "example.com/m: v0.1.0 -> v0.1.0 (versions.yaml): 1 incompatible, 0 compatible changes")
	assert.Contains(t, out, "incompatible: B: removed")
	assert.Contains(t, out, "example.com/m/sub: v0.1.0 -> v0.1.0 (versions.yaml): 0 incompatible, 0 compatible changes")
	assert.Contains(t, err.Error(), "example.com/m has 1 incompatible changes since v0.1.0, and versions.yaml declares v0.1.0, which allows none")
	assert.Contains(t, err.Error(), "make release-prepare VERSION=v0.2.0")
	assert.NotContains(t, err.Error(), "example.com/m/sub", "the nested module did not change")

	// A patch release does not allow it either.
	r.versions("v0.1.1")
	_, err = r.apiCheck()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "declares v0.1.1, which allows none")

	// Declared: the next minor version of a v0 module may break.
	r.versions("v0.2.0")
	out, err = r.apiCheck()
	require.NoError(t, err)
	t.Logf("declared:\n%s", out)
	assert.Contains(t, out, "example.com/m: v0.1.0 -> v0.2.0 (versions.yaml): 1 incompatible, 0 compatible changes")
	assert.Contains(t, out, "declared: v0.1.0 -> v0.2.0 allows incompatible changes")
}

func TestAPICheckAdditions(t *testing.T) {
	requireTools(t)
	r := newTestRepo(t)
	r.commit("v0.1.0")
	r.git("tag", "v0.1.0")
	r.git("tag", "sub/v0.1.0")
	r.write("sub/sub.go", "// Package sub is a nested module's package.\npackage sub\n\n// S is kept.\nfunc S() {}\n\n// T is new.\nfunc T() {}\n")
	r.write("internal/x/x.go", "package x\n\n// Y replaces X: internal, so not an API change.\nfunc Y() {}\n")

	// Between releases: additions are fine.
	out, err := r.apiCheck()
	require.NoError(t, err)
	assert.Contains(t, out, "example.com/m/sub: v0.1.0 -> v0.1.0 (versions.yaml): 0 incompatible, 1 compatible changes")
	assert.Contains(t, out, "compatible: T: added")
	assert.Contains(t, out, "example.com/m: v0.1.0 -> v0.1.0 (versions.yaml): 0 incompatible, 0 compatible changes")

	// In a patch release they are not.
	r.versions("v0.1.1")
	_, err = r.apiCheck()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "example.com/m/sub adds API since v0.1.0, and versions.yaml declares the patch release v0.1.1, which adds none: release v0.2.0 instead")
}

func TestLastRelease(t *testing.T) {
	tags := []string{"v0.1.0", "v0.2.0", "v0.3.0-rc.1", "sub/v0.1.0", "sub/deeper/v9.0.0", "not-a-version", "v1.0.0"}
	assert.Equal(t, "v0.3.0-rc.1", lastRelease(tags, ".", "v0.3.0"))
	assert.Equal(t, "v0.2.0", lastRelease(tags, ".", "v0.2.0"), "a tag above the declared version is not the last release")
	assert.Equal(t, "v0.1.0", lastRelease(tags, "sub", "v0.5.0"), "sub/deeper's tags are not sub's")
	assert.Equal(t, "", lastRelease(tags, "other", "v0.5.0"))
}

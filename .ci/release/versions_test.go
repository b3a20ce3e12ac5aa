package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"
)

func mustModule(t *testing.T, dir, content string) Module {
	t.Helper()
	f, err := modfile.Parse(dir+"/go.mod", []byte(content), nil)
	require.NoError(t, err)
	return Module{Path: f.Module.Mod.Path, Dir: dir, File: f}
}

func TestParseVersions(t *testing.T) {
	_, err := parseVersions([]byte("module-sets:\n  a:\n    version: v0.1\n    modules: [example.com/m]\n  b:\n    version: v0.1.0\n    modules: [example.com/m]\nexcluded-modules: [example.com/m]\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `module set a: version "v0.1" is not a canonical semantic version`)
	assert.Contains(t, err.Error(), "module example.com/m is in module set b and in module set a")
	assert.Contains(t, err.Error(), "module example.com/m is in excluded-modules and in module set b")

	_, err = parseVersions([]byte("module-sets:\n  a:\n    version: v0.1.0\n    modulez: []\n"))
	require.Error(t, err, "an unknown field is a typo, not ignored")
}

func TestPlan(t *testing.T) {
	v, err := parseVersions([]byte("module-sets:\n  a:\n    version: v0.1.0\n    modules: [example.com/m, example.com/m/sub, example.com/m/gone, example.com/other]\nexcluded-modules: [example.com/m/test]\n"))
	require.NoError(t, err)
	mods := []Module{
		mustModule(t, ".", "module example.com/m\n"),
		mustModule(t, "sub", "module example.com/m/sub\n"),
		mustModule(t, "test", "module example.com/m/test\n"),
		mustModule(t, "new", "module example.com/m/new\n"),
		mustModule(t, "renamed", "module example.com/other\n"),
	}
	rels, err := Plan(v, mods)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "module set a lists example.com/m/gone, but no go.mod in the repository declares it")
	assert.Contains(t, err.Error(), "new/go.mod: module example.com/m/new is in no module set and not in excluded-modules of versions.yaml: add it to one of them")
	assert.Contains(t, err.Error(), "renamed/go.mod: module example.com/other is released from directory renamed, so its path must be example.com/m/renamed")
	var tags []string
	for _, r := range rels {
		tags = append(tags, r.Tag())
	}
	assert.Equal(t, []string{"v0.1.0", "renamed/v0.1.0", "sub/v0.1.0"}, tags)
}

func TestSetVersionKeepsTheRest(t *testing.T) {
	in := "# comment\nmodule-sets:\n  a:\n    version: v0.1.0 # the first\n    modules:\n      - example.com/m\n  b:\n    version: v0.1.0\n    modules: []\n"
	out, err := setVersion([]byte(in), "b", "v0.2.0")
	require.NoError(t, err)
	assert.Equal(t, "# comment\nmodule-sets:\n  a:\n    version: v0.1.0 # the first\n    modules:\n      - example.com/m\n  b:\n    version: v0.2.0\n    modules: []\n", string(out))
	_, err = setVersion([]byte(in), "c", "v0.2.0")
	require.Error(t, err)
}

func TestPrepare(t *testing.T) {
	requireTools(t)
	r := newTestRepo(t)
	r.write("sub/go.mod", "module example.com/m/sub\n\ngo 1.26.0\n\nrequire example.com/m v0.1.0\n\nreplace example.com/m => ../\n")
	r.write("tool/go.mod", "module example.com/m/tool\n\ngo 1.26.0\n\nrequire (\n\texample.com/m v0.1.0\n\texample.com/m/sub v0.1.0\n)\n")
	r.write(versionsFile, "# sets\nmodule-sets:\n  m:\n    version: v0.1.0\n    modules:\n      - example.com/m\n      - example.com/m/sub\nexcluded-modules:\n  - example.com/m/tool\n")
	r.commit("v0.1.0")

	var out bytes.Buffer
	require.NoError(t, Prepare(&out, r.dir, "", "v0.2.0", false))
	assert.Contains(t, out.String(), "versions.yaml: module set m v0.1.0 -> v0.2.0")
	assert.Contains(t, out.String(), "sub/go.mod: example.com/m now at v0.2.0")
	assert.Contains(t, out.String(), "tool/go.mod: example.com/m, example.com/m/sub now at v0.2.0")
	assert.Contains(t, out.String(), "  v0.2.0\n  sub/v0.2.0\n")
	sub, err := os.ReadFile(filepath.Join(r.dir, "sub", "go.mod"))
	require.NoError(t, err)
	assert.Equal(t, "module example.com/m/sub\n\ngo 1.26.0\n\nrequire example.com/m v0.2.0\n\nreplace example.com/m => ../\n", string(sub), "the replace stays")
	vy, err := os.ReadFile(filepath.Join(r.dir, versionsFile))
	require.NoError(t, err)
	assert.Contains(t, string(vy), "# sets\n", "comments stay")
	assert.Contains(t, string(vy), "version: v0.2.0\n")

	err = Prepare(&out, r.dir, "", "v0.2.0", true)
	require.Error(t, err, "tags only on a committed tree")
	assert.Contains(t, err.Error(), "the working tree has changes")

	r.commit("v0.2.0")
	out.Reset()
	require.NoError(t, Prepare(&out, r.dir, "", "v0.2.0", true))
	assert.Contains(t, out.String(), "tagged v0.2.0\ntagged sub/v0.2.0\n")
	assert.Equal(t, "sub/v0.2.0\nv0.2.0\n", r.git("tag", "--list", "*v0.2.0"))

	err = Prepare(&out, r.dir, "", "v0.2.0", true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tag v0.2.0 already exists")

	err = Prepare(&out, r.dir, "", "v0.1.5", false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "module set m is at v0.2.0: v0.1.5 would go backwards")
}

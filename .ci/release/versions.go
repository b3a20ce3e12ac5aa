package main

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"path"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// versionsFile is the name of the file, at the repository's root, that
// names the release sets.
const versionsFile = "versions.yaml"

// Versions is versions.yaml, in opentelemetry-go's form: module sets, each
// released together at one version, and the modules that are never
// released (examples, benchmarks, test-only modules, CI tools).
type Versions struct {
	ModuleSets      map[string]ModuleSet `yaml:"module-sets"`
	ExcludedModules []string             `yaml:"excluded-modules"`
}

// ModuleSet is a group of modules released together at Version.
type ModuleSet struct {
	Version string   `yaml:"version"`
	Modules []string `yaml:"modules"`
}

// parseVersions reads versions.yaml and checks it on its own: canonical
// semantic versions, no module in two places.
func parseVersions(data []byte) (*Versions, error) {
	var v Versions
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s: %w", versionsFile, err)
	}
	if len(v.ModuleSets) == 0 {
		return nil, fmt.Errorf("%s: no module-sets", versionsFile)
	}
	seen := map[string]string{}
	var errs []error
	for _, name := range v.setNames() {
		set := v.ModuleSets[name]
		if !semver.IsValid(set.Version) || semver.Canonical(set.Version) != set.Version || semver.Build(set.Version) != "" {
			errs = append(errs, fmt.Errorf("%s: module set %s: version %q is not a canonical semantic version such as v0.1.0 or v1.2.0-rc.1", versionsFile, name, set.Version))
		}
		for _, m := range set.Modules {
			if where, ok := seen[m]; ok {
				errs = append(errs, fmt.Errorf("%s: module %s is in module set %s and in %s: a module belongs to one place", versionsFile, m, name, where))
			}
			seen[m] = "module set " + name
		}
	}
	for _, m := range v.ExcludedModules {
		if where, ok := seen[m]; ok {
			errs = append(errs, fmt.Errorf("%s: module %s is in excluded-modules and in %s: a module belongs to one place", versionsFile, m, where))
		}
		seen[m] = "excluded-modules"
	}
	return &v, errors.Join(errs...)
}

// setNames returns the names of the module sets, sorted.
func (v *Versions) setNames() []string {
	names := make([]string, 0, len(v.ModuleSets))
	for name := range v.ModuleSets {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Module is a go.mod file of the repository.
type Module struct {
	Path string        // the module path
	Dir  string        // its directory, slash-separated, relative to the root ("." for the root)
	File *modfile.File // the parsed go.mod
}

// Release is a module of a set at the version about to be released.
type Release struct {
	Module
	Set     string
	Version string
}

// Tag is the git tag that releases r: the version, prefixed with the
// module's directory for a nested module, as the go command looks it up.
func (r Release) Tag() string {
	return tagFor(r.Dir, r.Version)
}

// tagFor is the tag of version in the module in dir.
func tagFor(dir, version string) string {
	if dir == "." {
		return version
	}
	return dir + "/" + version
}

// Repo is the repository at a revision, or its working tree when Rev is
// empty.
type Repo struct {
	Root string // the repository's top directory
	Rev  string // a commit, or "" for the working tree
}

// git runs git in the repository and returns its standard output.
func git(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// ReadFile returns the named file (slash path from the root) at the
// repository's revision.
func (r Repo) ReadFile(name string) ([]byte, error) {
	if r.Rev == "" {
		return readFile(r.Root, name)
	}
	return git(r.Root, "show", r.Rev+":"+name)
}

// goModFiles lists the go.mod files of the repository: at the revision,
// or in the working tree those git tracks or would track (not ignored).
func (r Repo) goModFiles() ([]string, error) {
	return r.files(func(f string) bool { return path.Base(f) == "go.mod" })
}

// files lists the files of the repository that keep says to, outside
// testdata directories: at the revision, or in the working tree those git
// tracks or would track (not ignored).
func (r Repo) files(keep func(string) bool) ([]string, error) {
	var out []byte
	var err error
	if r.Rev == "" {
		out, err = git(r.Root, "ls-files", "--cached", "--others", "--exclude-standard")
	} else {
		out, err = git(r.Root, "ls-tree", "-r", "--name-only", r.Rev)
	}
	if err != nil {
		return nil, err
	}
	var files []string
	for _, f := range strings.Split(string(out), "\n") {
		if keep(f) && !slices.Contains(strings.Split(f, "/"), "testdata") {
			files = append(files, f)
		}
	}
	sort.Strings(files)
	return slices.Compact(files), nil
}

// Modules reads every go.mod of the repository.
func (r Repo) Modules() ([]Module, error) {
	files, err := r.goModFiles()
	if err != nil {
		return nil, err
	}
	var mods []Module
	for _, f := range files {
		data, err := r.ReadFile(f)
		if err != nil {
			return nil, err
		}
		mf, err := modfile.Parse(f, data, nil)
		if err != nil {
			return nil, err
		}
		if mf.Module == nil {
			return nil, fmt.Errorf("%s: no module line", f)
		}
		mods = append(mods, Module{Path: mf.Module.Mod.Path, Dir: path.Dir(f), File: mf})
	}
	return mods, nil
}

// Versions reads versions.yaml.
func (r Repo) Versions() (*Versions, error) {
	data, err := r.ReadFile(versionsFile)
	if err != nil {
		return nil, err
	}
	return parseVersions(data)
}

// Plan matches versions.yaml with the repository's modules: every module
// must be in a set or excluded, every listed module must exist, and a
// released module's path must be the root's path followed by its
// directory, so that the go command finds it at its tag. It returns the
// releases, ordered by directory.
func Plan(v *Versions, mods []Module) ([]Release, error) {
	byPath := map[string]Module{}
	var root *Module
	for i, m := range mods {
		byPath[m.Path] = m
		if m.Dir == "." {
			root = &mods[i]
		}
	}
	var errs []error
	placed := map[string]bool{}
	var rels []Release
	for _, name := range v.setNames() {
		set := v.ModuleSets[name]
		for _, p := range set.Modules {
			placed[p] = true
			m, ok := byPath[p]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: module set %s lists %s, but no go.mod in the repository declares it", versionsFile, name, p))
				continue
			}
			if root != nil && m.Dir != "." && m.Path != root.Path+"/"+m.Dir {
				errs = append(errs, fmt.Errorf("%s/go.mod: module %s is released from directory %s, so its path must be %s/%s (the go command finds a nested module's tag by its directory)", m.Dir, m.Path, m.Dir, root.Path, m.Dir))
			}
			rels = append(rels, Release{Module: m, Set: name, Version: set.Version})
		}
	}
	for _, p := range v.ExcludedModules {
		placed[p] = true
		if _, ok := byPath[p]; !ok {
			errs = append(errs, fmt.Errorf("%s: excluded-modules lists %s, but no go.mod in the repository declares it", versionsFile, p))
		}
	}
	for _, m := range mods {
		if !placed[m.Path] {
			errs = append(errs, fmt.Errorf("%s/go.mod: module %s is in no module set and not in excluded-modules of %s: add it to one of them", m.Dir, m.Path, versionsFile))
		}
	}
	sort.Slice(rels, func(i, j int) bool { return rels[i].Dir < rels[j].Dir })
	return rels, errors.Join(errs...)
}

// load reads versions.yaml and the modules of repo and plans the release.
func load(repo Repo) (*Versions, []Module, []Release, error) {
	v, err := repo.Versions()
	if err != nil {
		return nil, nil, nil, err
	}
	mods, err := repo.Modules()
	if err != nil {
		return nil, nil, nil, err
	}
	rels, err := Plan(v, mods)
	return v, mods, rels, err
}

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// readFile reads the slash path name under root.
func readFile(root, name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
}

// Prepare sets the version of module set setName (the only set when
// empty) to version in versions.yaml and makes every go.mod of the
// repository, published or not, require the set's modules at that version.
// It writes the files it changes and reports them, then the tags the
// release needs. With tag, it also creates the tags at HEAD, which must
// then hold the prepared files: a clean tree, and no tag already there.
//
// CHANGELOG.md follows: without tag, the entries of [Unreleased] move under
// "## [X.Y.Z] - not yet tagged"; with tag, that heading gets the day's date
// and its links, committed, and the tags are made at that commit.
func Prepare(w io.Writer, root, setName, version string, tag bool) error {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return fmt.Errorf("version %q: want a canonical semantic version such as v0.2.0 or v1.0.0-rc.1", version)
	}
	repo := Repo{Root: root}
	v, err := repo.Versions()
	if err != nil {
		return err
	}
	if setName == "" {
		if len(v.ModuleSets) != 1 {
			return fmt.Errorf("%s has module sets %s: say which one to release (SET=name)", versionsFile, strings.Join(v.setNames(), ", "))
		}
		setName = v.setNames()[0]
	}
	set, ok := v.ModuleSets[setName]
	if !ok {
		return fmt.Errorf("%s has no module set %q; it has %s", versionsFile, setName, strings.Join(v.setNames(), ", "))
	}
	if semver.Compare(version, set.Version) < 0 {
		return fmt.Errorf("module set %s is at %s: %s would go backwards", setName, set.Version, version)
	}

	data, err := repo.ReadFile(versionsFile)
	if err != nil {
		return err
	}
	updated, err := setVersion(data, setName, version)
	if err != nil {
		return err
	}
	if !bytes.Equal(updated, data) {
		if err := os.WriteFile(filepath.Join(root, versionsFile), updated, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: module set %s %s -> %s\n", versionsFile, setName, set.Version, version)
	}
	set.Version = version
	v.ModuleSets[setName] = set

	mods, err := repo.Modules()
	if err != nil {
		return err
	}
	rels, err := Plan(v, mods)
	if err != nil {
		return err
	}
	inSet := map[string]bool{}
	for _, m := range set.Modules {
		inSet[m] = true
	}
	files, err := repo.ModFiles() // go.mod and alternates such as go.oldest.mod
	if err != nil {
		return err
	}
	for _, m := range files {
		changed, err := bumpRequires(m.File, inSet, version)
		if err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
		if len(changed) == 0 {
			continue
		}
		out, err := m.File.Format()
		if err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(m.Name)), out, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: %s now at %s\n", m.Name, strings.Join(changed, ", "), version)
	}

	notes, err := repo.ReadFile(changelogFile)
	hasNotes := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if !hasNotes {
		// A repository without release notes: nothing to move or date.
	} else if moved, ok, err := moveUnreleased(notes, strings.TrimPrefix(version, "v")); err != nil {
		return err
	} else if ok {
		if err := os.WriteFile(filepath.Join(root, changelogFile), moved, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: the [Unreleased] entries moved under [%s] (%s)\n", changelogFile, strings.TrimPrefix(version, "v"), notTagged)
	}

	var tags []string
	for _, r := range rels {
		if r.Set == setName {
			tags = append(tags, r.Tag())
		}
	}
	if !tag {
		fmt.Fprintf(w, "tags for module set %s (commit the changes above, run make release-check, then make release-prepare VERSION=%s TAG=1):\n", setName, version)
		for _, t := range tags {
			fmt.Fprintf(w, "  %s\n", t)
		}
		return nil
	}
	status, err := git(root, "status", "--porcelain")
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(status)) != 0 {
		return fmt.Errorf("the working tree has changes (commit the prepared go.mod files and %s first, then tag):\n%s", versionsFile, status)
	}
	var errs []error
	for _, t := range tags {
		if _, err := git(root, "rev-parse", "--verify", "--quiet", "refs/tags/"+t); err == nil {
			errs = append(errs, fmt.Errorf("tag %s already exists", t))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// The release's date is the day of its tags: the changelog is dated,
	// and committed, here, and the tags made at that commit.
	date := time.Now().UTC().Format(time.DateOnly)
	if !hasNotes {
		return tagAll(w, root, tags)
	}
	dated, err := dateRelease(notes, strings.TrimPrefix(version, "v"), date, repoURL(mods))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, changelogFile), dated, 0o644); err != nil {
		return err
	}
	if _, err := git(root, "commit", "-m", fmt.Sprintf("CHANGELOG: %s, tagged %s", version, date), "--", changelogFile); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: [%s] dated %s and committed\n", changelogFile, strings.TrimPrefix(version, "v"), date)
	return tagAll(w, root, tags)
}

// tagAll creates the tags at HEAD.
func tagAll(w io.Writer, root string, tags []string) error {
	for _, t := range tags {
		if _, err := git(root, "tag", "-a", "-m", "Release "+t, t, "HEAD"); err != nil {
			return err
		}
		fmt.Fprintf(w, "tagged %s\n", t)
	}
	fmt.Fprintln(w, "push them with: git push origin", strings.Join(tags, " "))
	return nil
}

// bumpRequires makes f require every module of inSet that it requires at
// version, and returns the module paths it changed.
func bumpRequires(f *modfile.File, inSet map[string]bool, version string) ([]string, error) {
	var changed []string
	for _, r := range f.Require {
		if inSet[r.Mod.Path] && r.Mod.Version != version {
			changed = append(changed, r.Mod.Path)
		}
	}
	for _, p := range changed {
		if err := f.AddRequire(p, version); err != nil {
			return nil, err
		}
	}
	f.Cleanup()
	return changed, nil
}

// setVersion rewrites the version line of module set name in
// versions.yaml, keeping every other byte (comments included).
func setVersion(data []byte, name, version string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	node := find(&doc, "module-sets", name, "version")
	if node == nil {
		return nil, fmt.Errorf("%s: no module-sets.%s.version", versionsFile, name)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	i := node.Line - 1
	old := lines[i]
	col := node.Column - 1
	lines[i] = append(append(append([]byte{}, old[:col]...), version...), old[col+len(node.Value):]...)
	return bytes.Join(lines, nil), nil
}

// find follows the mapping keys from n, the document node, and returns
// the value node they lead to.
func find(n *yaml.Node, keys ...string) *yaml.Node {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for _, k := range keys {
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

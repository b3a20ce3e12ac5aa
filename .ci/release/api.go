package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/exp/apidiff"
	"golang.org/x/mod/semver"
	"golang.org/x/tools/go/packages"
)

// APICheck compares the API of every released module of repo with the
// module's last release: the highest tag DIR/vX.Y.Z (vX.Y.Z for the root)
// reachable from the compared commit (HEAD for the working tree) and not
// above the version versions.yaml declares. A module with no such tag is
// reported as not yet released.
//
// The version in versions.yaml declares what the next release may change:
//   - the same version as the last release, or a patch above it: no
//     incompatible change; a patch release adds no API either;
//   - a new minor version: compatible additions; under v0, where semantic
//     versioning promises nothing, incompatible changes too;
//   - a new major version: anything.
//
// Every change is printed; a change the declared version does not allow
// fails the check, saying which version would.
func APICheck(w io.Writer, repo Repo) error {
	_, _, rels, err := load(repo)
	if err != nil {
		return err
	}
	at := repo.Rev
	if at == "" {
		at = "HEAD"
	}
	out, err := git(repo.Root, "tag", "--list", "--merged", at)
	if err != nil {
		return err
	}
	tags := strings.Fields(string(out))

	tmp, err := os.MkdirTemp("", "api-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	trees := map[string]string{} // extracted trees by revision
	tree := func(rev string) (string, error) {
		if rev == "" {
			return repo.Root, nil
		}
		if dir, ok := trees[rev]; ok {
			return dir, nil
		}
		dir := filepath.Join(tmp, fmt.Sprintf("tree%d", len(trees)))
		if err := extract(repo.Root, rev, dir); err != nil {
			return "", err
		}
		trees[rev] = dir
		return dir, nil
	}

	var failures []error
	for _, r := range rels {
		base := lastRelease(tags, r.Dir, r.Version)
		if base == "" {
			fmt.Fprintf(w, "api-check: %s: not yet released (no tag %s reachable from %s): nothing to compare; its first release is %s, %q in %s until make release-prepare VERSION=%s TAG=1 tags it\n",
				r.Path, tagFor(r.Dir, "vX.Y.Z"), at, r.Version, notTagged, changelogFile, r.Version)
			continue
		}
		oldDir, err := tree(tagFor(r.Dir, base))
		if err != nil {
			return err
		}
		newDir, err := tree(repo.Rev)
		if err != nil {
			return err
		}
		oldMod, err := loadModule(path.Join(oldDir, r.Dir), r.Path)
		if err != nil {
			return fmt.Errorf("api-check: %s@%s: %w", r.Path, base, err)
		}
		newMod, err := loadModule(path.Join(newDir, r.Dir), r.Path)
		if err != nil {
			return fmt.Errorf("api-check: %s at %s: %w", r.Path, at, err)
		}
		if err := judge(w, r, base, apidiff.ModuleChanges(oldMod, newMod)); err != nil {
			failures = append(failures, err)
		}
	}
	return errors.Join(failures...)
}

// judge prints the changes of module r since its release base and returns
// an error when the version versions.yaml declares does not allow them.
func judge(w io.Writer, r Release, base string, report apidiff.Report) error {
	var incompatible, compatible []string
	for _, c := range report.Changes {
		if c.Compatible {
			compatible = append(compatible, c.Message)
		} else {
			incompatible = append(incompatible, c.Message)
		}
	}
	declared := r.Version
	majorBump := semver.Major(declared) != semver.Major(base)
	minorBump := !majorBump && semver.MajorMinor(declared) != semver.MajorMinor(base)
	breakAllowed := majorBump || (minorBump && semver.Major(base) == "v0")
	addAllowed := majorBump || minorBump || declared == base

	fmt.Fprintf(w, "api-check: %s: %s -> %s (versions.yaml): %d incompatible, %d compatible changes\n",
		r.Path, base, declared, len(incompatible), len(compatible))
	for _, m := range incompatible {
		fmt.Fprintf(w, "  incompatible: %s\n", m)
	}
	for _, m := range compatible {
		fmt.Fprintf(w, "  compatible: %s\n", m)
	}
	next := nextMinor(base)
	if semver.Major(base) != "v0" {
		next = nextMajor(base)
	}
	switch {
	case len(incompatible) > 0 && !breakAllowed:
		return fmt.Errorf("api-check: %s has %d incompatible changes since %s, and versions.yaml declares %s, which allows none: undo them, or declare them by releasing %s (make release-prepare VERSION=%s) and note them in CHANGELOG.md",
			r.Path, len(incompatible), base, declared, next, next)
	case len(compatible) > 0 && !addAllowed:
		return fmt.Errorf("api-check: %s adds API since %s, and versions.yaml declares the patch release %s, which adds none: release %s instead",
			r.Path, base, declared, nextMinor(base))
	case len(incompatible) > 0:
		fmt.Fprintf(w, "  declared: %s -> %s allows incompatible changes\n", base, declared)
	}
	return nil
}

// lastRelease returns the highest version among tags that releases the
// module in dir at or below declared, or "".
func lastRelease(tags []string, dir, declared string) string {
	prefix := ""
	if dir != "." {
		prefix = dir + "/"
	}
	best := ""
	for _, t := range tags {
		v, ok := strings.CutPrefix(t, prefix)
		if !ok || !semver.IsValid(v) || strings.Contains(v, "/") || semver.Compare(v, declared) > 0 {
			continue
		}
		if best == "" || semver.Compare(v, best) > 0 {
			best = v
		}
	}
	return best
}

// nextMinor is vX.(Y+1).0 for v = vX.Y.Z.
func nextMinor(v string) string {
	var major, minor int
	fmt.Sscanf(semver.MajorMinor(v), "v%d.%d", &major, &minor)
	return fmt.Sprintf("v%d.%d.0", major, minor+1)
}

// nextMajor is v(X+1).0.0 for v = vX.Y.Z.
func nextMajor(v string) string {
	var major int
	fmt.Sscanf(semver.Major(v), "v%d", &major)
	return fmt.Sprintf("v%d.0.0", major+1)
}

// extract writes the tree of rev in the repository at root to dir: the
// whole repository, so that a nested module's replace of its siblings
// resolves as it did at that commit.
func extract(root, rev, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	archive := exec.Command("git", "archive", "--format=tar", rev)
	archive.Dir = root
	untar := exec.Command("tar", "-x", "-C", dir)
	// One buffer each: the two processes write at the same time.
	var archiveErr, untarErr bytes.Buffer
	archive.Stderr = &archiveErr
	untar.Stderr = &untarErr
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	untar.Stdin = pipe
	if err := untar.Start(); err != nil {
		return err
	}
	if err := archive.Run(); err != nil {
		_ = untar.Wait() // its input closed: it ends
		return fmt.Errorf("git archive %s: %w: %s", rev, err, archiveErr.String())
	}
	if err := untar.Wait(); err != nil {
		return fmt.Errorf("extracting %s: %w: %s", rev, err, untarErr.String())
	}
	return nil
}

// loadModule type-checks the packages a user can import from the module
// in dir: not main, not internal, not in a nested module.
func loadModule(dir, modPath string) (*apidiff.Module, error) {
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedTypes | packages.NeedModule,
		Dir:  dir,
	}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, err
	}
	m := &apidiff.Module{Path: modPath}
	var errs []error
	for _, p := range pkgs {
		if p.Module == nil || p.Module.Path != modPath || p.Name == "main" || isInternal(p.PkgPath) || len(p.GoFiles) == 0 {
			continue
		}
		for _, e := range p.Errors {
			errs = append(errs, fmt.Errorf("%s: %v", p.PkgPath, e))
		}
		if p.Types != nil {
			m.Packages = append(m.Packages, p.Types)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return m, nil
}

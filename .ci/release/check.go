package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// CheckOptions configures ReleaseCheck.
type CheckOptions struct {
	// Rev is the commit to release (HEAD when empty).
	Rev string
	// Fallback is the GOPROXY list consulted after the file proxy holding
	// this repository's modules, for every other module. Empty means the
	// local module cache's download directory (a module proxy's layout),
	// then the GOPROXY of the environment.
	Fallback string
	// Keep leaves the temporary directory in place and reports it.
	Keep bool
}

// ReleaseCheck does what a user outside the repository does with the
// release about to be made of commit opts.Rev: from a clone of that
// commit it writes a file module proxy holding every module of
// versions.yaml's module sets at its set's version (zips made from git as
// the go command makes them), then in a scratch module with an empty
// module cache and no workspace it fetches every released module, builds a
// program importing every library package and installs every command at
// its version. Any step that fails fails the check, with its output.
func ReleaseCheck(w io.Writer, root string, opts CheckOptions) (err error) {
	start := time.Now()
	if opts.Rev == "" {
		opts.Rev = "HEAD"
	}
	out, err := git(root, "rev-parse", "--verify", opts.Rev+"^{commit}")
	if err != nil {
		return fmt.Errorf("release check: no commit %q: %w", opts.Rev, err)
	}
	commit := strings.TrimSpace(string(out))

	tmp, err := os.MkdirTemp("", "release-check-")
	if err != nil {
		return err
	}
	if opts.Keep {
		fmt.Fprintf(w, "release-check: working in %s (kept)\n", tmp)
	} else {
		defer func() {
			// The module cache is read-only without -modcacherw; with it, a
			// plain RemoveAll is enough.
			if rmErr := os.RemoveAll(tmp); rmErr != nil && err == nil {
				err = rmErr
			}
		}()
	}

	// A clone, so that only what is committed is released: git archive of
	// the commit, as the go command's own VCS fetch does.
	clone := filepath.Join(tmp, "clone")
	if _, err := git(root, "clone", "--quiet", "--shared", "--no-checkout", root, clone); err != nil {
		return err
	}
	repo := Repo{Root: clone, Rev: commit}
	_, _, rels, err := load(repo)
	if err != nil {
		return err
	}
	changelog, err := repo.ReadFile(changelogFile)
	if err != nil {
		return fmt.Errorf("release check: %w", err)
	}
	if err := checkChangelog(changelog, rels); err != nil {
		return err
	}
	out, err = git(clone, "show", "-s", "--format=%cI", commit)
	if err != nil {
		return err
	}
	when, err := time.Parse(time.RFC3339, strings.TrimSpace(string(out)))
	if err != nil {
		return err
	}
	proxy := filepath.Join(tmp, "proxy")
	if err := writeProxy(proxy, repo, rels, when); err != nil {
		return err
	}
	fmt.Fprintf(w, "release-check: commit %.12s, %d modules in a file proxy:\n", commit, len(rels))
	for _, r := range rels {
		fmt.Fprintf(w, "  %s@%s (tag %s)\n", r.Path, r.Version, r.Tag())
	}

	fallback := opts.Fallback
	if fallback == "" {
		cache, err := goEnv("GOMODCACHE")
		if err != nil {
			return err
		}
		upstream, err := goEnv("GOPROXY")
		if err != nil {
			return err
		}
		fallback = fileURL(filepath.Join(cache, "cache", "download")) + "," + upstream
	}
	rootPath := ""
	for _, r := range rels {
		if r.Dir == "." {
			rootPath = r.Path
		}
	}
	if rootPath == "" {
		return errors.New("release check: versions.yaml releases no root module")
	}
	env := append(os.Environ(),
		"GOMODCACHE="+filepath.Join(tmp, "modcache"),
		// -trimpath: the module cache is a new directory each run, and
		// without it the build cache keys every compiled package on its
		// directory, so that no run would find the last one's work.
		"GOFLAGS=-modcacherw -trimpath",
		"GOWORK=off",
		"GOPROXY="+fileURL(proxy)+","+fallback,
		// Our modules exist only in the file proxy: their checksums are
		// not in the public checksum database. Every other module's are.
		"GONOSUMDB="+rootPath,
		"GOPRIVATE=",
		"GONOPROXY=",
		"GOBIN="+filepath.Join(tmp, "bin"),
	)

	scratch := filepath.Join(tmp, "scratch")
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return err
	}
	goVersion := "1.26.0"
	for _, r := range rels {
		if r.Dir == "." && r.File.Go != nil {
			goVersion = r.File.Go.Version
		}
	}
	run := func(dir, step string, args ...string) ([]byte, error) {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		began := time.Now()
		out, err := cmd.Output()
		fmt.Fprintf(w, "release-check: go %s (%s)\n", strings.Join(args, " "), time.Since(began).Round(100*time.Millisecond))
		if err != nil {
			return nil, fmt.Errorf("release check failed: %s: go %s: %w\n%s%s", step, strings.Join(args, " "), err, out, stderr.Bytes())
		}
		return out, nil
	}

	// A user adds one integration to a project: each module on its own
	// first (its requirements must resolve without the others), then all
	// of them together, for the program below.
	emptyMod := fmt.Appendf(nil, "module example.com/releasecheck\n\ngo %s\n", goVersion)
	get := []string{"get"}
	for _, r := range rels {
		if err := os.WriteFile(filepath.Join(scratch, "go.mod"), emptyMod, 0o644); err != nil {
			return err
		}
		if err := os.RemoveAll(filepath.Join(scratch, "go.sum")); err != nil {
			return err
		}
		if _, err := run(scratch, "a user adds "+r.Path+" to a project", "get", r.Path+"@"+r.Version); err != nil {
			return err
		}
		get = append(get, r.Path+"@"+r.Version)
	}
	if _, err := run(scratch, "a user adds every released module to a project", get...); err != nil {
		return err
	}
	out, err = run(scratch, "listing the released packages", "list", "-e", "-json=ImportPath,Name,GoFiles,Module", rootPath+"/...")
	if err != nil {
		return err
	}
	libs, cmds, err := splitPackages(out, rels)
	if err != nil {
		return err
	}
	if len(libs) == 0 {
		return errors.New("release check: the released modules hold no library package")
	}
	var src bytes.Buffer
	src.WriteString("// Command releasecheck imports every library package of the release.\npackage main\n\nimport (\n")
	for _, p := range libs {
		fmt.Fprintf(&src, "\t_ %q\n", p)
	}
	src.WriteString(")\n\nfunc main() {}\n")
	if err := os.WriteFile(filepath.Join(scratch, "main.go"), src.Bytes(), 0o644); err != nil {
		return err
	}
	if _, err := run(scratch, "tidying a program that imports every library package", "mod", "tidy"); err != nil {
		return err
	}
	if _, err := run(scratch, "building a program that imports every library package", "build", "-o", filepath.Join(tmp, "bin", "releasecheck"), "."); err != nil {
		return err
	}
	for _, c := range cmds {
		if _, err := run(tmp, "installing a command at its version, as go install does for a user", "install", c); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "release-check: OK: %d modules fetched, %d library packages built, %d commands installed (%s), in %s\n",
		len(rels), len(libs), len(cmds), strings.Join(cmds, " "), time.Since(start).Round(time.Second))
	return nil
}

// listedPackage is what `go list -json` says of a package.
type listedPackage struct {
	ImportPath string
	Name       string
	GoFiles    []string
	Module     *struct{ Path, Version string }
}

// splitPackages reads `go list -e -json` output and returns the library
// packages of the released modules (not internal, not main, with non-test
// files), and their commands as package@version, for go install.
func splitPackages(out []byte, rels []Release) (libs, cmds []string, err error) {
	released := map[string]string{}
	for _, r := range rels {
		released[r.Path] = r.Version
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, nil, fmt.Errorf("release check: reading go list: %w", err)
		}
		if p.Module == nil || len(p.GoFiles) == 0 {
			continue // test files only, or not in a module
		}
		version, ok := released[p.Module.Path]
		if !ok || isInternal(p.ImportPath) {
			continue
		}
		if p.Name == "main" {
			cmds = append(cmds, p.ImportPath+"@"+version)
			continue
		}
		libs = append(libs, p.ImportPath)
	}
	sort.Strings(libs)
	sort.Strings(cmds)
	return libs, cmds, nil
}

// isInternal reports whether the import path has an internal element: no
// user can import it.
func isInternal(importPath string) bool {
	return slices.Contains(strings.Split(importPath, "/"), "internal")
}

// writeProxy writes a module proxy in dir holding every release: list,
// .info, .mod and .zip, the zip made from the commit by git archive as the
// go command makes it.
func writeProxy(dir string, repo Repo, rels []Release, when time.Time) error {
	for _, r := range rels {
		esc, err := module.EscapePath(r.Path)
		if err != nil {
			return err
		}
		vdir := filepath.Join(dir, filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return err
		}
		subdir := ""
		if r.Dir != "." {
			subdir = r.Dir
		}
		z, err := os.Create(filepath.Join(vdir, r.Version+".zip"))
		if err != nil {
			return err
		}
		err = modzip.CreateFromVCS(z, module.Version{Path: r.Path, Version: r.Version}, repo.Root, repo.Rev, subdir)
		if cerr := z.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("zip of %s@%s: %w", r.Path, r.Version, err)
		}
		mod, err := repo.ReadFile(path.Join(r.Dir, "go.mod"))
		if err != nil {
			return err
		}
		info, err := json.Marshal(struct {
			Version string
			Time    time.Time
		}{r.Version, when.UTC()})
		if err != nil {
			return err
		}
		files := map[string][]byte{
			r.Version + ".mod":  mod,
			r.Version + ".info": info,
			"list":              []byte(r.Version + "\n"),
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// fileURL is the file:// URL of an absolute path, as GOPROXY takes it.
func fileURL(p string) string {
	return "file://" + filepath.ToSlash(p)
}

// goEnv returns the go command's value of an environment variable.
func goEnv(name string) (string, error) {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// changelogFile is the release notes, in Keep a Changelog's form.
const changelogFile = "CHANGELOG.md"

// checkChangelog reports every set version that no "## [X.Y.Z…]" heading
// of the changelog names: a release without its notes.
func checkChangelog(data []byte, rels []Release) error {
	var headings []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "## [") {
			headings = append(headings, line)
		}
	}
	var errs []error
	seen := map[string]bool{}
	for _, r := range rels {
		if seen[r.Version] {
			continue
		}
		seen[r.Version] = true
		want := strings.TrimPrefix(r.Version, "v")
		if !slices.ContainsFunc(headings, func(h string) bool { return headingNames(h, want) }) {
			errs = append(errs, fmt.Errorf("%s has no heading for %s (module set %s): add \"## [%s] - YYYY-MM-DD\" with the release's notes", changelogFile, r.Version, r.Set, want))
		}
	}
	return errors.Join(errs...)
}

// headingNames reports whether a "## [1.2.0/0.3.0] - date" heading names
// version (without its v).
func headingNames(heading, version string) bool {
	inside, _, _ := strings.Cut(strings.TrimPrefix(heading, "## ["), "]")
	return slices.Contains(strings.Split(inside, "/"), version)
}

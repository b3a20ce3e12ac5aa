package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// facts are the repository's counts that the documentation states, found
// in the tree, so that a new module or package cannot leave a number in
// the docs behind.
type facts struct {
	nested    int      // go.mod files besides the root's
	published []string // the module paths of versions.yaml's module sets
	libraries int      // importable packages of the published modules: not main, internal or testdata
	gets      []string // the published modules a user can go get: those with a library package
}

// rootModule is the path of the repository's root module.
const rootModule = "github.com/deadlinebudget/budget"

// repoFacts counts, in the tree at root: the nested modules, the published
// modules (versions.yaml's module sets, read line by line: doccheck is in
// the root module, which takes no YAML library for a CI tool) and their
// library packages.
func repoFacts(root string) (facts, error) {
	var f facts
	modDirs := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (d.Name() == ".git" || d.Name() == ".bin" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			modDirs[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		return f, err
	}
	f.nested = len(modDirs) - 1
	vf, err := os.Open(filepath.Join(root, "versions.yaml"))
	if err != nil {
		return f, err
	}
	defer vf.Close()
	sc := bufio.NewScanner(vf)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "excluded-modules:") {
			break
		}
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "- "); ok && strings.HasPrefix(m, rootModule) {
			f.published = append(f.published, m)
		}
	}
	for _, mod := range f.published {
		dir := "."
		if mod != rootModule {
			dir = strings.TrimPrefix(mod, rootModule+"/")
		}
		n, err := libraryPackages(root, dir, modDirs)
		if err != nil {
			return f, err
		}
		f.libraries += n
		if n > 0 {
			f.gets = append(f.gets, mod)
		}
	}
	return f, sc.Err()
}

var packageClause = regexp.MustCompile(`(?m)^package (\w+)`)

// libraryPackages counts the directories of the module in dir (slash,
// from root) holding a non-test Go file of a package other than main,
// outside internal and testdata directories and nested modules.
func libraryPackages(root, dir string, modDirs map[string]bool) (int, error) {
	n := 0
	base := filepath.Join(root, filepath.FromSlash(dir))
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if !d.IsDir() {
			return nil
		}
		if p != base && (modDirs[rel] || d.Name() == "internal" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		files, _ := filepath.Glob(filepath.Join(p, "*.go"))
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			src, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			if m := packageClause.FindSubmatch(src); m != nil && string(m[1]) != "main" {
				n++
				break
			}
		}
		return nil
	})
	return n, err
}

var (
	numberWords = []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
		"eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
		"twenty-one", "twenty-two", "twenty-three", "twenty-four", "twenty-five", "twenty-six", "twenty-seven",
		"twenty-eight", "twenty-nine", "thirty"}
	countRe = regexp.MustCompile(`(?i)\b(\d+|` + strings.Join(numberWords, "|") + `)\s+(nested modules|published modules|library packages)\b`)
	goGetRe = regexp.MustCompile("`go get (" + regexp.QuoteMeta(rootModule) + `[^@` + "`" + `\s]*)@latest` + "`")
)

// number reads "11" or "eleven".
func number(s string) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return slices.Index(numberWords, strings.ToLower(s))
}

// checkCounts reports each count of nested modules, published modules or
// library packages in src that is not the repository's, and, in the file
// holding the "go get" table (docs/modules.md), a published module
// without its `go get …@latest` line or a line for a module not published.
func checkCounts(file, src string, f facts) []error {
	var errs []error
	for i, line := range strings.Split(src, "\n") {
		if strings.Contains(line, skipMarker) {
			continue
		}
		for _, m := range countRe.FindAllStringSubmatch(line, -1) {
			want := map[string]int{"nested modules": f.nested, "published modules": len(f.published), "library packages": f.libraries}[strings.ToLower(m[2])]
			if got := number(m[1]); got != want {
				errs = append(errs, fmt.Errorf("%s:%d: says %q; the repository has %d %s (doccheck counts them: write the right number, or none)", file, i+1, m[0], want, strings.ToLower(m[2])))
			}
		}
	}
	if filepath.ToSlash(file) != "docs/modules.md" {
		return errs
	}
	var listed []string
	for _, m := range goGetRe.FindAllStringSubmatch(src, -1) {
		listed = append(listed, m[1])
	}
	for _, mod := range f.gets {
		if !slices.Contains(listed, mod) {
			errs = append(errs, fmt.Errorf("%s: no `go get %s@latest` line for the published module %s", file, mod, mod))
		}
	}
	for _, mod := range listed {
		if !slices.Contains(f.published, mod) {
			errs = append(errs, fmt.Errorf("%s: `go get %s@latest`, but %s is not a published module of versions.yaml", file, mod, mod))
		}
	}
	return errs
}

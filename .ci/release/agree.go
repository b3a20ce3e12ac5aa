package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
)

// Agree checks that the three places that tell the release story tell the
// same one (make release-agree, part of make ci):
//
//   - versions.yaml and the go.mod files: every go.mod in a module set or
//     excluded, every listed module declared (Plan);
//   - the go.mod files (go.mod and alternates such as go.oldest.mod): a
//     module of this repository is required at a released version, never
//     at a pseudo-version (v0.0.0-00010101000000-000000000000 and the
//     like: docs/modules.md), and a module of a set at the set's version;
//   - CHANGELOG.md: a section for each set's version, naming every module
//     of the set and no other module of the repository; a dated section
//     only for a version whose tags exist, an undated one ("not yet
//     tagged") only for one whose tags do not; link definitions that point
//     at tags that exist (compare/vA...vB, releases/tag/vA).
func Agree(w io.Writer, repo Repo) error {
	v, mods, rels, planErr := load(repo)
	if v == nil || mods == nil {
		return planErr
	}
	tags, err := repoTags(repo.Root)
	if err != nil {
		return err
	}
	files, err := repo.ModFiles()
	if err != nil {
		return err
	}
	data, err := repo.ReadFile(changelogFile)
	if err != nil {
		return err
	}
	errs := []error{planErr}
	errs = append(errs, checkRequires(v, mods, files)...)
	errs = append(errs, checkStory(parseChangelog(data), v, mods, rels, tags, repoURL(mods))...)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var sets []string
	for _, name := range v.setNames() {
		sets = append(sets, fmt.Sprintf("%s %s (%d modules)", name, v.ModuleSets[name].Version, len(v.ModuleSets[name].Modules)))
	}
	fmt.Fprintf(w, "release-agree: %s, %d go.mod files and %s agree: %s\n", versionsFile, len(files), changelogFile, strings.Join(sets, "; "))
	return nil
}

// ModFile is a go.mod file or an alternate one (go.oldest.mod, read with
// -modfile) of the repository.
type ModFile struct {
	Name string // slash path from the root
	File *modfile.File
}

// ModFiles reads every go.mod and every alternate go.*.mod of the
// repository.
func (r Repo) ModFiles() ([]ModFile, error) {
	names, err := r.files(func(f string) bool {
		b := path.Base(f)
		return b == "go.mod" || (strings.HasPrefix(b, "go.") && strings.HasSuffix(b, ".mod"))
	})
	if err != nil {
		return nil, err
	}
	var out []ModFile
	for _, name := range names {
		data, err := r.ReadFile(name)
		if err != nil {
			return nil, err
		}
		f, err := modfile.Parse(name, data, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, ModFile{Name: name, File: f})
	}
	return out, nil
}

// checkRequires reports each requirement of a module of this repository
// at a pseudo-version, or, for a module of a set, at another version than
// the set's.
func checkRequires(v *Versions, mods []Module, files []ModFile) []error {
	ours := map[string]bool{}
	for _, m := range mods {
		ours[m.Path] = true
	}
	setVersion := map[string]string{}
	for _, name := range v.setNames() {
		for _, m := range v.ModuleSets[name].Modules {
			setVersion[m] = v.ModuleSets[name].Version
		}
	}
	var errs []error
	for _, f := range files {
		for _, r := range f.File.Require {
			p, ver := r.Mod.Path, r.Mod.Version
			if !ours[p] {
				continue
			}
			if module.IsPseudoVersion(ver) {
				want := "the version of its module set in " + versionsFile
				if sv, ok := setVersion[p]; ok {
					want = sv
				} else if names := v.setNames(); len(names) == 1 {
					want = v.ModuleSets[names[0]].Version + " (the release version; a replace directive points it at its directory)"
				}
				errs = append(errs, fmt.Errorf("%s:%d: requires %s at the pseudo-version %s: a module of this repository is required at a release version, %s (docs/modules.md)", f.Name, r.Syntax.Start.Line, p, ver, want))
				continue
			}
			if sv, ok := setVersion[p]; ok && ver != sv {
				errs = append(errs, fmt.Errorf("%s:%d: requires %s %s, but %s releases it at %s: make release-prepare VERSION=%s sets every go.mod", f.Name, r.Syntax.Start.Line, p, ver, versionsFile, sv, sv))
			}
		}
	}
	return errs
}

// repoTags returns the repository's tags.
func repoTags(root string) (map[string]bool, error) {
	out, err := git(root, "tag", "--list")
	if err != nil {
		return nil, err
	}
	tags := map[string]bool{}
	for _, t := range strings.Fields(string(out)) {
		tags[t] = true
	}
	return tags, nil
}

// repoURL is the repository's web address, from the root module's path
// (github.com/owner/name).
func repoURL(mods []Module) string {
	for _, m := range mods {
		if m.Dir == "." {
			return "https://" + m.Path
		}
	}
	return ""
}

// notTagged is what a version's heading says in place of its date until
// make release-prepare TAG=1 tags it.
const notTagged = "not yet tagged"

// changelog is CHANGELOG.md as the check reads it.
type changelog struct {
	lines    []string
	sections []section
	links    map[string]link // by label: "Unreleased", "0.1.0"
}

// section is one "## [name] - date" section.
type section struct {
	name  string // "Unreleased" or a version without its v ("0.1.0", or "1.2.0/0.3.0" for two sets)
	date  string // YYYY-MM-DD, notTagged, or "" (Unreleased)
	line  int    // of the heading, 1-based
	end   int    // the line after the section's last, 1-based
	intro string // the text before the section's first "###"
}

// versions returns the versions a section's heading names.
func (s section) versions() []string { return strings.Split(s.name, "/") }

type link struct {
	url  string
	line int
}

var (
	headingRe = regexp.MustCompile(`^## \[([^\]]+)\](?: - (.*))?$`)
	linkRe    = regexp.MustCompile(`^\[([^\]]+)\]: (\S+)\s*$`)
	dateRe    = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	codeRe    = regexp.MustCompile("`([^`]+)`")
)

// parseChangelog splits data into its "## [" sections and link
// definitions.
func parseChangelog(data []byte) changelog {
	c := changelog{lines: strings.Split(string(data), "\n"), links: map[string]link{}}
	for i, l := range c.lines {
		if m := headingRe.FindStringSubmatch(l); m != nil {
			if n := len(c.sections); n > 0 {
				c.sections[n-1].end = i + 1
			}
			c.sections = append(c.sections, section{name: m[1], date: strings.TrimSpace(m[2]), line: i + 1})
		} else if strings.HasPrefix(l, "## ") {
			if n := len(c.sections); n > 0 && c.sections[n-1].end == 0 {
				c.sections[n-1].end = i + 1
			}
		}
		if m := linkRe.FindStringSubmatch(l); m != nil {
			c.links[m[1]] = link{url: m[2], line: i + 1}
			if n := len(c.sections); n > 0 && c.sections[n-1].end == 0 {
				c.sections[n-1].end = i + 1
			}
		}
	}
	if n := len(c.sections); n > 0 && c.sections[n-1].end == 0 {
		c.sections[n-1].end = len(c.lines) + 1
	}
	for i := range c.sections {
		s := &c.sections[i]
		var intro []string
		for _, l := range c.lines[s.line : s.end-1] {
			if strings.HasPrefix(l, "### ") {
				break
			}
			intro = append(intro, l)
		}
		s.intro = strings.Join(intro, "\n")
	}
	return c
}

// checkStory checks the changelog against versions.yaml, the modules and
// the tags.
func checkStory(c changelog, v *Versions, mods []Module, rels []Release, tags map[string]bool, url string) []error {
	var errs []error
	bad := func(line int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: "+format, append([]any{changelogFile, line}, args...)...))
	}
	byVersion := map[string]section{}
	var latestDated string // the highest dated version
	for _, s := range c.sections {
		if s.name == "Unreleased" {
			if s.date != "" {
				bad(s.line, "[Unreleased] has no date")
			}
			continue
		}
		for _, ver := range s.versions() {
			if !semver.IsValid("v" + ver) {
				bad(s.line, "heading [%s]: want a version without its v, such as [0.1.0]", s.name)
				continue
			}
			byVersion[ver] = s
			switch {
			case dateRe.MatchString(s.date):
				if latestDated == "" || semver.Compare("v"+ver, "v"+latestDated) > 0 {
					latestDated = ver
				}
			case s.date == notTagged:
			default:
				bad(s.line, "heading [%s] - %s: want a date (YYYY-MM-DD) once its tags exist, %q until then", s.name, s.date, notTagged)
			}
		}
	}
	dirOf := map[string]string{} // every module of the repository, path -> dir
	named := map[string]string{} // how the changelog may name it -> path
	for _, m := range mods {
		dirOf[m.Path] = m.Dir
		named[m.Path] = m.Path
		if m.Dir != "." {
			named[m.Dir] = m.Path
		}
	}
	// Each set's version: its section, naming exactly the set's modules.
	for _, name := range v.setNames() {
		set := v.ModuleSets[name]
		ver := strings.TrimPrefix(set.Version, "v")
		s, ok := byVersion[ver]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: module set %s is at %s in %s, but %s has no section for it: add \"## [%s] - %s\" naming its modules (make release-prepare VERSION=%s moves [Unreleased] there)", changelogFile, name, set.Version, versionsFile, changelogFile, ver, notTagged, set.Version))
			continue
		}
		mentioned := map[string]bool{}
		for _, m := range codeRe.FindAllStringSubmatch(s.intro, -1) {
			if p, ok := named[m[1]]; ok {
				mentioned[p] = true
			}
		}
		inSet := map[string]bool{}
		var missing []string
		for _, p := range set.Modules {
			inSet[p] = true
			if !mentioned[p] {
				missing = append(missing, "`"+display(p, dirOf[p])+"`")
			}
		}
		if len(missing) > 0 {
			bad(s.line, "section [%s] does not name %d of the %d modules %s releases at %s: %s (in the text under its heading, in backquotes)", s.name, len(missing), len(set.Modules), versionsFile, set.Version, strings.Join(missing, ", "))
		}
		var extra []string
		for p := range mentioned {
			if !inSet[p] {
				extra = append(extra, "`"+display(p, dirOf[p])+"`")
			}
		}
		sort.Strings(extra)
		if len(extra) > 0 {
			bad(s.line, "section [%s] names %s, which module set %s of %s does not release at %s", s.name, strings.Join(extra, ", "), name, versionsFile, set.Version)
		}
		for _, other := range c.sections {
			for _, ov := range other.versions() {
				if other.name != "Unreleased" && semver.IsValid("v"+ov) && semver.Compare("v"+ov, set.Version) > 0 {
					bad(other.line, "section [%s] is above %s, the version of module set %s in %s", other.name, set.Version, name, versionsFile)
				}
			}
		}
	}
	// Dated sections have their tags; undated ones do not.
	for _, ver := range slices.Sorted(maps.Keys(byVersion)) {
		s := byVersion[ver]
		var want []string
		for _, r := range rels {
			if strings.TrimPrefix(r.Version, "v") == ver {
				want = append(want, r.Tag())
			}
		}
		if len(want) == 0 {
			want = []string{"v" + ver} // an older release: its root tag at least
		}
		var have, lack []string
		for _, t := range want {
			if tags[t] {
				have = append(have, t)
			} else {
				lack = append(lack, t)
			}
		}
		switch {
		case dateRe.MatchString(s.date) && len(lack) > 0:
			bad(s.line, "[%s] is dated %s, but %d of its %d tags do not exist (%s): a release is dated when make release-prepare VERSION=v%s TAG=1 tags it; until then the heading says %q", ver, s.date, len(lack), len(want), strings.Join(lack, ", "), ver, notTagged)
		case s.date == notTagged && len(have) > 0:
			bad(s.line, "[%s] says %q, but %s exist: date it (the day of the tags)", ver, notTagged, strings.Join(have, ", "))
		}
	}
	// Links point at tags that exist.
	for _, label := range slices.Sorted(maps.Keys(c.links)) {
		l := c.links[label]
		for _, t := range linkTags(l.url, url) {
			if t != "HEAD" && !tags[t] {
				bad(l.line, "[%s] links to %s, but tag %s does not exist", label, l.url, t)
			}
		}
	}
	for _, s := range c.sections {
		l, ok := c.links[s.name]
		switch {
		case s.name == "Unreleased" && latestDated != "":
			if want := url + "/compare/v" + latestDated + "...HEAD"; !ok || l.url != want {
				bad(s.line, "[Unreleased] should link to %s (the changes since the last release)", want)
			}
		case s.name == "Unreleased":
			if want := url + "/commits/main"; !ok || l.url != want {
				bad(s.line, "[Unreleased] should link to %s: nothing is tagged yet, so there is nothing to compare with", want)
			}
		case s.date == notTagged && ok:
			bad(l.line, "[%s] is not tagged yet and has no page to link to: remove the link (make release-prepare TAG=1 adds it)", s.name)
		case dateRe.MatchString(s.date) && !ok:
			bad(s.line, "[%s] has no link definition: add [%s]: %s/releases/tag/v%s (or a compare link from the release before)", s.name, s.name, url, s.versions()[0])
		}
	}
	return errs
}

// display names a module as the changelog does: its directory, or its
// path for the root.
func display(p, dir string) string {
	if dir == "." || dir == "" {
		return p
	}
	return dir
}

// linkTags returns the tags a link into the repository at url names.
func linkTags(u, url string) []string {
	if rest, ok := strings.CutPrefix(u, url+"/compare/"); ok {
		a, b, _ := strings.Cut(rest, "...")
		return []string{a, b}
	}
	if rest, ok := strings.CutPrefix(u, url+"/releases/tag/"); ok {
		return []string{rest}
	}
	return nil
}

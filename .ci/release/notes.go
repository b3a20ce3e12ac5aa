package main

import (
	"fmt"
	"strings"

	"golang.org/x/mod/semver"
)

// moveUnreleased moves the entries of the changelog's [Unreleased] section
// under the section of version (without its v), each under the heading of
// the same name ("### Added" to "### Added"), creating the section, undated
// ("not yet tagged"), below [Unreleased] when there is none. The text of
// [Unreleased] before its first "###" stays. It reports whether anything
// moved.
func moveUnreleased(data []byte, version string) ([]byte, bool, error) {
	c := parseChangelog(data)
	var un, target *section
	for i := range c.sections {
		switch c.sections[i].name {
		case "Unreleased":
			un = &c.sections[i]
		case version:
			target = &c.sections[i]
		}
	}
	if un == nil {
		return data, false, nil
	}
	lines := c.lines
	// The subsections of [Unreleased]: "### Name" and the lines under it.
	type sub struct {
		name  string
		lines []string
	}
	var subs []sub
	first := -1 // index of [Unreleased]'s first "###"
	for i := un.line; i < un.end-1; i++ {
		l := lines[i]
		if strings.HasPrefix(l, "### ") {
			if first < 0 {
				first = i
			}
			subs = append(subs, sub{name: l})
			continue
		}
		if len(subs) > 0 {
			subs[len(subs)-1].lines = append(subs[len(subs)-1].lines, l)
		}
	}
	var moved []sub
	for _, s := range subs {
		body := trimBlank(s.lines)
		if len(body) > 0 {
			moved = append(moved, sub{s.name, body})
		}
	}
	if len(moved) == 0 {
		return data, false, nil
	}
	var out []string
	out = append(out, lines[:first]...) // up to [Unreleased]'s entries
	out = trimBlankEnd(out)
	out = append(out, "")
	rest := lines[un.end-1:]
	if target == nil {
		out = append(out, fmt.Sprintf("## [%s] - %s", version, notTagged), "")
		for _, s := range moved {
			out = append(out, s.name, "")
			out = append(out, s.lines...)
			out = append(out, "")
		}
		out = append(out, rest...)
		return []byte(strings.Join(out, "\n")), true, nil
	}
	// The target section's lines, each subsection extended.
	tlines := lines[target.line-1 : target.end-1]
	for _, s := range moved {
		at := -1
		for i, l := range tlines {
			if l == s.name {
				at = i
			}
		}
		if at < 0 {
			tlines = append(trimBlankEnd(tlines), "", s.name, "")
			tlines = append(tlines, s.lines...)
			tlines = append(tlines, "")
			continue
		}
		end := len(tlines)
		for i := at + 1; i < len(tlines); i++ {
			if strings.HasPrefix(tlines[i], "### ") {
				end = i
				break
			}
		}
		head := trimBlankEnd(append([]string{}, tlines[:end]...))
		merged := append(append(head, s.lines...), "")
		tlines = append(merged, tlines[end:]...)
	}
	out = append(out, lines[un.end-1:target.line-1]...)
	out = append(out, trimBlankEnd(tlines)...)
	out = append(out, "")
	out = append(out, lines[target.end-1:]...)
	return []byte(strings.Join(out, "\n")), true, nil
}

// dateRelease dates the section of version (without its v) and links it:
// "## [X.Y.Z] - not yet tagged" becomes "## [X.Y.Z] - date", [X.Y.Z]
// links to its tag (or the comparison with the release before) and
// [Unreleased] to the changes since it.
func dateRelease(data []byte, version, date, url string) ([]byte, error) {
	c := parseChangelog(data)
	lines := append([]string{}, c.lines...)
	var prev string // the highest dated version below version
	found := false
	for _, s := range c.sections {
		for _, v := range s.versions() {
			if v == version {
				if s.date != notTagged {
					return nil, fmt.Errorf("%s:%d: [%s] says %q, want %q (make release-prepare VERSION=v%s moves the notes there)", changelogFile, s.line, s.name, s.date, notTagged, version)
				}
				lines[s.line-1] = fmt.Sprintf("## [%s] - %s", s.name, date)
				found = true
			} else if dateRe.MatchString(s.date) && semver.IsValid("v"+v) && semver.Compare("v"+v, "v"+version) < 0 && (prev == "" || semver.Compare("v"+v, "v"+prev) > 0) {
				prev = v
			}
		}
	}
	if !found {
		return nil, fmt.Errorf("%s has no section [%s]: run make release-prepare VERSION=v%s first, which moves [Unreleased] there", changelogFile, version, version)
	}
	rel := url + "/releases/tag/v" + version
	if prev != "" {
		rel = url + "/compare/v" + prev + "...v" + version
	}
	defs := []string{"[Unreleased]: " + url + "/compare/v" + version + "...HEAD", "[" + version + "]: " + rel}
	if l, ok := c.links["Unreleased"]; ok {
		lines[l.line-1] = defs[0]
		lines = append(lines[:l.line], append([]string{defs[1]}, lines[l.line:]...)...)
	} else {
		lines = append(trimBlankEnd(lines), "", defs[0], defs[1], "")
	}
	return []byte(strings.Join(lines, "\n")), nil
}

func trimBlank(ls []string) []string {
	for len(ls) > 0 && strings.TrimSpace(ls[0]) == "" {
		ls = ls[1:]
	}
	return trimBlankEnd(ls)
}

func trimBlankEnd(ls []string) []string {
	for len(ls) > 0 && strings.TrimSpace(ls[len(ls)-1]) == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}

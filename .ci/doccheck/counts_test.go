package main

import (
	"strings"
	"testing"
)

// A count the docs state is checked against the tree's: a wrong one fails,
// naming the file, line and the right number; a right one, in digits or
// words, passes; a line marked doccheck:skip is not checked.
func TestCheckCounts(t *testing.T) {
	f := facts{nested: 26, published: []string{rootModule, rootModule + "/a"}, libraries: 18, gets: []string{rootModule, rootModule + "/a"}}
	src := "the twelve nested modules\nthe 26 nested modules, the two published modules and 18 library packages\n" +
		"eleven library packages <!-- doccheck:skip -->\n"
	errs := checkCounts("docs/ci.md", src, f)
	if len(errs) != 1 || errs[0].Error() != `docs/ci.md:1: says "twelve nested modules"; the repository has 26 nested modules (doccheck counts them: write the right number, or none)` {
		t.Fatalf("got %v", errs)
	}
	table := "| x | `go get " + rootModule + "@latest` |\n| y | `go get " + rootModule + "/b@latest` |\n"
	errs = checkCounts("docs/modules.md", table, f)
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := "docs/modules.md: no `go get " + rootModule + "/a@latest` line for the published module " + rootModule + "/a\n" +
		"docs/modules.md: `go get " + rootModule + "/b@latest`, but " + rootModule + "/b is not a published module of versions.yaml"
	if strings.Join(got, "\n") != want {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), want)
	}
}

// The tree's counts: every go.mod but the root's, the modules of
// versions.yaml's sets, the packages of the root module a user imports.
func TestRepoFacts(t *testing.T) {
	f, err := repoFacts("../..")
	if err != nil {
		t.Fatal(err)
	}
	if f.nested < 20 || len(f.published) < 10 || f.libraries < 15 {
		t.Fatalf("implausible counts: %+v", f)
	}
	if f.published[0] != rootModule || len(f.gets) != len(f.published)-1 {
		t.Fatalf("the root first, every published module but the command go-gettable: %+v", f)
	}
}

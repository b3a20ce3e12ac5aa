// Command release prepares, checks and guards the releases of the
// repository's modules, as versions.yaml groups them into module sets
// (opentelemetry-go's form). It is its own module so that golang.org/x/mod
// and golang.org/x/exp/apidiff never enter a published go.mod.
//
// Usage, from the repository's root (the make targets of the same names):
//
//	go run ./.ci/release prepare -version vX.Y.Z [-set NAME] [-tag]
//	go run ./.ci/release check [-rev COMMIT] [-keep]
//	go run ./.ci/release api [-rev COMMIT]
//	go run ./.ci/release agree
//	go run ./.ci/release modules
//
// prepare sets the set's version in versions.yaml, makes every go.mod
// require the set's modules at it, and prints the tags (with -tag, creates
// them at HEAD). check is the release check: every released module, served
// from a file proxy made from git, fetched, built and installed from a
// scratch module with an empty module cache. api compares every released
// package with the module's last release tag (golang.org/x/exp/apidiff).
// agree checks that versions.yaml, the go.mod files, CHANGELOG.md and the
// tags tell one release story (Agree). modules prints the released modules
// and their tags.
//
// (Run from the repository's root, `go run` needs `-C .ci/release`, or make:
// the tool is a nested module. It finds the root with git.)
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	root, err := git(".", "rev-parse", "--show-toplevel")
	if err != nil {
		fatal(err)
	}
	top := strings.TrimSpace(string(root))
	cmd, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	switch cmd {
	case "prepare":
		version := fs.String("version", "", "the version to release, such as v0.2.0")
		set := fs.String("set", "", "the module set to release (needed when versions.yaml has more than one)")
		tag := fs.Bool("tag", false, "create the tags at HEAD (the tree must be clean)")
		fs.Parse(args)
		if *version == "" {
			fatal(fmt.Errorf("prepare: -version is required (make release-prepare VERSION=vX.Y.Z)"))
		}
		err = Prepare(os.Stdout, top, *set, *version, *tag)
	case "check":
		rev := fs.String("rev", "HEAD", "the commit to release")
		keep := fs.Bool("keep", false, "keep the temporary directory (proxy, module cache, scratch module)")
		fallback := fs.String("fallback", "", "GOPROXY list after the file proxy (default: the local module cache's download directory, then $(go env GOPROXY))")
		fs.Parse(args)
		err = ReleaseCheck(os.Stdout, top, CheckOptions{Rev: *rev, Keep: *keep, Fallback: *fallback})
	case "api":
		rev := fs.String("rev", "", "the commit to check (default: the working tree)")
		fs.Parse(args)
		err = APICheck(os.Stdout, Repo{Root: top, Rev: *rev})
	case "agree":
		fs.Parse(args)
		err = Agree(os.Stdout, Repo{Root: top})
	case "modules":
		fs.Parse(args)
		err = listModules(top)
	default:
		usage()
	}
	if err != nil {
		fatal(err)
	}
}

// listModules prints every released module, its directory, version and tag.
func listModules(root string) error {
	_, _, rels, err := load(Repo{Root: root})
	if err != nil {
		return err
	}
	for _, r := range rels {
		fmt.Printf("%s\t%s\t%s\t%s\n", r.Set, r.Path, r.Version, r.Tag())
	}
	return nil
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: release prepare -version vX.Y.Z [-set NAME] [-tag] | check [-rev COMMIT] [-keep] | api [-rev COMMIT] | agree | modules")
	os.Exit(2)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "release:", err)
	os.Exit(1)
}

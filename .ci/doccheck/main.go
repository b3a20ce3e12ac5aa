// Command doccheck checks that the shell commands the documentation shows
// work as written, from where it says to run them. It reads README.md and
// docs/*.md and takes:
//
//   - every line of a fenced block marked sh, bash, shell or console, and of
//     an indented (four-space) block, that starts with a command;
//   - every inline code span that starts with cd, go or make.
//
// Before them, the counts the docs and CHANGELOG.md state ("26 nested
// modules", "the eleven published modules", "18 library packages") are
// checked against the tree (counts.go), and docs/modules.md's table against
// versions.yaml: a `go get …@latest` line for each published library
// module, none for another.
//
// Each command runs from the repository's root unless it starts with
// `cd DIR &&` (a fenced block's cd holds for its later lines). A line is
// split at &&, ; and | into commands; only cd, go and make are checked
// (jq, sed, benchstat and the like are someone else's):
//
//   - cd DIR: DIR exists;
//   - make TARGET…: `make -n TARGET` succeeds where it runs (the target
//     exists and its recipe expands);
//   - go run/test/build/vet/list PKG…: `go list` resolves the packages from
//     that directory (a path into a nested module from the root does not),
//     honouring -modfile; the target of go run is built, with -race so that
//     it shares the test builds' cache, and run with its documented flags and
//     -h, which must exit 0: every flag exists and every value parses.
//
// A synopsis, a command showing alternatives or placeholders (`a|b`, `[…]`,
// `…`, `$(VAR)`), is checked for its paths only. A line of prose holding
// <!-- doccheck:skip --> is skipped: for a command shown as what not to type. A module path at a version
// (`go run golang.org/x/perf/cmd/benchstat@latest`) is not fetched.
//
// Usage, from the repository's root (make doc-check):
//
//	go run ./.ci/doccheck [-v] [file.md ...]
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// command is one documented command line and where it was found.
type command struct {
	file   string // the markdown file, relative to the root
	line   int
	text   string // as written, less a trailing comment
	dir    string // where a reader runs it, relative to the root
	inline bool   // an inline code span, not a block line
}

func (c command) String() string { return fmt.Sprintf("%s:%d: %s", c.file, c.line, c.text) }

func main() {
	verbose := flag.Bool("v", false, "print every command checked")
	flag.Parse()
	files := flag.Args()
	if len(files) == 0 {
		docs, _ := filepath.Glob("docs/*.md")
		files = append([]string{"README.md"}, docs...)
	}
	counts, err := repoFacts(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "doccheck:", err)
		os.Exit(2)
	}
	var cmds []command
	var countErrs []error
	for _, f := range append(files, "CHANGELOG.md") {
		src, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "doccheck:", err)
			os.Exit(2)
		}
		countErrs = append(countErrs, checkCounts(f, string(src), counts)...)
		if f != "CHANGELOG.md" {
			cmds = append(cmds, extract(f, string(src))...)
		}
	}
	failed := 0
	for _, err := range countErrs {
		fmt.Printf("    FAIL %v\n", err)
		failed++
	}
	fmt.Printf("doccheck: counts: %d nested modules, %d published modules, %d library packages, %d `go get` lines (%d wrong)\n",
		counts.nested, len(counts.published), counts.libraries, len(counts.gets), len(countErrs))
	ch := newChecker()
	for _, c := range cmds {
		errs := ch.check(c)
		if *verbose || len(errs) > 0 {
			fmt.Println(c)
		}
		for _, err := range errs {
			fmt.Printf("    FAIL %v\n", err)
			failed++
		}
	}
	ch.close()
	fmt.Printf("doccheck: %d commands in %d files, %d failures\n", len(cmds), len(files), failed)
	if failed > 0 {
		os.Exit(1)
	}
}

var (
	fence       = regexp.MustCompile("^\\s*```\\s*([A-Za-z]*)")
	inlineCode  = regexp.MustCompile("`([^`]+)`")
	commandWord = regexp.MustCompile(`^(\$ )?([A-Z_][A-Z0-9_]*=\S+\s+)*(cd|go|make)\s+\S`)
)

// skipMarker on a line of prose skips its inline commands: for a command
// shown as what not to type ("from the root, `go run ./x` does not build").
const skipMarker = "<!-- doccheck:skip -->"

// extract returns the commands of one markdown file.
func extract(file, src string) []command {
	var out []command
	inFence, shellFence := false, false
	dir, indentDir := ".", "."
	sc := bufio.NewScanner(strings.NewReader(src))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	n := 0
	cont := "" // a line continued with a backslash
	for sc.Scan() {
		n++
		line := sc.Text()
		if m := fence.FindStringSubmatch(line); m != nil {
			if !inFence {
				inFence = true
				shellFence = m[1] == "sh" || m[1] == "bash" || m[1] == "shell" || m[1] == "console"
				dir = "."
			} else {
				inFence = false
			}
			continue
		}
		if inFence {
			if !shellFence {
				continue
			}
			text := strings.TrimSpace(cont + strings.TrimSpace(line))
			if strings.HasSuffix(text, "\\") {
				cont = strings.TrimSpace(strings.TrimSuffix(text, "\\")) + " "
				continue
			}
			cont = ""
			text = strings.TrimPrefix(stripComment(text), "$ ")
			if text == "" {
				continue
			}
			c := command{file: file, line: n, text: text, dir: dir}
			out = append(out, c)
			if d, ok := cdOnly(text); ok {
				dir = filepath.Join(dir, d)
			}
			continue
		}
		if strings.HasPrefix(line, "    ") && !strings.HasPrefix(strings.TrimSpace(line), "-") {
			if text := strings.TrimSpace(stripComment(line)); commandWord.MatchString(text + " ") {
				out = append(out, command{file: file, line: n, text: text, dir: indentDir})
				if d, ok := cdOnly(text); ok {
					indentDir = filepath.Join(indentDir, d)
				}
				continue
			}
		} else if strings.TrimSpace(line) != "" {
			indentDir = "." // the indented block, if any, has ended
		}
		if strings.Contains(line, skipMarker) {
			continue
		}
		for _, m := range inlineCode.FindAllStringSubmatch(line, -1) {
			if text := strings.TrimSpace(m[1]); commandWord.MatchString(text + " ") {
				out = append(out, command{file: file, line: n, text: text, dir: ".", inline: true})
			}
		}
	}
	return out
}

// stripComment drops a shell comment: a # at the start or after a space,
// outside quotes.
func stripComment(s string) string {
	quote := byte(0)
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return strings.TrimSpace(s[:i])
		}
	}
	return strings.TrimSpace(s)
}

// cdOnly reports whether a block line is a lone `cd DIR`, which holds for
// the block's later lines.
func cdOnly(text string) (string, bool) {
	f := strings.Fields(text)
	if len(f) == 2 && f[0] == "cd" {
		return f[1], true
	}
	return "", false
}

// synopsis reports whether a command shows alternatives or placeholders
// rather than something to type as it is.
func synopsis(text string) bool {
	if strings.ContainsAny(text, "[]…<>") || strings.Contains(text, "$(") {
		return true
	}
	for _, w := range strings.Fields(text) {
		if strings.Contains(w, "|") && w != "|" && w != "||" {
			return true
		}
	}
	return false
}

// splitCommands splits a line at &&, ||, ; and | (outside quotes) into
// simple commands.
func splitCommands(s string) []string {
	var out []string
	var cur strings.Builder
	quote := byte(0)
	flush := func() {
		if t := strings.TrimSpace(cur.String()); t != "" {
			out = append(out, t)
		}
		cur.Reset()
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == ';':
			flush()
			continue
		case ch == '&' && i+1 < len(s) && s[i+1] == '&', ch == '|' && i+1 < len(s) && s[i+1] == '|':
			flush()
			i++
			continue
		case ch == '|' && (i == 0 || s[i-1] == ' ') && (i+1 == len(s) || s[i+1] == ' '):
			flush()
			continue
		}
		cur.WriteByte(ch)
	}
	flush()
	return out
}

// fields splits a simple command into words, removing quotes.
func fields(s string) []string {
	var out []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			} else {
				cur.WriteByte(ch)
			}
		case ch == '\'' || ch == '"':
			quote, in = ch, true
		case ch == ' ' || ch == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// goFlagsWithValue are the go command's flags (build and test) that take a
// value as the next word.
var goFlagsWithValue = map[string]bool{
	"-run": true, "-bench": true, "-count": true, "-benchtime": true, "-o": true, "-modfile": true,
	"-tags": true, "-timeout": true, "-cpu": true, "-parallel": true, "-fuzz": true, "-fuzztime": true,
	"-list": true, "-skip": true, "-coverprofile": true, "-cpuprofile": true, "-memprofile": true,
	"-p": true, "-exec": true, "-ldflags": true, "-gcflags": true, "-mod": true, "-C": true,
}

// checker runs the checks, caching what it built.
type checker struct {
	root  string
	tmp   string
	built map[string]string // package dir → binary
}

func newChecker() *checker {
	root, _ := os.Getwd()
	tmp, err := os.MkdirTemp("", "doccheck")
	if err != nil {
		fmt.Fprintln(os.Stderr, "doccheck:", err)
		os.Exit(2)
	}
	return &checker{root: root, tmp: tmp, built: map[string]string{}}
}

func (ch *checker) close() { _ = os.RemoveAll(ch.tmp) }

// check checks one documented command line.
func (ch *checker) check(c command) []error {
	dir := c.dir
	syn := synopsis(c.text)
	var errs []error
	for _, simple := range splitCommands(c.text) {
		w := fields(simple)
		for len(w) > 0 && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(w[0]) {
			w = w[1:] // an environment assignment
		}
		if len(w) == 0 {
			continue
		}
		var err error
		switch w[0] {
		case "cd":
			if len(w) != 2 {
				err = fmt.Errorf("cd wants one directory: %q", simple)
				break
			}
			next := filepath.Join(dir, w[1])
			if fi, serr := os.Stat(filepath.Join(ch.root, next)); serr != nil || !fi.IsDir() {
				err = fmt.Errorf("cd %s: no such directory from %s", w[1], dir)
				break
			}
			dir = next
		case "make":
			err = ch.checkMake(dir, w[1:])
		case "go":
			err = ch.checkGo(dir, w[1:], syn, c.inline)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func (ch *checker) checkMake(dir string, args []string) error {
	var targets []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") {
			targets = append(targets, a)
		}
	}
	if len(targets) == 0 {
		targets = nil // the default target
	}
	_, err := ch.run(dir, 2*time.Minute, "make", append([]string{"-n"}, targets...)...)
	if err != nil {
		return fmt.Errorf("make %s in %s: %w", strings.Join(targets, " "), dir, err)
	}
	return nil
}

func (ch *checker) checkGo(dir string, args []string, syn, inline bool) error {
	if len(args) == 0 {
		return nil
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "run", "test", "build", "vet", "list", "install", "doc":
	default:
		return nil
	}
	var modfile string
	var pkgs, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			name, _, hasValue := strings.Cut(a, "=")
			if goFlagsWithValue[name] && !hasValue && i+1 < len(args) {
				if name == "-modfile" {
					modfile = args[i+1]
				}
				i++
			} else if name == "-modfile" {
				_, modfile, _ = strings.Cut(a, "=")
			}
			continue
		}
		if sub == "run" {
			pkgs, rest = []string{a}, args[i+1:]
			break
		}
		if strings.HasPrefix(a, ".") || strings.Contains(a, "/") {
			pkgs = append(pkgs, a)
		}
	}
	if len(pkgs) == 0 {
		if inline {
			return nil // prose naming the tool ("go test -bench"), not a command
		}
		pkgs = []string{"."}
	}
	for _, p := range pkgs {
		if strings.Contains(p, "@") {
			return nil // a module at a version: not fetched here
		}
	}
	listArgs := []string{"list", "-e", "-f", "{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}"}
	if modfile != "" {
		listArgs = append(listArgs, "-modfile="+modfile)
	}
	out, err := ch.run(dir, 5*time.Minute, "go", append(listArgs, pkgs...)...)
	if err != nil {
		return fmt.Errorf("go %s %s from %s: %w", sub, strings.Join(pkgs, " "), dir, err)
	}
	if s := strings.TrimSpace(out); s != "" {
		return fmt.Errorf("go %s %s from %s: %s", sub, strings.Join(pkgs, " "), dir, s)
	}
	if sub != "run" || syn {
		return nil
	}
	bin, err := ch.build(dir, pkgs[0])
	if err != nil {
		return err
	}
	// The flag package stops at the first argument that is not a flag, so
	// -h goes at the end, or, for a command that also takes operands
	// (files), before them: the first placement that parses is enough.
	var firstErr error
	for i := len(rest); i >= 0; i-- {
		args := append(append(slices.Clone(rest[:i]), "-h"), rest[i:]...)
		_, err := ch.run(dir, time.Minute, bin, args...)
		if err == nil {
			return nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if i > 0 && strings.HasPrefix(rest[i-1], "-") {
			break // -h would only become that flag's value
		}
	}
	return fmt.Errorf("go run %s %s from %s (checked with -h): %w", pkgs[0], strings.Join(rest, " "), dir, firstErr)
}

// build builds the main package pkg from dir, once.
func (ch *checker) build(dir, pkg string) (string, error) {
	abs := filepath.Join(ch.root, dir, pkg)
	if bin, ok := ch.built[abs]; ok {
		return bin, nil
	}
	bin := filepath.Join(ch.tmp, fmt.Sprintf("cmd%d", len(ch.built)))
	if _, err := ch.run(dir, 10*time.Minute, "go", "build", "-race", "-o", bin, pkg); err != nil {
		return "", fmt.Errorf("go build %s from %s: %w", pkg, dir, err)
	}
	ch.built[abs] = bin
	return bin, nil
}

// run runs name with args in dir (relative to the root) and returns its
// stdout; an error carries its stderr.
func (ch *checker) run(dir string, timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = filepath.Join(ch.root, dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.IndexByte(msg, '\n'); i > 0 && len(msg) > 400 {
			msg = msg[:i] + " …"
		}
		if msg == "" {
			return stdout.String(), err
		}
		return stdout.String(), errors.New(msg)
	}
	return stdout.String(), nil
}

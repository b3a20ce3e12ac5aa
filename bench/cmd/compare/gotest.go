package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/deadlinebudget/budget/bench/goodput"
	"github.com/deadlinebudget/budget/bench/scenario"
)

// benchModule is the module compare belongs to; it must be run from it.
const benchModule = "github.com/deadlinebudget/budget/bench"

// moduleDir returns the directory of the bench module, from `go env GOMOD`
// in the working directory.
func moduleDir() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	b, err := os.ReadFile(mod)
	if err != nil || !bytes.Contains(b, []byte("module "+benchModule+"\n")) {
		return "", fmt.Errorf("run compare from the bench module (cd bench && go run ./cmd/compare); go.mod here is %q", mod)
	}
	return filepath.Dir(mod), nil
}

// goodputReport runs scenario 6: TestGoodputReport in package goodput, in
// a synctest bubble (only a test can open one), and reads its JSON.
func goodputReport(runs int) (goodput.Report, error) {
	var rep goodput.Report
	dir, err := moduleDir()
	if err != nil {
		return rep, err
	}
	f, err := os.CreateTemp("", "goodput-*.json")
	if err != nil {
		return rep, err
	}
	_ = f.Close()
	defer os.Remove(f.Name())
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestGoodputReport$", "./goodput",
		"-args", "-goodput.out="+f.Name(), "-goodput.runs="+strconv.Itoa(runs))
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return rep, fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return rep, fmt.Errorf("reading the goodput report: %w", err)
	}
	if len(rep.Totals) == 0 {
		return rep, fmt.Errorf("the goodput report is empty")
	}
	return rep, nil
}

// observerBenchmarks are otelbudget's own benchmarks in the main module:
// the engine alone, the observer's spans on the SDK, and the same spans
// started by hand around the engine (SDK with a no-op exporter).
var observerBenchmarks = []struct{ name, label string }{
	{"BenchmarkDoNoHooks", "deadline.Do, no observer"},
	{"BenchmarkObserverSDK", "deadline.Do + otelbudget observer (SDK, no-op exporter, metrics off)"},
	{"BenchmarkByHandSDK", "deadline.Do + the same spans and attributes by hand (SDK, no-op exporter)"},
}

// observerBench runs the observer benchmarks of package otelbudget with
// go test -bench in the main module and renders them.
func observerBench(benchtime string, rounds int) (scenario.Table, error) {
	t := scenario.Table{
		Title:  "Scenario 7b: the otelbudget observer on the OpenTelemetry SDK versus the same spans by hand",
		Header: []string{"benchmark", "what", "ns/op", "allocs/op", "B/op"},
	}
	dir, err := moduleDir()
	if err != nil {
		return t, err
	}
	var names []string
	for _, b := range observerBenchmarks {
		names = append(names, b.name)
	}
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", "^("+strings.Join(names, "|")+")$", "-benchmem",
		"-benchtime", benchtime, "-count", strconv.Itoa(rounds), "./otelbudget")
	cmd.Dir = filepath.Dir(dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return t, fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	// BenchmarkX-2  N  ns ns/op  B B/op  a allocs/op, once per -count round:
	// keep the round with the median ns/op.
	found := map[string][][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 8 && strings.HasPrefix(f[0], "Benchmark") && f[3] == "ns/op" {
			name := strings.Split(f[0], "-")[0]
			found[name] = append(found[name], []string{f[2], f[6], f[4]})
		}
	}
	for _, b := range observerBenchmarks {
		v := found[b.name]
		if len(v) == 0 {
			return t, fmt.Errorf("benchmark %s not found in the output of %s", b.name, strings.Join(cmd.Args, " "))
		}
		slices.SortFunc(v, func(x, y []string) int {
			a, _ := strconv.ParseFloat(x[0], 64)
			c, _ := strconv.ParseFloat(y[0], 64)
			return cmp.Compare(a, c)
		})
		t.Rows = append(t.Rows, append([]string{b.name, b.label}, v[(len(v)-1)/2]...))
	}
	t.Notes = append(t.Notes, "From `"+strings.Join(cmd.Args, " ")+"` in the main module (otelbudget/bench_test.go), run by compare in the same session; the median of the rounds.")
	return t, nil
}

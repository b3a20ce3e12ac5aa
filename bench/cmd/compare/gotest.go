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

	"github.com/deadlinebudget/budget/bench/brownout"
	"github.com/deadlinebudget/budget/bench/goodput"
	"github.com/deadlinebudget/budget/bench/outage"
	"github.com/deadlinebudget/budget/bench/overload"
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
	if err := testReport("./goodput", "TestGoodputReport", "goodput", &rep, "-goodput.runs="+strconv.Itoa(runs)); err != nil {
		return rep, err
	}
	if len(rep.Totals) == 0 {
		return rep, fmt.Errorf("the goodput report is empty")
	}
	return rep, nil
}

// outageReport runs scenario 8: TestOutageReport in package outage, in
// synctest bubbles, and reads its JSON.
func outageReport() (outage.Report, error) {
	var rep outage.Report
	if err := testReport("./outage", "TestOutageReport", "outage", &rep); err != nil {
		return rep, err
	}
	if len(rep.Results) == 0 {
		return rep, fmt.Errorf("the outage report is empty")
	}
	return rep, nil
}

// brownoutReport runs the brownout scenario: TestBrownoutReport in package
// brownout, in synctest bubbles, and reads its JSON.
func brownoutReport() (brownout.Report, error) {
	var rep brownout.Report
	if err := testReport("./brownout", "TestBrownoutReport", "brownout", &rep); err != nil {
		return rep, err
	}
	if len(rep.Results) == 0 {
		return rep, fmt.Errorf("the brownout report is empty")
	}
	return rep, nil
}

// overloadReport runs scenario 10: TestOverloadReport in package overload,
// in synctest bubbles, and reads its JSON; short runs its short models,
// sets (comma-separated, empty: all) chooses the sets, seeds > 0 runs the
// first seeds only.
func overloadReport(short bool, sets string, seeds int) (overload.Report, error) {
	var rep overload.Report
	var extra []string
	if short {
		extra = append(extra, "-test.short")
	}
	if sets != "" {
		extra = append(extra, "-overload.sets="+sets)
	}
	if seeds > 0 {
		extra = append(extra, "-overload.seeds="+strconv.Itoa(seeds))
	}
	if err := testReport("./overload", "TestOverloadReport", "overload", &rep, extra...); err != nil {
		return rep, err
	}
	if len(rep.Sets) == 0 {
		return rep, fmt.Errorf("the overload report is empty")
	}
	return rep, nil
}

// testReport runs test in pkg of the bench module with -<flag>.out set to a
// temporary file and the extra arguments, and decodes the JSON it wrote
// into v.
func testReport(pkg, test, flag string, v any, extra ...string) error {
	dir, err := moduleDir()
	if err != nil {
		return err
	}
	f, err := os.CreateTemp("", flag+"-*.json")
	if err != nil {
		return err
	}
	_ = f.Close()
	defer os.Remove(f.Name())
	args := append([]string{"test", "-count=1", "-timeout=0", "-run", "^" + test + "$", pkg, "-args", "-" + flag + ".out=" + f.Name()}, extra...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("reading the report of %s: %w", test, err)
	}
	return nil
}

// observerBenchmarks are otelbudget's own benchmarks in the main module:
// the engine alone, the observer's spans on the SDK, and the same spans
// started by hand around the engine (SDK with a no-op exporter).
var observerBenchmarks = []struct{ name, label string }{
	{"BenchmarkDoNoHooks", "deadline.Do, no observer"},
	{"BenchmarkObserverSDK", "deadline.Do + otelbudget observer (SDK, no-op exporter, metrics off)"},
	{"BenchmarkByHandSDK", "deadline.Do + the same spans and attributes by hand (SDK, no-op exporter)"},
}

// overHand is otelbudget's interleaved benchmark of the observer against
// the same spans by hand; it reports the ratio as "observer/hand".
const overHand = "BenchmarkObserverOverHand"

// observerBench runs the observer benchmarks of package otelbudget with
// go test -bench in otelbudget's SDK test module and renders them.
func observerBench(benchtime string, rounds int) (scenario.Table, error) {
	t := scenario.Table{
		Title:  "Scenario 7b: the otelbudget observer on the OpenTelemetry SDK versus the same spans by hand",
		Header: []string{"benchmark", "what", "ns/op", "allocs/op", "B/op"},
	}
	dir, err := moduleDir()
	if err != nil {
		return t, err
	}
	names := []string{overHand}
	for _, b := range observerBenchmarks {
		names = append(names, b.name)
	}
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", "^("+strings.Join(names, "|")+")$", "-benchmem",
		"-benchtime", benchtime, "-count", strconv.Itoa(rounds), ".")
	cmd.Dir = filepath.Join(filepath.Dir(dir), "otelbudget", "test")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return t, fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	// BenchmarkX-2  N  then value-unit pairs (ns/op, custom metrics, B/op,
	// allocs/op), once per -count round: keep each benchmark's round with
	// the median ns/op.
	found := map[string][]map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		m := map[string]string{}
		for i := 2; i+1 < len(f); i += 2 {
			m[f[i+1]] = f[i]
		}
		name := strings.Split(f[0], "-")[0]
		found[name] = append(found[name], m)
	}
	median := func(v []map[string]string, unit string) map[string]string {
		slices.SortFunc(v, func(x, y map[string]string) int {
			a, _ := strconv.ParseFloat(x[unit], 64)
			c, _ := strconv.ParseFloat(y[unit], 64)
			return cmp.Compare(a, c)
		})
		return v[(len(v)-1)/2]
	}
	for _, b := range observerBenchmarks {
		v := found[b.name]
		if len(v) == 0 {
			return t, fmt.Errorf("benchmark %s not found in the output of %s", b.name, strings.Join(cmd.Args, " "))
		}
		m := median(v, "ns/op")
		t.Rows = append(t.Rows, []string{b.name, b.label, m["ns/op"], m["allocs/op"], m["B/op"]})
	}
	if v := found[overHand]; len(v) > 0 {
		m := median(v, "observer/hand")
		t.Notes = append(t.Notes, fmt.Sprintf("%s, which alternates the two in blocks so that both see the same machine: "+
			"observer %s ns per call, by hand %s ns per call, **observer/hand = %s** (median of %d rounds). "+
			"The separate ns/op lines above ran at different moments and their ratio also measures the machine's load.",
			overHand, m["obs-ns/call"], m["hand-ns/call"], m["observer/hand"], len(v)))
	}
	t.Notes = append(t.Notes, "From `"+strings.Join(cmd.Args, " ")+"` in otelbudget/test (its SDK test module, bench_test.go), run by compare in the same session; the median of the rounds.")
	return t, nil
}

// Command compare runs the side-by-side scenarios of docs/benchmarks.md
// against this project and its peers and prints the tables as markdown.
//
//	cd bench && go run ./cmd/compare          # the published run (< 3 min on 2 cores)
//	cd bench && go run ./cmd/compare -quick   # a smoke run (< 30 s)
//	cd bench && go run ./cmd/compare -quick -repeat 3   # ranges across 3 runs
//	cd bench && go run ./cmd/compare -only 8   # the outage model alone (virtual time, seconds)
//	cd bench && go run ./cmd/compare -only 9   # the brownout model alone (virtual time, seconds)
//	cd bench && go run ./cmd/compare -only 10  # the overload models alone (virtual time, an hour of CPU; -quick: their short models)
//	cd bench && go run ./cmd/compare -only 10 -overload-sets uniform -overload-seeds 1  # one set of scenario 10, one seed
//
// The real-time scenarios (1 to 5) share one pool of runs in flight, the
// longest first, so that their wall time overlaps; every library's runs are
// interleaved with the others', so all see the same machine.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/deadlinebudget/budget/bench/peers"
	"github.com/deadlinebudget/budget/bench/scenario"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		// -h asked for the usage, and got it.
	case err != nil:
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(args []string, out, log io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(log)
	quick := fs.Bool("quick", false, "fewer repetitions: a smoke run under 30s")
	runs := fs.Int("runs", 0, "repetitions per library and mode in the real-time scenarios (default 20, 3 with -quick)")
	parallel := fs.Int("parallel", 16, "real-time runs in flight at once (they sleep, they do not compute)")
	only := fs.String("only", "", "comma-separated scenario numbers to run (default: all)")
	repeat := fs.Int("repeat", 1, "run the whole comparison this many times and print each cell's range (min–max) across the runs")
	sets := fs.String("overload-sets", "", "scenario 10: comma-separated sets to run (uniform, default, propagated, two routes; default: all)")
	seeds := fs.Int("overload-seeds", 0, "scenario 10: run the first n seeds (default: all; 1 with -quick)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o := scenario.Options{Runs: 20, Parallel: *parallel}
	if *quick {
		o.Runs = 3
	}
	if *runs > 0 {
		o.Runs = *runs
	}
	if o.Parallel < 1 {
		return fmt.Errorf("-parallel is %d, want >= 1", o.Parallel)
	}
	want := map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			want[s] = true
		}
	}
	on := func(n string) bool { return len(want) == 0 || want[n] }

	if *repeat < 1 {
		return fmt.Errorf("-repeat is %d, want >= 1", *repeat)
	}

	fmt.Fprintf(out, "<!-- %s -->\n", strings.TrimSpace("cd bench && go run ./cmd/compare "+strings.Join(args, " ")))
	fmt.Fprintf(out, "Run: %s, %s/%s, %d CPUs (%s), clock source %s, GOMAXPROCS %d; real-time scenarios: %d runs per library and mode, %d in flight",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpuModel(), clockSource(), runtime.GOMAXPROCS(0), o.Runs, o.Parallel)
	if *repeat > 1 {
		fmt.Fprintf(out, "; the whole comparison run %d times in a row, each cell giving the range (min–max) of its figures across the runs", *repeat)
	}
	fmt.Fprint(out, ".\n\n")

	var all [][]scenario.Table
	for i := range *repeat {
		if *repeat > 1 {
			fmt.Fprintf(log, "run %d of %d\n", i+1, *repeat)
		}
		tables, err := once(o, on, *quick, overloadOptions{*sets, *seeds}, log)
		if err != nil {
			return err
		}
		all = append(all, tables)
	}
	merged, err := scenario.MergeRanges(all)
	if err != nil {
		return err
	}
	for _, t := range merged {
		t.Markdown(out)
	}
	return nil
}

// once runs the selected scenarios one time and returns their tables.
func once(o scenario.Options, on func(string) bool, quick bool, ov overloadOptions, log io.Writer) ([]scenario.Table, error) {
	rs, hs := peers.All(), peers.AllHTTP()
	c, c3, c4 := peers.Scenario1(), scenario.Scenario3(), scenario.Scenario4()
	var tables []func() scenario.Table
	var jobs []func()
	// Scenario 3 first: go-retryablehttp without a context deadline sleeps
	// its Retry-After of 3s four times, the longest runs of all.
	if on("3") {
		res, j := scenario.PlanHTTP(hs, scenario.Modes, c3, o, "GET", nil, scenario.RetryAfter3)
		jobs = append(jobs, j...)
		tables = append(tables, func() scenario.Table { return scenario.RetryAfterBeyondTable(hs, res, c3) })
	}
	if on("1") {
		res, j := scenario.PlanScenario(rs, c, o, scenario.SlowOp)
		jobs = append(jobs, j...)
		tables = append(tables, func() scenario.Table { return scenario.SlowTable(rs, res, c) })
	}
	if on("2") {
		res, j := scenario.PlanScenario(rs, c, o, scenario.FastFailOp)
		jobs = append(jobs, j...)
		tables = append(tables, func() scenario.Table { return scenario.FastTable(rs, res, c) })
	}
	if on("4") {
		res, j := scenario.PlanHTTP(hs, scenario.Modes, c4, o, "GET", nil, scenario.RetryAfter1)
		jobs = append(jobs, j...)
		tables = append(tables, func() scenario.Table { return scenario.RetryAfterWithinTable(hs, res, c4) })
	}
	if on("5") {
		byFault := map[string]scenario.HTTPResults{}
		for _, fault := range []string{"503", "reset"} {
			res, j := scenario.PlanHTTP(hs, []scenario.Mode{scenario.ModeContext}, c, o, "POST", []byte(`{"order":42}`), scenario.PostFault(fault))
			byFault[fault] = res
			jobs = append(jobs, j...)
		}
		tables = append(tables, func() scenario.Table { return scenario.PostTable(hs, byFault, c) })
	}
	if len(jobs) > 0 {
		t0 := time.Now()
		scenario.RunAll(o.Parallel, jobs)
		fmt.Fprintf(log, "real-time scenarios: %d runs in %v\n", len(jobs), time.Since(t0).Round(time.Millisecond))
	}
	var out []scenario.Table
	for _, t := range tables {
		out = append(out, t())
	}
	// The CPU-bound scenarios run after the real-time ones, so that neither
	// disturbs the other.
	if on("6") {
		runs := 10000
		if quick {
			runs = 1000
		}
		t0 := time.Now()
		rep, err := goodputReport(runs)
		if err != nil {
			return nil, fmt.Errorf("scenario 6: %w", err)
		}
		out = append(out, scenario.GoodputTable(rep))
		fmt.Fprintf(log, "scenario 6: %v\n", time.Since(t0).Round(time.Millisecond))
	}
	if on("8") {
		t0 := time.Now()
		rep, err := outageReport()
		if err != nil {
			return nil, fmt.Errorf("scenario 8: %w", err)
		}
		out = append(out, scenario.OutageTable(rep), scenario.OverloadSweepTable(rep))
		fmt.Fprintf(log, "scenario 8: %v\n", time.Since(t0).Round(time.Millisecond))
	}
	if on("9") {
		t0 := time.Now()
		rep, err := brownoutReport()
		if err != nil {
			return nil, fmt.Errorf("scenario 9: %w", err)
		}
		out = append(out, scenario.BrownoutTable(rep))
		fmt.Fprintf(log, "scenario 9: %v\n", time.Since(t0).Round(time.Millisecond))
	}
	if on("10") {
		t0 := time.Now()
		rep, err := overloadReport(quick, ov.sets, ov.seeds)
		if err != nil {
			return nil, fmt.Errorf("scenario 10: %w", err)
		}
		out = append(out, scenario.OverloadTables(rep)...)
		fmt.Fprintf(log, "scenario 10: %v (the simulations: %.0fs)\n", time.Since(t0).Round(time.Millisecond), rep.Wall)
	}
	if on("7") {
		t0 := time.Now()
		benchtime, rounds := "300ms", 5
		if quick {
			benchtime, rounds = "50ms", 3
		}
		testing.Init()
		if err := flag.CommandLine.Set("test.benchtime", benchtime); err != nil {
			return nil, err
		}
		out = append(out, scenario.OverheadTable(scenario.Overhead(peers.All(), rounds)))
		obs, err := observerBench(benchtime, rounds)
		if err != nil {
			obs.Notes = append(obs.Notes, fmt.Sprintf("Observer overhead not measured: %v", err))
		}
		out = append(out, obs)
		fmt.Fprintf(log, "scenario 7: %v\n", time.Since(t0).Round(time.Millisecond))
	}
	return out, nil
}

// overloadOptions chooses scenario 10's sets and seeds.
type overloadOptions struct {
	sets  string
	seeds int
}

// clockSource returns the kernel's current clock source (tsc, kvm-clock,
// hpet, ...), which sets the cost of reading the time, or "unknown".
func clockSource() string {
	b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// cpuModel returns the first "model name" of /proc/cpuinfo, or "unknown CPU".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

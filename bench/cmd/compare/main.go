// Command compare runs the side-by-side scenarios of docs/benchmarks.md
// against this project and its peers and prints the tables as markdown.
//
//	cd bench && go run ./cmd/compare          # the published run (< 3 min on 2 cores)
//	cd bench && go run ./cmd/compare -quick   # fewer repetitions (< 30 s)
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/deadlinebudget/budget/bench/peers"
	"github.com/deadlinebudget/budget/bench/scenario"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(args []string, out, log io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(log)
	quick := fs.Bool("quick", false, "fewer repetitions: a smoke run under 30s")
	runs := fs.Int("runs", 0, "repetitions per library and mode in the real-time scenarios (default 20, 5 with -quick)")
	parallel := fs.Int("parallel", 16, "real-time runs in flight at once (they sleep, they do not compute)")
	only := fs.String("only", "", "comma-separated scenario numbers to run (default: all)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o := scenario.Options{Runs: 20, Parallel: *parallel}
	if *quick {
		o.Runs = 5
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

	fmt.Fprintf(out, "<!-- go run ./cmd/compare %s -->\n", strings.Join(args, " "))
	fmt.Fprintf(out, "Run: %s, %s/%s, GOMAXPROCS %d, %d runs per library and mode, %d in flight.\n\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), o.Runs, o.Parallel)
	rs := peers.All()
	c := peers.Scenario1()
	if on("1") {
		t0 := time.Now()
		res := scenario.RunScenario(rs, c, o, scenario.SlowOp)
		scenario.SlowTable(rs, res, c).Markdown(out)
		fmt.Fprintf(log, "scenario 1: %v\n", time.Since(t0).Round(time.Millisecond))
	}
	if on("2") {
		t0 := time.Now()
		res := scenario.RunScenario(rs, c, o, scenario.FastFailOp)
		scenario.FastTable(rs, res, c).Markdown(out)
		fmt.Fprintf(log, "scenario 2: %v\n", time.Since(t0).Round(time.Millisecond))
	}
	return nil
}

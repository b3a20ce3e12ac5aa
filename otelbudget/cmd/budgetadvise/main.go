// Command budgetadvise suggests per-attempt ceilings and a run budget from
// the telemetry that package otelbudget records, as package deadline/learn
// does in process.
//
// It reads files (or stdin) of:
//
//   - OTLP JSON as an OpenTelemetry Collector's file exporter writes it, one
//     ExportTraceServiceRequest or ExportMetricsServiceRequest object a line
//     (parsed with the Collector's pdata);
//   - the demo's stdout export: stdouttrace's span objects are read;
//     stdoutmetric's are not (its JSON is not OTLP and does not say which
//     aggregation a point has), and are reported as skipped.
//
// From spans it reads the attempt spans (deadline.step,
// deadline.attempt.ended_by: the duration, or deadline.attempt.granted_ms
// for an attempt cut by a limit) and the call spans (deadline.verdict,
// deadline.max_attempts, deadline.floor_ms). From metrics it reads the
// deadline.attempt.duration exponential histogram, every stream added up:
// the merge of a fleet's processes, by the Collector or here.
//
// Per step and source it prints the attempts, the success rate, the share
// cut by a limit (censored), two labelled sets of p50, p90, p99 and p99.9:
// the completed attempts' own (what a dashboard of their durations shows)
// and the Kaplan–Meier estimate of the whole distribution (as learn; a
// quantile above the cuts is unknown and said so), the verdicts, the
// current and the suggested ceiling, the window and a terminal histogram;
// then the suggested budget of the plan. The first line gives the data's
// range (span starts and metric StartTimeUnixNano included). When a step
// has too few attempts, one line says how many runs would give enough and
// the command that records them, and no histogram is drawn. -format json
// prints the same for machines (docs/ceilings.md lists the field names).
//
// -report FILE also writes the run report: one self-contained HTML page
// (inline CSS and SVG, light and dark, readable from 400px wide) with its
// provenance (generation time, input files, budgetadvise's version), the
// plan's configured budget beside the suggested one, each step's latency on
// a time axis shared by every step against its configured and suggested
// ceilings, and the waterfall of up to -report-runs failed runs and as many
// of the slowest others, rebuilt from their traces, each with its full
// trace id, its outcome and what happened; the words it uses are explained
// at its end. Runs whose every ceiling was at or above their budget (a
// learning run's, opened) are told apart: the configured ceilings are the
// other runs', and one line says so.
//
// What could not be read (an empty or truncated file, no spans of this
// project, attributes of the wrong type, unnamed steps, an older attribute
// set, explicit-bucket histograms) is one line each on stderr. The exit
// code is 1 when a named input cannot be read or nothing could be read, 2
// on bad flags.
//
// Usage:
//
//	budgetadvise [-format text|json] [-report page.html] [-report-runs 5]
//	    [-quantile 0.99] [-margin 1.2] [-min-samples N] [-target 0.99]
//	    [-attempts 3] [-backoff-base 50ms] [-backoff-max 400ms] [file ...]
//
// It is its own module: build it from its directory (go run . or go
// install .), or run the demo and it together with make advise.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget"
)

// now is the report's generation time (a variable for tests).
var now = time.Now

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is the command: it returns the exit code.
func run(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("budgetadvise", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "text", "text or json")
	reportFile := fs.String("report", "", "also write the run report, one self-contained HTML page, to this file")
	reportRuns := fs.Int("report-runs", 5, "the run report draws the waterfall of up to this many failed runs and as many of the slowest others")
	var o options
	fs.Float64Var(&o.suggest.Quantile, "quantile", learn.DefaultQuantile, "the quantile a ceiling is derived from, in (0, 1)")
	fs.Float64Var(&o.suggest.Margin, "margin", learn.DefaultMargin, "multiplies the quantile, >= 1")
	fs.IntVar(&o.suggest.MinSamples, "min-samples", 0, "fewest attempts a ceiling is suggested from (0: max(100, 10/(1-quantile)))")
	fs.Float64Var(&o.target, "target", learn.DefaultTarget, "the plan's success probability the budget aims at")
	fs.IntVar(&o.attempts, "attempts", otelbudget.DefaultPlanAttempts, "attempts of a step whose call spans are not in the input")
	fs.DurationVar(&o.backoffBase, "backoff-base", otelbudget.DefaultPlanBackoff.Base, "the plan's backoff base (full jitter)")
	fs.DurationVar(&o.backoffMax, "backoff-max", otelbudget.DefaultPlanBackoff.Max, "the plan's backoff cap")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: budgetadvise [flags] [file ...]  (no file, or -: stdin)\n"+
			"Reads OTLP JSON lines (a Collector file exporter's) or stdouttrace output; suggests ceilings and a budget.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *format != "text" && *format != "json" {
		fmt.Fprintf(stderr, "budgetadvise: -format %q: want text or json\n", *format)
		return 2
	}
	if *reportRuns < 0 {
		fmt.Fprintf(stderr, "budgetadvise: -report-runs %d: want 0 or more\n", *reportRuns)
		return 2
	}
	if !(o.target > 0 && o.target < 1) || o.attempts < 1 {
		fmt.Fprintf(stderr, "budgetadvise: -target %g -attempts %d: want a target in (0, 1) and at least 1 attempt\n", o.target, o.attempts)
		return 2
	}
	if _, err := learn.Suggest("", nil, o.suggest); err != nil && !errors.Is(err, learn.ErrNotEnoughSamples) {
		fmt.Fprintln(stderr, "budgetadvise:", err)
		return 2
	}
	ds := newDataset()
	files := fs.Args()
	if len(files) == 0 {
		files = []string{"-"}
	}
	var unreadable []error
	for _, name := range files {
		if err := readInput(ds, name, stdin); err != nil {
			unreadable = append(unreadable, err)
		}
	}
	ds.finish()
	for _, n := range ds.notes {
		fmt.Fprintln(stderr, "budgetadvise:", n)
	}
	if len(unreadable) > 0 {
		// A file named but not read would make the advice silently partial.
		for _, err := range unreadable {
			fmt.Fprintln(stderr, "budgetadvise:", err)
		}
		fmt.Fprintf(stderr, "budgetadvise: %s could not be read: no advice (name only files that exist)\n", plural(len(unreadable), "input"))
		return 1
	}
	if err := nothingRead(ds); err != nil {
		fmt.Fprintln(stderr, "budgetadvise:", err)
		return 1
	}
	rep := advise(ds, o)
	var err error
	if *format == "json" {
		err = writeJSON(stdout, rep)
	} else {
		err = writeText(stdout, rep)
	}
	if err != nil {
		fmt.Fprintln(stderr, "budgetadvise:", err)
		return 1
	}
	if *reportFile != "" {
		meta := reportMeta{generated: now(), inputs: files, version: toolVersion()}
		if err := writeReportFile(*reportFile, rep, ds, *reportRuns, meta); err != nil {
			fmt.Fprintln(stderr, "budgetadvise: -report:", err)
			return 1
		}
	}
	return 0
}

// writeReportFile writes the run report to name.
func writeReportFile(name string, rep report, ds *dataset, runs int, meta reportMeta) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := writeReport(f, rep, ds, runs, meta); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readInput(ds *dataset, name string, stdin io.Reader) error {
	if name == "-" {
		return ds.read("stdin", stdin)
	}
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return ds.read(name, f)
}

// Command tracedemo runs the source article's agent plan (search, fetch,
// extract) for real: against provider HTTP servers it starts on 127.0.0.1,
// under one deadline budget, with every call and attempt traced and measured
// by OpenTelemetry and exported to stdout or to an OTLP collector.
//
// After the run it prints a waterfall (each attempt's granted lease against
// the time it used, the backoff waits and the refusals, on one time axis
// spanning the budget), each step's verdict and stop reason, and a one-line
// summary. It exits 0 when the scenario behaved as designed, 1 with a message
// when it did not, 2 on bad flags. -h lists the scenarios.
//
// Usage:
//
//	cd examples/tracedemo && go run . [-scenario ok|tight|slow|ratelimited|flaky|refused]
//	    [-transport http|grpc|agent] [-seed 7] [-budget 1s] [-exporter stdout|otlp|none] [-waterfall=false]
//	    [-export-timeout 500ms]
//	cd examples/tracedemo && go run . -runs 2000 [-parallel 32] [-exporter none|otlp]
//
// Each scenario is designed for its own budget. -budget replaces it: the
// run then shows the verdicts that budget gets and exits 0, whatever they
// are (a budget of 0 or less is a bad flag).
//
// The plan is best effort across budget stops: a step the budget stops
// (refused below the floor, a wait that does not fit, a lease cut and ended
// by the deadline) does not stop the agent, which goes on with what it has;
// every later step gets its own verdict, a local refusal when too little is
// left to start it. Any other failure (the operation failed, its attempts
// were exhausted, the run was canceled) stops the plan: the steps after it
// are shown as not run.
//
// Scenarios:
//
//   - ok: the article's run. fetch's first request hangs until its 100ms
//     lease ends; the retry succeeds. Every verdict is ok.
//   - tight (110ms): fetch's lease is cut by the deadline to 80ms, less
//     than the 90ms its provider needs and than its 100ms ceiling, and the
//     deadline ends it; extract is then refused, the floor being all that
//     is left, and never sent. Both are deadline_too_small.
//   - slow: the fetch provider takes 150ms against a 100ms ceiling, three
//     times: operation_too_slow; the plan stops there, extract is not run.
//   - ratelimited (3s): fetch answers 429 with Retry-After: 1, which fits,
//     then Retry-After: 5, which does not: throttled. extract still runs,
//     and succeeds, in what is left. Retry-After counts whole seconds,
//     hence the larger default budget.
//   - flaky: 503s, then success; the POST is retried because it carries an
//     Idempotency-Key. Every verdict is ok.
//   - refused (10ms): below the 20ms floor, every step is refused before
//     dialing; no provider sees a request.
//
// -transport grpc plays the same plan over gRPC: the providers are gRPC
// services on 127.0.0.1 (deadlinegrpc's server interceptor, clamping the
// inbound grpc-timeout to the same maximum), called through one connection
// per provider with deadlinegrpc's client interceptor and otelgrpc
// (otelbudgetgrpc), each step's policy set per call. Each attempt's lease
// travels as grpc-timeout instead of the budget header; the scenarios'
// statuses become gRPC codes (503 UNAVAILABLE, 429 RESOURCE_EXHAUSTED) and
// Retry-After the grpc-retry-pushback-ms trailer; extract is declared safe
// to repeat and carries its idempotency key in metadata. Every scenario
// maps, with the same verdicts; the trace has the same shape, with
// otelgrpc's CLIENT and SERVER spans (the attempt spans carry
// deadline.attempt.number, no http.request.resend_count). -runs is HTTP
// only.
//
// -transport agent plays the plan through the tools an agent really uses:
// search is an MCP tool call (the official go-sdk, streamable HTTP on
// 127.0.0.1) under deadlinemcp's middleware, its lease carried in the
// request's _meta and its read-only annotation making it safe to retry;
// extract is a chat completion through the real openai-go client, whose
// HTTP client is the run's budget transport with otelhttp and whose own
// retries are off, against a local fake LLM server; fetch is the HTTP
// request of -transport http. One trace, one waterfall. -runs is HTTP only.
//
// Export: the spans and the six deadline.* metrics go to stdout by
// default, as pretty-printed JSON objects, and stdout then carries nothing
// else: `go run . | jq` reads it, and the waterfall, the summary and the
// messages go to stderr. With nothing written to stdout (-exporter none or
// otlp) the waterfall and the summary go to stdout.
//
// -exporter otlp, or OTEL_TRACES_EXPORTER=otlp and OTEL_METRICS_EXPORTER=otlp,
// sends them with the OTLP exporters, configured by the standard variables
// (OTEL_EXPORTER_OTLP_ENDPOINT, default http://localhost:4318,
// OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf or grpc, OTEL_SERVICE_NAME,
// OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION, …); each
// OTEL_*_EXPORTER left unset means stdout for its signal, console means
// stdout too, none no export, any other value is a bad flag. The export of
// both signals happens once, after the run; to a collector it is bounded
// by -export-timeout (500ms): the process ends within its budget plus that
// grace even when the collector is unreachable. Writing to stdout is local
// and is not cut short, however many spans -runs made. One line on stderr
// says how many spans and metric points were exported, or that the export
// failed and why; it never changes the exit code.
//
// -runs N plays the ok plan N times in each of three phases against a fetch
// provider whose latency is heavy-tailed (log-normal body, Pareto tail,
// seeded): with the article's static ceilings, with the ceilings opened to
// the budget while a deadline/learn Recorder records the attempts, and with
// the ceilings it suggests. It prints each step's suggested ceiling (sample
// count, window, censored flag), the suggested plan budget, and the static
// and suggested ceilings side by side: runs with operation_too_slow, and the
// time spent on attempts a limit cut. The learning runs are exported, with
// one run of each scenario above under the article's ceilings (played after
// them): the failed runs and the configured ceilings budgetadvise's report
// shows beside the learning runs' opened ones.
//
// The waterfall is coloured only when it goes to a terminal and NO_COLOR is
// unset.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"
)

// config is what the flags and the environment ask for.
type config struct {
	scenario      string
	transport     string // transportHTTP or transportGRPC
	seed          uint64
	budget        time.Duration // 0: the scenario's own
	exporter      string        // exporterAuto, exporterStdout, exporterOTLP, exporterNone
	waterfall     bool
	colorStdout   bool // colour the waterfall when it goes to stdout
	colorStderr   bool // colour the waterfall when it goes to stderr
	exportTimeout time.Duration
	getenv        func(string) string
	execute       executor // nil: execute, on loopback; tests play in memory
	runs          int      // > 0: tracedemo -runs N (see runs.go)
	parallel      int      // runs played at a time with -runs
	scenarioRuns  bool     // with -runs, also play and export one run of each scenario
	stage         stager   // nil: loopbackStage; tests play in memory
}

// defaultConfig returns the configuration of a plain `go run`.
func defaultConfig() config {
	return config{
		scenario: "ok", transport: transportHTTP, seed: defaultSeed, waterfall: true, parallel: 32, scenarioRuns: true,
		exportTimeout: defaultExportGrace, getenv: func(string) string { return "" },
	}
}

// parseFlags reads args (without the program name) into a config.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	cfg := defaultConfig()
	cfg.getenv = getenv
	fs := flag.NewFlagSet("tracedemo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.scenario, "scenario", cfg.scenario, "what the providers do: "+strings.Join(scenarioNames(), ", "))
	fs.StringVar(&cfg.transport, "transport", cfg.transport, "how the agent calls its providers: http (the budget header), grpc (grpc-timeout) or agent\n"+
		"(the agent's own stack: search as an MCP tool call, extract through the openai-go client, fetch over HTTP)")
	fs.Uint64Var(&cfg.seed, "seed", cfg.seed, "seed of the backoff jitter: the same seed gives the same waits")
	fs.Var((*durationFlag)(&cfg.budget), "budget", "the run's whole budget, a `duration` (default: the scenario's: "+scenarioBudgets()+").\n"+
		"A budget of yours is shown, not checked: the run exits 0 whatever the verdicts")
	fs.StringVar(&cfg.exporter, "exporter", "", "where spans and metrics go: stdout, otlp or none (default: stdout, except for a signal whose\n"+
		"OTEL_TRACES_EXPORTER or OTEL_METRICS_EXPORTER says otlp, console or none).\n"+
		"With none or otlp, the waterfall goes to stdout")
	fs.BoolVar(&cfg.waterfall, "waterfall", cfg.waterfall, "print the waterfall after the run")
	fs.IntVar(&cfg.runs, "runs", 0, "play the ok plan N times against a fetch provider with a heavy-tailed latency, three times over\n"+
		"(the article's ceilings; ceilings opened to learn; the suggested ceilings) and print the suggested\n"+
		"ceilings and budget and the static and suggested ceilings side by side. The learning runs are exported, with one run of\n"+
		"each scenario under the article's ceilings (-scenario-runs), for budgetadvise; the plan budget is computed from the\n"+
		"exported spans as budgetadvise computes it (make advise prints the same figure twice)")
	fs.IntVar(&cfg.parallel, "parallel", cfg.parallel, "with -runs, how many runs play at a time")
	fs.BoolVar(&cfg.scenarioRuns, "scenario-runs", cfg.scenarioRuns, "with -runs, also play one run of each scenario under the article's ceilings and export it with the\n"+
		"learning runs (the failed runs and configured ceilings budgetadvise's report shows); false exports the learning runs alone")
	fs.Var((*durationFlag)(&cfg.exportTimeout), "export-timeout", "how long exporting the spans and metrics to a collector may take after the run, under one\n"+
		"deadline, a `duration` (writing them to stdout is not cut short)")
	// The flag package prints a parse error and then the usage to the
	// output; a parse error is said once, by main, with a hint, and the
	// whole usage only when -h asks for it.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	usage := func() {
		fs.SetOutput(stderr)
		fmt.Fprintf(fs.Output(), "Usage of tracedemo: the source article's agent run on loopback, under one deadline budget.\n"+
			"A step the budget stops does not stop the plan (the budget refuses what cannot start); any other failure does.\n\nScenarios:\n")
		for _, sc := range scenarios() {
			fmt.Fprintf(fs.Output(), "  %-12s %s (budget %s)\n", sc.name, sc.about, fmtDur(sc.budget))
		}
		fmt.Fprintf(fs.Output(), "\nOutput: the spans and metrics as JSON on stdout, and nothing else there (pipe it to jq); the\n"+
			"waterfall, the summary and one line on what was exported on stderr. With -exporter none or otlp,\n"+
			"stdout carries the waterfall and the summary instead.\n"+
			"Exit: 0 when the scenario behaved as designed (with -budget: always, the verdicts are shown, not\n"+
			"checked), 1 when it did not, 2 on bad flags.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		usage()
		return cfg, err
	} else if err != nil {
		return cfg, fmt.Errorf("%w (-h lists the flags)", err)
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q: every setting is a flag", fs.Args())
	}
	if _, err := findScenario(cfg.scenario); err != nil {
		return cfg, err
	}
	if cfg.transport != transportHTTP && cfg.transport != transportGRPC && cfg.transport != transportAgent {
		return cfg, fmt.Errorf("-transport %q: want http, grpc or agent", cfg.transport)
	}
	switch cfg.exporter {
	case exporterAuto, exporterStdout, exporterOTLP, exporterNone:
	default:
		return cfg, fmt.Errorf("-exporter %q: want stdout, otlp or none", cfg.exporter)
	}
	if err := checkExportEnv(cfg.exporter, getenv); err != nil {
		return cfg, err
	}
	budgetSet := false
	fs.Visit(func(f *flag.Flag) { budgetSet = budgetSet || f.Name == "budget" })
	if budgetSet && cfg.budget <= 0 {
		return cfg, fmt.Errorf("-budget %s: want a positive duration such as 1s or 300ms", cfg.budget)
	}
	if cfg.runs < 0 || cfg.parallel < 1 {
		return cfg, fmt.Errorf("-runs %d -parallel %d: want -runs >= 0 and -parallel >= 1", cfg.runs, cfg.parallel)
	}
	if cfg.runs > 0 && (cfg.scenario != "ok" || budgetSet) {
		return cfg, fmt.Errorf("-runs plays the ok scenario's plan and budget: -scenario and -budget do not apply")
	}
	if cfg.runs > 0 && cfg.transport != transportHTTP {
		return cfg, fmt.Errorf("-runs plays its plan over HTTP only: -transport %s does not apply", cfg.transport)
	}
	if cfg.exportTimeout <= 0 {
		return cfg, fmt.Errorf("-export-timeout %s: want a positive duration such as 500ms", cfg.exportTimeout)
	}
	return cfg, nil
}

// durationFlag is a time.Duration flag whose parse error says what is
// wanted: flag.Duration says only "parse error", and "1" for "1s" is the
// usual slip.
type durationFlag time.Duration

func (d *durationFlag) String() string { return time.Duration(*d).String() }

func (d *durationFlag) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want a number with a unit, such as 1s, 500ms or 1m30s")
	}
	*d = durationFlag(v)
	return nil
}

// isTerminal reports whether f is a character device (a terminal), without
// a dependency for it.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0) // -h asked for the usage text, and got it
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracedemo:", err)
		os.Exit(2)
	}
	// no-color.org: a NO_COLOR that is present and not empty disables colour.
	noColor := os.Getenv("NO_COLOR") != ""
	cfg.colorStdout = !noColor && isTerminal(os.Stdout)
	cfg.colorStderr = !noColor && isTerminal(os.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err = run(ctx, cfg, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracedemo:", err)
		os.Exit(1)
	}
}

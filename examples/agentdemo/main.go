// Command agentdemo runs a Genkit agent inside one deadline budget and
// prints the run as a terminal waterfall.
//
// The agent is Genkit Go (v1.4.0) with its compat_oai plugin over
// openai-go, against a fake OpenAI-compatible provider the command starts
// in-process on loopback. It asks for the tool "lookup" ten times, then
// answers; one call of the tool (-slow-at) hangs for -slow, ignoring its
// context. The run is otelbudgetgenkit's: one deadline of -budget, a lease
// for every model and tool call, the hanging tool abandoned at its lease,
// and -reserve kept back for a final model call, so that the run answers
// inside its budget. The spans (invoke_agent, chat, execute_tool, with the
// GenAI keys and the deadline.* attributes, and Genkit's own) are recorded
// by the OpenTelemetry SDK and drawn as a waterfall on the terminal. The
// spans as JSON (stdouttrace's, pretty-printed: about 130 KB, which would
// scroll the waterfall away) only on request, as tracedemo does: -export
// stdout writes them to stdout and the waterfall to stderr (so that
// `go run . -export stdout | jq` reads only JSON); -json FILE writes them
// to FILE. By default (-export none) the last line says how many spans
// were recorded and how to get them.
//
// Usage:
//
//	cd examples/agentdemo && go run . [-budget 1s] [-reserve 150ms] [-slow-at 4] [-slow 2s] [-export none|stdout] [-json FILE]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
	"github.com/firebase/genkit/go/plugins/compat_oai"
	"github.com/openai/openai-go/option"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetgenkit"
)

type options struct {
	budget, reserve, slow time.Duration
	slowAt                int
	export                string
	jsonFile              string    // also write the spans as JSON to this file
	human                 io.Writer // the waterfall and summary; nil: run's w
	waitTools             bool      // wait for the abandoned tool before returning (tests)
}

func main() {
	var o options
	flag.DurationVar(&o.budget, "budget", time.Second, "the run's whole budget")
	flag.DurationVar(&o.reserve, "reserve", 150*time.Millisecond, "time kept back for a final model call (0: none, the run ends with the stop)")
	flag.IntVar(&o.slowAt, "slow-at", 4, "the tool call (1-based) that hangs, ignoring its context (0: none)")
	flag.DurationVar(&o.slow, "slow", 2*time.Second, "how long the hanging tool call takes")
	flag.StringVar(&o.export, "export", "none", "none, or stdout: the spans as JSON on stdout, the waterfall then on stderr (as tracedemo)")
	flag.StringVar(&o.jsonFile, "json", "", "write the spans as JSON (stdouttrace's, pretty-printed) to this file")
	flag.Parse()
	if o.export == "stdout" {
		o.human = os.Stderr // stdout carries only the JSON: `go run . -export stdout | jq`
	}
	if err := run(context.Background(), os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "agentdemo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer, o options) error {
	if o.export != "stdout" && o.export != "none" {
		return fmt.Errorf("-export %q: want stdout or none", o.export)
	}
	if o.budget <= 0 || o.reserve < 0 || o.slowAt < 0 || o.slow < 0 {
		return errors.New("-budget must be > 0, -reserve, -slow-at and -slow >= 0")
	}
	out := w // the waterfall and the summary
	if o.human != nil {
		out = o.human
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // genkit.Init's signal goroutine ends with it

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	otel.SetTracerProvider(tp) // Genkit's own spans go to the global provider

	prov := newProvider(10, 40*time.Millisecond)
	srv := httptest.NewServer(prov) // loopback
	defer srv.Close()

	// The provider's SDK: openai-go's retries off, the agents' transport
	// recipe under it (an HTTP span per request below its chat attempt; a
	// 429 is retried by the model call within the budget, after the wait
	// the provider asked for).
	oai := &compat_oai.OpenAICompatible{
		Provider: "fake", APIKey: "sk-demo", BaseURL: srv.URL + "/v1/",
		Opts: []option.RequestOption{
			option.WithHTTPClient(&http.Client{Transport: otelbudgetgenkit.Transport(nil, nil)}),
			option.WithMaxRetries(0),
		},
	}
	g := genkit.Init(ctx, genkit.WithPlugins(oai))
	tl := &tool{latency: 30 * time.Millisecond, slowAt: o.slowAt, slow: o.slow}
	if _, err := otelbudgetgenkit.DefineTool(g, "lookup", "looks a thing up", tl.lookup, otelbudgetgenkit.ReadOnly()); err != nil {
		return err
	}

	agent, err := otelbudgetgenkit.New(otelbudgetgenkit.Config{
		Agent:       "researcher",
		Model:       "fake/fake-1",
		Provider:    "openai",
		ModelPolicy: deadline.Policy{Name: "chat", MaxAttempts: 3, AttemptTimeout: 300 * time.Millisecond, Floor: 20 * time.Millisecond},
		ToolPolicy:  deadline.Policy{MaxAttempts: 2, Floor: 20 * time.Millisecond},
		Reserve:     o.reserve,
		Observer:    otelbudget.New(otelbudget.WithTracerProvider(tp)),
	})
	if err != nil {
		return err
	}
	d := deadline.New(o.budget) // decided once, where the run starts
	res, runErr := agent.Run(deadline.NewContext(ctx, d), g,
		ai.WithPrompt("research the deadline budget"), ai.WithTools(ai.ToolName("lookup")), ai.WithMaxTurns(10))
	took := time.Since(d.End().Add(-d.Budget()))

	if err := writeWaterfall(out, rec.Ended(), o.budget); err != nil {
		return err
	}
	fmt.Fprintln(out)
	switch {
	case runErr != nil:
		fmt.Fprintf(out, "stopped after %v of %v: %v\n", took.Round(time.Millisecond), o.budget, runErr)
	case res.Stop != nil:
		fmt.Fprintf(out, "answered from the reserve after %v of %v (cut short by %s: %s): %q\n", took.Round(time.Millisecond), o.budget, res.Stop.Name, res.Stop.Reason, res.Answer.Text())
	default:
		fmt.Fprintf(out, "answered after %v of %v: %q\n", took.Round(time.Millisecond), o.budget, res.Answer.Text())
	}
	fmt.Fprintf(out, "%d model calls, %d tool calls", res.ModelCalls, res.ToolCalls)
	for _, a := range res.Abandoned {
		fmt.Fprintf(out, "; abandoned: %s %s after its %v lease (still running; not waited for)", a.Tool, a.CallID, a.Lease.Round(time.Millisecond))
	}
	fmt.Fprintln(out)
	if o.waitTools {
		res.WaitTools()
	}

	spans := rec.Ended()
	if o.jsonFile != "" {
		f, err := os.Create(o.jsonFile)
		if err != nil {
			return fmt.Errorf("-json: %w", err)
		}
		err = exportJSON(ctx, f, spans)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("-json %s: %w", o.jsonFile, err)
		}
		fmt.Fprintf(out, "%d spans written to %s as JSON\n", len(spans), o.jsonFile)
	}
	if o.export == "stdout" {
		return exportJSON(ctx, w, spans)
	}
	if o.jsonFile == "" {
		fmt.Fprintf(out, "%d spans recorded (invoke_agent, chat, execute_tool and Genkit's own); -json FILE writes them as JSON to FILE, -export stdout to stdout (the waterfall then on stderr)\n", len(spans))
	}
	return nil
}

// exportJSON writes spans to w with the SDK's stdout exporter, one
// pretty-printed JSON object a span.
func exportJSON(ctx context.Context, w io.Writer, spans []sdktrace.ReadOnlySpan) error {
	exp, err := stdouttrace.New(stdouttrace.WithWriter(w), stdouttrace.WithPrettyPrint())
	if err != nil {
		return err
	}
	if err := exp.ExportSpans(ctx, spans); err != nil {
		return err
	}
	return exp.Shutdown(ctx)
}

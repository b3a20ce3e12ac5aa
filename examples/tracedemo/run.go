package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgethttp"
)

// closeTimeout bounds stopping the provider servers: every handler has
// already returned or is about to, its lease ended.
const closeTimeout = 5 * time.Second

// run runs cfg's scenario: it starts the providers, runs the agent plan
// under one budget, prints the waterfall and the summary, exports the spans
// and metrics, and checks that the scenario behaved as designed. It returns
// nil when it did, and an error that says what differed otherwise.
//
// Exported telemetry that the exporter writes as JSON goes to stdout, which
// then carries nothing else (`make demo | jq` works); the waterfall and the
// summary go to stderr in that case, and to stdout when nothing is exported
// there (-exporter none or otlp). One line on stderr says what was
// exported, or that the export failed and why; export problems do not fail
// the run.
//
// With a budget chosen by the caller (cfg.budget > 0) the scenario's design,
// which holds for its own budget, is not checked: run shows the verdicts and
// returns nil.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	sc, err := findScenario(cfg.scenario)
	if err != nil {
		return err
	}
	budget := sc.budget
	if cfg.budget > 0 {
		budget = cfg.budget
	}
	getenv := cfg.getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	runPlan := cfg.execute
	if runPlan == nil {
		runPlan = execute
		switch cfg.transport {
		case transportGRPC:
			runPlan = executeGRPC
		case transportAgent:
			runPlan = executeAgent
		}
	}

	tel, err := newTelemetry(ctx, cfg.exporter, stdout, getenv)
	if err != nil {
		return err
	}
	human, color := stdout, cfg.colorStdout
	if tel.writesStdout() {
		human, color = stderr, cfg.colorStderr
	}
	if cfg.runs > 0 {
		stage := cfg.stage
		if stage == nil {
			stage = loopbackStage
		}
		rep, err := runMany(ctx, runsOptions{n: cfg.runs, parallel: cfg.parallel, seed: cfg.seed, scenarios: cfg.scenarioRuns, stage: stage, tp: tel.tp, mp: tel.mp, spans: tel.spans.snapshot})
		if err == nil {
			err = writeRunsReport(human, rep)
		}
		if line := tel.flush(ctx, cfg.exportTimeout).line(); line != "" {
			fmt.Fprintln(stderr, line)
		}
		return err
	}

	// The waterfall first, then the export (at most cfg.exportTimeout),
	// flushed whatever happened so that nothing it started outlives run.
	out, err := runPlan(ctx, sc, cfg.seed, budget, tel.tp, tel.mp)
	if out.ps != nil { // nil: the providers did not start, nothing ran
		err = errors.Join(err, report(human, out.rec, cfg, sc, color))
	}
	if line := tel.flush(ctx, cfg.exportTimeout).line(); line != "" {
		fmt.Fprintln(stderr, line)
	}
	if err != nil {
		return err
	}
	if cfg.budget > 0 {
		return nil
	}
	if err := check(sc, out.rec, out.ps); err != nil {
		if out.stepErr != nil {
			err = fmt.Errorf("%w (steps failed with: %s)", err, oneLine(out.stepErr))
		}
		return fmt.Errorf("scenario %s did not behave as designed: %w", sc.name, err)
	}
	return nil
}

// report writes what the person running the demo reads: the waterfall
// (unless cfg turns it off), the summary, and, for a budget of the caller's,
// that the verdicts are not checked against the scenario's design.
func report(w io.Writer, rec runRecord, cfg config, sc scenario, color bool) error {
	if cfg.waterfall {
		if err := writeWaterfall(w, rec, color); err != nil {
			return err
		}
	}
	if err := writeSummary(w, rec, color); err != nil {
		return err
	}
	if cfg.budget > 0 {
		_, err := fmt.Fprintf(w, "-budget %s replaces the scenario's %s: the verdicts are shown, not checked against its design\n", fmtDur(cfg.budget), fmtDur(sc.budget))
		return err
	}
	return nil
}

// outcome is what one run of the plan produced.
type outcome struct {
	rec     runRecord
	ps      *providers // the providers, with what they saw
	stepErr error      // the errors of the steps that failed, joined
}

// executor runs scenario sc's plan under budget, traced by tp and measured
// by mp, and returns what happened, with an error if the providers could
// not be started (the outcome is then empty, its providers nil: nothing
// ran) or stopped. execute is the real one.
type executor func(ctx context.Context, sc scenario, seed uint64, budget time.Duration, tp trace.TracerProvider, mp metric.MeterProvider) (outcome, error)

// execute starts the providers of sc on loopback, plays the plan against
// them under a budget, and stops them.
func execute(ctx context.Context, sc scenario, seed uint64, budget time.Duration, tp trace.TracerProvider, mp metric.MeterProvider) (outcome, error) {
	return executeOver(ctx, sc, seed, budget, tp, mp, (*providers).serve, play)
}

// executeOver is execute with the providers started by serve and the plan
// played by playPlan: the HTTP providers and play, or the agent's stack and
// playAgent.
func executeOver(ctx context.Context, sc scenario, seed uint64, budget time.Duration, tp trace.TracerProvider, mp metric.MeterProvider,
	serve func(*providers, trace.TracerProvider) error,
	playPlan func(context.Context, scenario, uint64, time.Duration, trace.TracerProvider, metric.MeterProvider, http.RoundTripper, map[string]string) (runRecord, error),
) (outcome, error) {
	ps := newProviders(sc)
	if err := serve(ps, tp); err != nil {
		return outcome{}, errors.Join(err, ps.close(ctx))
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.Proxy = nil // the providers are on loopback: never through a proxy
	rec, stepErr := playPlan(ctx, sc, seed, budget, tp, mp, base, ps.urls)
	out := outcome{rec: rec, ps: ps, stepErr: stepErr}

	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	if err := ps.close(cctx); err != nil {
		return out, fmt.Errorf("stopping the providers: %w", err)
	}
	return out, nil
}

// play runs the agent plan once under a new deadline of budget against the
// providers at urls, sending with base, traced by tp and measured by mp,
// and returns what the budget did and the errors of the steps that failed,
// joined (nil when every step succeeded). Tests call it with an in-memory base transport inside a
// synctest bubble.
//
// The plan is best effort across budget stops: a step that the budget
// stopped (refused, a wait too long for what is left, cut by the deadline)
// does not stop the plan, as an agent would go on and answer with what it
// has; every later step then gets its own verdict, a local refusal when too
// little is left to start it (the article's rule two). Any other failure
// (the operation failed, attempts exhausted, the run canceled) stops the
// plan, and the steps after it are recorded as not run.
func play(ctx context.Context, sc scenario, seed uint64, budget time.Duration, tp trace.TracerProvider, mp metric.MeterProvider, base http.RoundTripper, urls map[string]string) (runRecord, error) {
	return playWith(ctx, sc, seed, budget, tp, mp, base, urls, playOptions{})
}

// playOptions change how playWith plays the plan: for tracedemo -runs.
type playOptions struct {
	// hooks, when set, observe every call too (a learn.Recorder's).
	hooks *deadline.Hooks
	// ceilings replace the ceilings of the steps they name.
	ceilings map[string]time.Duration
}

// playWith is play with the options o.
func playWith(ctx context.Context, sc scenario, seed uint64, budget time.Duration, tp trace.TracerProvider, mp metric.MeterProvider, base http.RoundTripper, urls map[string]string, o playOptions) (runRecord, error) {
	return playOver(ctx, sc, seed, budget, tp, mp, o, func(obs *otelbudget.Observer) (stepCaller, error) {
		return newHTTPCaller(base, urls, obs), nil
	})
}

// stepCaller sends the steps of one run over one transport: HTTP (one
// shared client) or gRPC (one connection per provider).
type stepCaller interface {
	// withPolicy returns ctx carrying p as the policy of the next call.
	withPolicy(ctx context.Context, p deadline.Policy) context.Context
	// call sends step s (with the run's idempotency key) and returns its
	// error, which wraps the *deadline.StopError when the budget stopped it.
	call(ctx context.Context, s step, key string) error
	// close releases the caller's connections.
	close() error
}

// playOver runs the plan as playWith does, over the transport that dial
// builds for the run's observer.
func playOver(ctx context.Context, sc scenario, seed uint64, budget time.Duration, tp trace.TracerProvider, mp metric.MeterProvider, o playOptions, dial func(*otelbudget.Observer) (stepCaller, error)) (runRecord, error) {
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp), otelbudget.WithMeterProvider(mp))
	rng := mrand.New(mrand.NewPCG(seed, seed))
	key := rand.Text() // one Idempotency-Key for the one logical extract call

	// One client for the whole run, as a service shares one: each step's
	// request carries its own policy next to the deadline.
	client, err := dial(obs)
	if err != nil {
		return runRecord{}, err
	}

	d := deadline.New(budget)
	rec := newRecorder(sc, seed, d)
	// The run's span records the budget, each step's time and verdict, the
	// step that exhausted the budget and the outcome (otelbudget.StartRun).
	ctx, run := obs.StartRun(ctx, "agent run", d, trace.WithAttributes(
		attribute.String("tracedemo.scenario", sc.name),
		attribute.Int64("tracedemo.seed", int64(seed)),
	))
	ctx = deadline.WithHooks(ctx, deadline.Compose(rec.hooks(), o.hooks))

	var failed []error
	plan := agentPlan()
	for i, s := range plan {
		if c, ok := o.ceilings[s.name]; ok {
			s.ceiling = c
		}
		sctx := client.withPolicy(ctx, policyFor(s, rng))
		err := client.call(sctx, s, key)
		if err == nil {
			continue
		}
		failed = append(failed, err)
		if budgetStop(err) {
			// Best effort: the agent keeps what it has and goes on; the
			// budget refuses, locally, any later step that cannot start.
			continue
		}
		// The operation itself failed (or the run was canceled): the
		// steps after this one are not started.
		cause := failureCause(err)
		rec.notRun(plan[i+1:], s.name, cause)
		if i+1 < len(plan) {
			run.Span().SetAttributes(attribute.String("tracedemo.stopped_at", s.name+": "+cause))
		}
		break
	}
	run.End(errors.Join(failed...))
	if err := client.close(); err != nil {
		failed = append(failed, err)
	}
	return rec.finish(d), errors.Join(failed...)
}

// httpCaller sends every step through one shared http.Client.
type httpCaller struct {
	base   http.RoundTripper
	client *http.Client
	urls   map[string]string
}

// newHTTPCaller returns the HTTP caller of a run: one client over
// sharedTransport(base, obs), sending each step to its provider's URL.
func newHTTPCaller(base http.RoundTripper, urls map[string]string, obs *otelbudget.Observer) *httpCaller {
	return &httpCaller{base: base, client: &http.Client{Transport: sharedTransport(base, obs)}, urls: urls}
}

func (h *httpCaller) withPolicy(ctx context.Context, p deadline.Policy) context.Context {
	return deadlinehttp.WithRequestPolicy(ctx, p)
}

func (h *httpCaller) call(ctx context.Context, s step, key string) error {
	return callStep(ctx, h.client, h.urls[s.name], s, key)
}

func (h *httpCaller) close() error {
	if c, ok := h.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	return nil
}

// budgetStop reports whether err says the budget, not the operation,
// stopped the step: a *deadline.StopError whose reason is a budget reason.
func budgetStop(err error) bool {
	se, ok := errors.AsType[*deadline.StopError](err)
	return ok && se.Reason.Budget()
}

// failureCause says in a few words why a step failed: the stop reason of a
// *deadline.StopError, else the error itself.
func failureCause(err error) string {
	if se, ok := errors.AsType[*deadline.StopError](err); ok {
		return se.Reason.String()
	}
	return oneLine(err)
}

// policyFor returns the article's policy for step s: its ceiling and
// attempts, the 20ms floor, full-jitter backoff from 50ms to 400ms drawn
// from the run's seeded source.
func policyFor(s step, rng *mrand.Rand) deadline.Policy {
	return deadline.Policy{
		Name: s.name, MaxAttempts: s.attempts, AttemptTimeout: s.ceiling, Floor: floor,
		Backoff: deadline.Backoff{Base: backoffBase, Max: backoffMax, Jitter: deadline.JitterFull},
		Rand:    rng.Int64N,
	}
}

// sharedTransport returns the one HTTP transport of the run: the budget
// transport runs each request under the policy its context carries
// (deadlinehttp.WithRequestPolicy, set per step), and every physical
// attempt goes through otelhttp, whose CLIENT span becomes the attempt's
// span (a child of the step's call span) and injects the W3C trace context
// for the provider.
//
// It is otelbudgethttp.NewTransport(base, obs) written out, to give
// otelhttp the W3C propagator itself: the one-line form uses the global
// propagator, which a program sets once in main, and run must not depend on
// (or change) global state.
func sharedTransport(base http.RoundTripper, obs *otelbudget.Observer) http.RoundTripper {
	traced := otelbudgethttp.NewBase(base, obs, otelhttp.WithPropagators(propagation.TraceContext{}))
	return deadlinehttp.NewTransport(traced, deadlinehttp.WithHooks(obs.ClientHooks()))
}

// callStep sends step s to the provider at url and reads the answer. A
// response that is not 200 fails the step, as does any error from the
// budget transport (a *deadline.StopError inside the client's *url.Error);
// when the transport stopped retrying on an answer, the step's error wraps
// the *deadline.StopError that StopOf gives.
func callStep(ctx context.Context, client *http.Client, url string, s step, key string) error {
	var body io.Reader
	if s.body != "" {
		body = strings.NewReader(s.body)
	}
	req, err := http.NewRequestWithContext(ctx, s.method, url+s.path, body)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	if s.body != "" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key) // makes the POST safe to retry
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return fmt.Errorf("%s: reading the answer: %w", s.name, err)
	}
	if stop, ok := deadlinehttp.StopOf(resp); ok {
		return fmt.Errorf("%s: %s: %w", s.name, resp.Status, stop)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", s.name, resp.Status)
	}
	return nil
}

// check compares what happened with what sc declares, step by step, and
// says every difference.
func check(sc scenario, rec runRecord, ps *providers) error {
	var diffs []string
	for i, w := range sc.want {
		if i >= len(rec.Calls) {
			why := ""
			for _, n := range rec.NotRun {
				if n.Name == w.step {
					why = fmt.Sprintf(" (%s stopped the plan with %s)", n.After, n.Cause)
				}
			}
			diffs = append(diffs, fmt.Sprintf("%s: did not run%s", w.step, why))
			continue
		}
		c := rec.Calls[i]
		if c.Name != w.step {
			diffs = append(diffs, fmt.Sprintf("call %d: %s ran, want %s", i+1, c.Name, w.step))
			continue
		}
		if c.Verdict != w.verdict {
			diffs = append(diffs, fmt.Sprintf("%s: verdict %s, want %s", c.Name, c.Verdict, w.verdict))
		}
		if c.Reason != w.reason {
			diffs = append(diffs, fmt.Sprintf("%s: stopped with %s, want %s", c.Name, c.Reason, w.reason))
		}
		if c.Started != w.attempts {
			diffs = append(diffs, fmt.Sprintf("%s: %s, want %d", c.Name, plural(c.Started, "attempt"), w.attempts))
		}
	}
	for _, c := range rec.Calls[min(len(sc.want), len(rec.Calls)):] {
		diffs = append(diffs, fmt.Sprintf("%s: ran, but the scenario stops before it", c.Name))
	}
	wantRequests := map[string]int{}
	for _, w := range sc.want {
		wantRequests[w.step] = w.requests
	}
	for _, s := range agentPlan() {
		seen := ps.byStep[s.name].requests()
		if got := len(seen); got != wantRequests[s.name] {
			diffs = append(diffs, fmt.Sprintf("%s: the provider received %s, want %d", s.name, plural(got, "request"), wantRequests[s.name]))
		}
		if s.body == "" {
			continue
		}
		for _, r := range seen {
			if r.IdempotencyKey == "" || r.IdempotencyKey != seen[0].IdempotencyKey {
				diffs = append(diffs, fmt.Sprintf("%s: the provider received Idempotency-Keys %q and %q: every attempt of one call must carry the same key", s.name, seen[0].IdempotencyKey, r.IdempotencyKey))
				break
			}
		}
	}
	if len(diffs) > 0 {
		return errors.New(strings.Join(diffs, "; "))
	}
	return nil
}

// oneLine joins the lines of err's message, so that it prints as one line,
// each line once: errors.Join of two readers that gave up for the same
// reason says it twice.
func oneLine(err error) string {
	var lines []string
	for _, l := range strings.Split(err.Error(), "\n") {
		if l = strings.Join(strings.Fields(l), " "); l != "" && !slices.Contains(lines, l) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget"
)

// heavyTail is a latency distribution with a known quantile function: with
// probability 1 - tail a log-normal body (median, sigma), with probability
// tail a Pareto tail (scale xm, shape alpha). It is what the fetch provider
// of tracedemo -runs draws its work time from.
type heavyTail struct {
	median time.Duration
	sigma  float64
	tail   float64
	xm     time.Duration
	alpha  float64
}

// fetchLatency is the fetch provider's distribution in -runs mode: half the
// requests take a log-normal 40ms (σ 0.4), the other half a Pareto tail from
// 85ms with shape 4. About 27% take longer than the article's 100ms
// ceiling; the true p99 is about 226ms.
var fetchLatency = heavyTail{median: 40 * time.Millisecond, sigma: 0.4, tail: 0.5, xm: 85 * time.Millisecond, alpha: 4}

// draw returns one latency drawn with r.
func (h heavyTail) draw(r *mrand.Rand) time.Duration {
	if r.Float64() < h.tail {
		u := 1 - r.Float64() // (0, 1]
		return time.Duration(float64(h.xm) * math.Pow(u, -1/h.alpha))
	}
	return time.Duration(float64(h.median) * math.Exp(h.sigma*r.NormFloat64()))
}

// cdf returns P(latency <= x).
func (h heavyTail) cdf(x time.Duration) float64 {
	if x <= 0 {
		return 0
	}
	z := math.Log(float64(x)/float64(h.median)) / h.sigma
	body := 0.5 * math.Erfc(-z/math.Sqrt2)
	pareto := 0.0
	if x > h.xm {
		pareto = 1 - math.Pow(float64(h.xm)/float64(x), h.alpha)
	}
	return (1-h.tail)*body + h.tail*pareto
}

// quantile returns the q-quantile of the distribution, to the nanosecond
// (bisection on cdf), for q in (0, 1).
func (h heavyTail) quantile(q float64) time.Duration {
	lo, hi := time.Duration(0), time.Hour
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if h.cdf(mid) >= q {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// sampler draws latencies from a distribution with a seeded source. It is
// safe for concurrent use.
type sampler struct {
	dist heavyTail
	mu   sync.Mutex
	rng  *mrand.Rand
}

func newSampler(d heavyTail, seed uint64) *sampler {
	return &sampler{dist: d, rng: mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (s *sampler) draw() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dist.draw(s.rng)
}

// runsScenario is the plan of tracedemo -runs: the ok scenario's plan and
// budget, with search and extract answering after their usual work time and
// fetch after a draw from fetchLatency seeded with seed.
func runsScenario(seed uint64) scenario {
	return scenario{
		name:   "ok",
		about:  "the article's plan against a fetch provider with a heavy-tailed latency",
		budget: defaultBudget,
		scripts: map[string]script{
			"fetch": {{latency: newSampler(fetchLatency, seed)}},
		},
	}
}

// player plays the plan once with the run's seed (the backoff jitter) and
// the options o, traced by tp and measured by mp.
type player func(ctx context.Context, seed uint64, tp trace.TracerProvider, mp metric.MeterProvider, o playOptions) (runRecord, error)

// stager starts the providers of sc (their server spans traced by tp) and
// returns a player against them and a function that stops them.
type stager func(ctx context.Context, sc scenario, tp trace.TracerProvider) (player, func(context.Context) error, error)

// loopbackStage is the real stager: the providers on 127.0.0.1.
func loopbackStage(ctx context.Context, sc scenario, tp trace.TracerProvider) (player, func(context.Context) error, error) {
	ps := newProviders(sc)
	if err := ps.serve(tp); err != nil {
		return nil, nil, errors.Join(err, ps.close(ctx))
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.Proxy = nil
	base.MaxIdleConnsPerHost = 64
	play := func(ctx context.Context, seed uint64, tp trace.TracerProvider, mp metric.MeterProvider, o playOptions) (runRecord, error) {
		return playWith(ctx, sc, seed, sc.budget, tp, mp, base, ps.urls, o)
	}
	stop := func(ctx context.Context) error {
		base.CloseIdleConnections()
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		return ps.close(cctx)
	}
	return play, stop, nil
}

// phaseStats sums what n runs of the plan did.
type phaseStats struct {
	Runs       int
	Verdicts   map[string]map[deadline.Verdict]int // step → verdict → calls
	TooSlow    int                                 // runs with at least one operation_too_slow verdict
	Attempts   int
	Doomed     int           // attempts ended by their ceiling or the deadline
	DoomedTime time.Duration // the time those attempts used: wasted
	Used       time.Duration // the runs' total time
}

func (s *phaseStats) add(rec runRecord) {
	s.Runs++
	s.Used += rec.Used
	slow := false
	for _, c := range rec.Calls {
		if s.Verdicts == nil {
			s.Verdicts = map[string]map[deadline.Verdict]int{}
		}
		if s.Verdicts[c.Name] == nil {
			s.Verdicts[c.Name] = map[deadline.Verdict]int{}
		}
		s.Verdicts[c.Name][c.Verdict]++
		slow = slow || c.Verdict == deadline.VerdictTooSlow
		for _, a := range c.Attempts {
			s.Attempts++
			if a.EndedBy == deadline.EndedAttemptTimeout || a.EndedBy == deadline.EndedDeadline {
				s.Doomed++
				s.DoomedTime += a.Used
			}
		}
	}
	if slow {
		s.TooSlow++
	}
}

// tooSlowRate is the fraction of runs with an operation_too_slow verdict.
func (s phaseStats) tooSlowRate() float64 { return ratio(s.TooSlow, s.Runs) }

// wastedPerRun is the mean time per run spent on attempts that a limit cut.
func (s phaseStats) wastedPerRun() time.Duration {
	if s.Runs == 0 {
		return 0
	}
	return s.DoomedTime / time.Duration(s.Runs)
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// playMany plays the plan n times, parallel at a time, each run seeded
// with seed + i, and sums the runs into stats. It stops at the first run
// that fails to play (not a step's failure: those are the data) or when ctx
// ends.
func playMany(ctx context.Context, play player, n, parallel int, seed uint64, tp trace.TracerProvider, mp metric.MeterProvider, o playOptions) (phaseStats, error) {
	var (
		mu    sync.Mutex
		stats phaseStats
		wg    sync.WaitGroup
	)
	next := make(chan int)
	for range max(parallel, 1) {
		wg.Go(func() {
			for i := range next {
				rec, _ := play(ctx, seed+uint64(i), tp, mp, o) // step errors are in rec
				mu.Lock()
				stats.add(rec)
				mu.Unlock()
			}
		})
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return stats, context.Cause(ctx)
}

// runsReport is everything tracedemo -runs found.
type runsReport struct {
	Runs        int
	Static      phaseStats // the article's ceilings
	Learned     phaseStats // the learning runs: ceilings opened to the budget
	Suggested   phaseStats // re-run with the suggested ceilings
	StaticNote  map[string]learn.Suggestion
	Suggestions map[string]learn.Suggestion
	Errors      map[string]error // the steps without a suggestion, and why
	Budget      learn.BudgetSuggestion
	BudgetErr   error
	Ceilings    map[string]time.Duration // the suggested ceilings used by the third phase
	TrueP99     time.Duration            // of fetchLatency
	// Scenarios are the demo's scenarios, each played once under the
	// article's ceilings after the learning runs and exported with them:
	// runs that fail (too small, too slow, throttled, refused) beside the
	// learning runs, which hardly ever do, so that budgetadvise's report
	// has failed runs to show and the configured ceilings to compare with.
	Scenarios []runRecord
}

// runsOptions configures runMany.
type runsOptions struct {
	n        int
	parallel int
	seed     uint64
	// scenarios: after the learning phase, play and export one run of
	// each scenario under the article's ceilings (tracedemo -scenario-runs).
	scenarios bool
	stage     stager
	tp        trace.TracerProvider // traces the learning phase
	mp        metric.MeterProvider // measures the learning phase
	// spans returns the spans tp made, those the demo exports: the plan
	// budget is read from them as budgetadvise reads them
	// (exportedPlanBudget). Nil: no plan budget.
	spans func() []sdktrace.ReadOnlySpan
}

// runMany is tracedemo -runs: it plays the plan o.n times in each of three
// phases against a fetch provider whose latency follows fetchLatency:
//
//  1. static: the article's ceilings (fetch 100ms);
//  2. learning: every ceiling opened to the budget, so that the attempts
//     show how long they take rather than being cut (a learn.Recorder fed
//     by the hooks records them, and o.tp/o.mp trace and measure them);
//  3. suggested: the ceilings learn suggests from phase 2.
//
// After phase 2, each of the demo's scenarios is played once under the
// article's ceilings, traced and measured as phase 2 is: the exported data
// then holds failed runs and the configured ceilings beside the learning
// runs' opened ones.
//
// Phases 1 and 3 draw the same latencies (the same sampler seed), so that
// their difference is the ceilings'.
func runMany(ctx context.Context, o runsOptions) (runsReport, error) {
	rep := runsReport{Runs: o.n, TrueP99: fetchLatency.quantile(learn.DefaultQuantile),
		Suggestions: map[string]learn.Suggestion{}, StaticNote: map[string]learn.Suggestion{}, Errors: map[string]error{}}
	noT, noM := tracenoop.NewTracerProvider(), metricnoop.NewMeterProvider()
	phase := func(sc scenario, tp trace.TracerProvider, mp metric.MeterProvider, po playOptions) (phaseStats, error) {
		play, stop, err := o.stage(ctx, sc, tp)
		if err != nil {
			return phaseStats{}, err
		}
		st, err := playMany(ctx, play, o.n, o.parallel, o.seed, tp, mp, po)
		return st, errors.Join(err, stop(ctx))
	}
	plan := agentPlan()

	var static learn.Recorder
	var err error
	if rep.Static, err = phase(runsScenario(o.seed), noT, noM, playOptions{hooks: static.Hooks()}); err != nil {
		return rep, fmt.Errorf("static phase: %w", err)
	}
	for _, s := range plan {
		sg, _ := static.Suggest(s.name, learn.SuggestOptions{})
		rep.StaticNote[s.name] = sg
	}

	var rec learn.Recorder
	open := map[string]time.Duration{}
	for _, s := range plan {
		open[s.name] = defaultBudget
	}
	if rep.Learned, err = phase(runsScenario(o.seed+1), o.tp, o.mp, playOptions{hooks: rec.Hooks(), ceilings: open}); err != nil {
		return rep, fmt.Errorf("learning phase: %w", err)
	}
	for _, sc := range scenarios() {
		if !o.scenarios {
			break
		}
		play, stop, err := o.stage(ctx, sc, o.tp)
		if err != nil {
			return rep, fmt.Errorf("scenario %s: %w", sc.name, err)
		}
		rec, _ := play(ctx, o.seed, o.tp, o.mp, playOptions{}) // its failures are the data
		if err := stop(ctx); err != nil {
			return rep, fmt.Errorf("scenario %s: %w", sc.name, err)
		}
		rep.Scenarios = append(rep.Scenarios, rec)
	}
	rep.Ceilings = map[string]time.Duration{}
	for _, s := range plan {
		sg, err := rec.Suggest(s.name, learn.SuggestOptions{})
		rep.Suggestions[s.name] = sg
		if err != nil {
			rep.Errors[s.name] = err
			continue
		}
		rep.Ceilings[s.name] = sg.Ceiling
	}
	if o.spans != nil {
		rep.Budget, rep.BudgetErr = exportedPlanBudget(o.spans())
	} else {
		rep.BudgetErr = errors.New("no spans recorded: the plan budget is read from the exported spans")
	}

	if rep.Suggested, err = phase(runsScenario(o.seed), noT, noM, playOptions{ceilings: rep.Ceilings}); err != nil {
		return rep, fmt.Errorf("suggested phase: %w", err)
	}
	return rep, nil
}

// writeRunsReport prints rep: the suggestions per step, the suggested
// budget, and the static and the suggested ceilings side by side.
func writeRunsReport(w io.Writer, rep runsReport) error {
	var b strings.Builder
	plan := agentPlan()
	fmt.Fprintf(&b, "tracedemo -runs %d: the article's plan, fetch's latency heavy-tailed (log-normal 40ms σ0.4 | 50%% Pareto from 85ms, α 4; true p99 %s)\n\n",
		rep.Runs, fmtDur(rep.TrueP99))
	fmt.Fprintf(&b, "With the article's static ceilings, what can be learned:\n")
	for _, s := range plan {
		sg := rep.StaticNote[s.name]
		if sg.Censored {
			fmt.Fprintf(&b, "  %-8s censored: %d of %d attempts cut at %s; p99 is above it: raise the ceiling to learn it\n",
				s.name, sg.CeilingTimeouts+sg.DeadlineCuts, sg.Samples, fmtDur(sg.RaiseAbove))
		} else if sg.Ceiling > 0 {
			fmt.Fprintf(&b, "  %-8s p99 %s from %d samples\n", s.name, fmtDur(sg.Estimate), sg.Samples)
		} else {
			fmt.Fprintf(&b, "  %-8s no estimate (%d samples)\n", s.name, sg.Samples)
		}
	}
	fmt.Fprintf(&b, "\nLearned with the ceilings opened to the budget (%d runs):\n", rep.Runs)
	fmt.Fprintf(&b, "  %-8s %10s %10s %8s %-41s %s\n", "step", "ceiling", "p99", "samples", "window", "censored")
	for _, s := range plan {
		sg := rep.Suggestions[s.name]
		window := sg.First.UTC().Format("2006-01-02T15:04:05Z") + " … " + sg.Last.UTC().Format("15:04:05Z")
		ceil, est := "-", "-"
		if sg.Ceiling > 0 {
			ceil, est = fmtDur(sg.Ceiling), fmtDur(sg.Estimate)
		}
		fmt.Fprintf(&b, "  %-8s %10s %10s %8d %-41s %v\n", s.name, ceil, est, sg.Samples, window, sg.Censored)
		if err := rep.Errors[s.name]; err != nil {
			fmt.Fprintf(&b, "           %s\n", oneLine(err))
		}
	}
	if rep.BudgetErr != nil {
		fmt.Fprintf(&b, "  plan budget: none: %s\n", oneLine(rep.BudgetErr))
	} else {
		fmt.Fprintf(&b, "  plan budget: %s for P(success) %.4f (target %g); fetch true p99 × 1.2 = %s\n",
			fmtDur(rep.Budget.Budget), rep.Budget.Success, rep.Budget.Target, fmtDur(time.Duration(float64(rep.TrueP99)*learn.DefaultMargin)))
	}
	if len(rep.Scenarios) > 0 {
		fmt.Fprintf(&b, "\nThe demo's scenarios, once each under the article's ceilings (exported with the learning runs):\n")
		for _, r := range rep.Scenarios {
			var v []string
			for _, c := range r.Calls {
				v = append(v, c.Name+"="+string(c.Verdict))
			}
			fmt.Fprintf(&b, "  %-12s budget %-6s %s\n", r.Scenario, fmtDur(r.Budget), strings.Join(v, " "))
		}
	}
	fmt.Fprintf(&b, "\nRe-run, same latencies, %d runs each:\n", rep.Runs)
	fmt.Fprintf(&b, "  %-34s %18s %18s\n", "", "static ceilings", "suggested")
	ceil := func(m map[string]time.Duration) string {
		var parts []string
		for _, s := range plan {
			c, ok := m[s.name]
			if !ok {
				c = s.ceiling
			}
			parts = append(parts, fmtDur(c))
		}
		return strings.Join(parts, "/")
	}
	fmt.Fprintf(&b, "  %-34s %18s %18s\n", "ceilings search/fetch/extract", ceil(nil), ceil(rep.Ceilings))
	fmt.Fprintf(&b, "  %-34s %17.2f%% %17.2f%%\n", "runs with operation_too_slow", 100*rep.Static.tooSlowRate(), 100*rep.Suggested.tooSlowRate())
	fmt.Fprintf(&b, "  %-34s %18d %18d\n", "attempts cut by a limit", rep.Static.Doomed, rep.Suggested.Doomed)
	fmt.Fprintf(&b, "  %-34s %18s %18s\n", "time wasted on them, per run", fmtDur(rep.Static.wastedPerRun()), fmtDur(rep.Suggested.wastedPerRun()))
	fmt.Fprintf(&b, "  %-34s %18d %18d\n", "attempts", rep.Static.Attempts, rep.Suggested.Attempts)
	fmt.Fprintf(&b, "  verdicts:\n")
	for _, s := range plan {
		fmt.Fprintf(&b, "    %-32s %18s %18s\n", s.name, fmtVerdicts(rep.Static.Verdicts[s.name]), fmtVerdicts(rep.Suggested.Verdicts[s.name]))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fmtVerdicts writes counts as "ok 1990, too_slow 10", most frequent first.
func fmtVerdicts(m map[deadline.Verdict]int) string {
	type vc struct {
		v deadline.Verdict
		n int
	}
	var all []vc
	for v, n := range m {
		all = append(all, vc{v, n})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].n != all[j].n {
			return all[i].n > all[j].n
		}
		return all[i].v < all[j].v
	})
	var parts []string
	for _, x := range all {
		parts = append(parts, fmt.Sprintf("%s %d", strings.TrimPrefix(strings.TrimPrefix(string(x.v), "operation_"), "deadline_"), x.n))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// exportedPlanBudget suggests the plan's run budget from spans, the spans
// the demo exports, as budgetadvise does from the same spans read back:
// every attempt span through otelbudget.ReadAttemptSample into its step's
// histogram, each step's MaxAttempts and floor from its call spans, and
// otelbudget.SuggestRunBudget, the one computation both use. So `make
// advise` prints one budget and one P(success), twice.
func exportedPlanBudget(spans []sdktrace.ReadOnlySpan) (learn.BudgetSuggestion, error) {
	hist := map[string]*learn.Histogram{}
	steps := map[string]*otelbudget.PlanStep{}
	for _, sp := range spans {
		attrs := spanAttrs{}
		for _, kv := range sp.Attributes() {
			attrs[kv.Key] = kv.Value
		}
		step := attrs[otelbudget.AttrStep].AsString()
		if step == "" {
			continue
		}
		if steps[step] == nil {
			hist[step] = &learn.Histogram{}
			steps[step] = &otelbudget.PlanStep{Name: step, Attempts: hist[step]}
		}
		if ended := attrs[otelbudget.AttrAttemptEndedBy]; ended.AsString() != "" {
			// Times as the exported JSON holds them: wall clock, no
			// monotonic reading.
			a, err := otelbudget.ReadAttemptSample(attrs, sp.StartTime().Round(0), sp.EndTime().Round(0))
			if err == nil {
				hist[step].Add(a.EndedBy, a.Duration, a.End)
			}
			continue
		}
		if attrs[otelbudget.AttrVerdict].AsString() != "" {
			if v, ok := attrs[otelbudget.AttrMaxAttempts]; ok && v.Type() == attribute.INT64 {
				steps[step].MaxAttempts = int(v.AsInt64())
			}
			if v, ok := attrs[otelbudget.AttrFloorMs]; ok && v.Type() == attribute.INT64 {
				steps[step].Floor = time.Duration(v.AsInt64()) * time.Millisecond
			}
		}
	}
	var plan []otelbudget.PlanStep
	for _, s := range agentPlan() {
		if p := steps[s.name]; p != nil && p.Attempts.Samples > 0 {
			plan = append(plan, *p)
		}
	}
	return otelbudget.SuggestRunBudget(plan, otelbudget.PlanOptions{})
}

// spanAttrs reads an SDK span's attributes for otelbudget.ReadAttemptSample.
type spanAttrs map[attribute.Key]attribute.Value

// Lookup returns the value of key and whether the span has it.
func (a spanAttrs) Lookup(key attribute.Key) (attribute.Value, bool) {
	v, ok := a[key]
	return v, ok
}

package main

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
	"github.com/deadlinebudget/budget/otelbudget"
)

// options are the flags that shape the advice.
type options struct {
	suggest     learn.SuggestOptions
	target      float64
	attempts    int // MaxAttempts of a step the traces do not describe
	backoffBase time.Duration
	backoffMax  time.Duration
}

// stepReport is the advice for one step from one source.
type stepReport struct {
	Step               string  `json:"step"`
	Source             string  `json:"source"` // traces or metrics
	Attempts           uint64  `json:"attempts"`
	Successes          uint64  `json:"successes"`
	Errors             uint64  `json:"errors"`
	CeilingTimeouts    uint64  `json:"ceiling_timeouts"`
	DeadlineCuts       uint64  `json:"deadline_cuts"`
	SuccessRate        float64 `json:"success_rate"`
	CeilingTimeoutRate float64 `json:"ceiling_timeout_rate"`
	// Completed counts the attempts no limit cut (completed or failed on
	// their own); CensoredShare is the share of attempts a limit cut
	// (ceiling timeouts and deadline cuts over attempts).
	Completed     uint64  `json:"completed"`
	CensoredShare float64 `json:"censored_share"`
	// CompletedMs are the completed attempts' own percentiles (p50, p90,
	// p99, p99.9), what a dashboard of their durations shows: the cut
	// attempts are left out, so they understate a tail that a ceiling cuts.
	CompletedMs map[string]any `json:"completed_ms"`
	// KaplanMeierMs is the Kaplan–Meier estimate of the full distribution,
	// each cut attempt counted as longer than its cut (as learn estimates):
	// a number, or null for a quantile above the cuts (unknown).
	KaplanMeierMs      map[string]any `json:"kaplan_meier_ms"`
	Verdicts           map[string]int `json:"verdicts,omitempty"`
	CurrentCeilingMs   float64        `json:"current_ceiling_ms,omitempty"`
	SuggestedCeilingMs float64        `json:"suggested_ceiling_ms,omitempty"`
	Censored           bool           `json:"censored"`
	RaiseAboveMs       float64        `json:"raise_above_ms,omitempty"`
	NoSuggestion       string         `json:"no_suggestion,omitempty"` // why there is no suggested ceiling
	// OpenedCeilingMs is the ceiling of the attempts whose ceiling was at
	// or above their run's budget (a learning run opens them so: it limits
	// nothing); CurrentCeilingMs is then the ceiling of the other attempts,
	// the configured one, when there are any.
	OpenedCeilingMs float64   `json:"opened_ceiling_ms,omitempty"`
	First           time.Time `json:"first"`
	Last            time.Time `json:"last"`

	data *stepData
	sug  learn.Suggestion
	err  error // why there is no suggestion
}

// budgetReport is the suggested budget of the plan.
type budgetReport struct {
	Source   string   `json:"source"`
	Steps    []string `json:"steps"`
	BudgetMs float64  `json:"budget_ms,omitempty"`
	Success  float64  `json:"success,omitempty"`
	Target   float64  `json:"target"`
	Error    string   `json:"error,omitempty"`
	budget   time.Duration
	err      error
}

// report is everything budgetadvise prints.
type report struct {
	// From and To bound the data: the earliest span start or metric
	// point start (StartTimeUnixNano), the latest span end or point time.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Runs counts the traces with call spans (the runs read).
	Runs int `json:"runs"`
	// OpenedRuns counts the runs whose attempts ran with ceilings opened
	// to the run's budget (learning runs).
	OpenedRuns int `json:"opened_runs,omitempty"`
	// MoreRuns, when a step has too few attempts for a suggestion, says
	// how many runs would give it enough, and the command that records
	// them.
	MoreRuns *moreRuns      `json:"more_runs,omitempty"`
	Steps    []stepReport   `json:"steps"`
	Budget   *budgetReport  `json:"budget,omitempty"`
	Notes    []string       `json:"notes,omitempty"`
	Inputs   map[string]int `json:"inputs"` // spans and metric points read
}

var percentiles = []struct {
	name string
	q    float64
}{{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}, {"p99.9", 0.999}}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// advise derives the report from ds.
func advise(ds *dataset, o options) report {
	rep := report{Notes: ds.notes, Inputs: map[string]int{"spans": ds.spansSeen, "metric_points": ds.pointsSeen}}
	order := planOrder(ds)
	for _, src := range []struct {
		name  string
		steps map[string]*stepData
	}{{"traces", ds.spans}, {"metrics", ds.metrics}} {
		for _, name := range order {
			sd := src.steps[name]
			if sd == nil || sd.hist.Samples == 0 {
				if sd != nil && len(sd.verdicts) > 0 {
					rep.Steps = append(rep.Steps, stepReport{Step: name, Source: src.name, Verdicts: sd.verdicts, NoSuggestion: "no attempt spans", data: sd})
				}
				continue
			}
			r := stepAdvice(name, src.name, sd, o)
			if t := ds.spans[name]; r.CurrentCeilingMs == 0 && t != nil {
				// Metrics do not carry the ceiling; the spans do.
				if c := mostCommon(t.ceilings); c > 0 {
					r.CurrentCeilingMs = ms(c)
				}
			}
			rep.Steps = append(rep.Steps, r)
		}
	}
	conf, opened, openedRuns := splitCeilings(ds)
	for i := range rep.Steps {
		s := &rep.Steps[i]
		if c := mostCommon(conf[s.Step]); c > 0 {
			s.CurrentCeilingMs = ms(c)
		}
		if c := opened[s.Step]; c > 0 {
			s.OpenedCeilingMs = ms(c)
		}
	}
	rep.OpenedRuns = openedRuns
	rep.From, rep.To = ds.from, ds.to
	rep.Runs = countRuns(ds)
	rep.MoreRuns = needMoreRuns(rep, o)
	rep.Budget = planBudget(ds, order, o)
	return rep
}

// splitCeilings tells the attempts' ceilings apart: per step, the
// configured ones and the opened one, of the runs whose every attempt had
// a ceiling at or above the run's budget (a learning run opens them so: a
// ceiling that high limits nothing), and how many runs opened theirs. A
// run's budget is the largest deadline.budget_ms of its spans.
func splitCeilings(ds *dataset) (conf map[string]map[time.Duration]uint64, opened map[string]time.Duration, openedRuns int) {
	budget := map[[16]byte]int64{}
	for _, sv := range ds.traced {
		if b, ok := sv.int(attribute(otelbudget.AttrBudgetMs)); ok && b > budget[sv.trace] {
			budget[sv.trace] = b
		}
	}
	open := map[[16]byte]bool{} // false: a ceiling below the budget seen
	for _, sv := range ds.traced {
		if c, ok := sv.int(attrCeilingMs); ok && isAttempt(sv) {
			b := budget[sv.trace]
			was, seen := open[sv.trace]
			open[sv.trace] = b > 0 && c >= b && (was || !seen)
		}
	}
	conf, opened = map[string]map[time.Duration]uint64{}, map[string]time.Duration{}
	for _, sv := range ds.traced {
		c, ok := sv.int(attrCeilingMs)
		if !ok || !isAttempt(sv) {
			continue
		}
		step, ceiling := sv.str(attrStep), time.Duration(c)*time.Millisecond
		if open[sv.trace] {
			opened[step] = max(opened[step], ceiling)
			continue
		}
		if conf[step] == nil {
			conf[step] = map[time.Duration]uint64{}
		}
		conf[step][ceiling]++
	}
	for _, o := range open {
		if o {
			openedRuns++
		}
	}
	return conf, opened, openedRuns
}

// moreRuns says how many runs a suggestion needs.
type moreRuns struct {
	Runs   int    `json:"runs"`   // runs to record in all
	Step   string `json:"step"`   // the step with the fewest attempts
	Needed int    `json:"needed"` // attempts a suggestion is made from
	Have   uint64 `json:"have"`   // attempts of that step read
	// Command records them with the demo, in a clone of the repository
	// (demoWhere): the runs of a user's own service are the user's to
	// record.
	Command string `json:"command"`
}

// demoWhere says where the demo's command works: an installed budgetadvise
// runs anywhere, make advise only in a clone of the repository.
const demoWhere = "in a clone of github.com/deadlinebudget/budget"

// countRuns counts the traces that hold call spans.
func countRuns(ds *dataset) int {
	runs := map[[16]byte]bool{}
	for _, c := range ds.calls {
		runs[c.trace] = true
	}
	return len(runs)
}

// needMoreRuns returns how many runs the step with the fewest attempts
// needs for a suggestion, at the attempts per run read (one a run when the
// runs are not known), or nil when no step lacks samples.
func needMoreRuns(rep report, o options) *moreRuns {
	var worst *stepReport
	var need int
	for i, s := range rep.Steps {
		var ne *learn.NotEnoughSamplesError
		if s.Attempts == 0 || !errors.As(s.err, &ne) {
			continue
		}
		if worst == nil || s.Attempts < worst.Attempts {
			worst, need = &rep.Steps[i], ne.Min
		}
	}
	if worst == nil {
		return nil
	}
	perRun := 1.0
	if rep.Runs > 0 && worst.Source == "traces" {
		perRun = max(1, float64(worst.Attempts)/float64(rep.Runs))
	}
	runs := int(math.Ceil(float64(need) / perRun))
	return &moreRuns{Runs: runs, Step: worst.Step, Needed: need, Have: worst.Attempts,
		Command: fmt.Sprintf("make advise RUNS=%d", runs)}
}

func stepAdvice(name, src string, sd *stepData, o options) stepReport {
	h := &sd.hist
	r := stepReport{
		Step: name, Source: src, Attempts: h.Samples, Successes: h.Successes, Errors: h.Errors(),
		CeilingTimeouts: h.CeilingTimeouts, DeadlineCuts: h.DeadlineCuts,
		SuccessRate:        float64(h.Successes) / float64(h.Samples),
		CeilingTimeoutRate: float64(h.CeilingTimeouts) / float64(h.Samples),
		Completed:          h.Completed(), CensoredShare: float64(h.Censored()) / float64(h.Samples),
		CompletedMs: map[string]any{}, KaplanMeierMs: map[string]any{}, First: h.First, Last: h.Last, data: sd,
	}
	if len(sd.verdicts) > 0 {
		r.Verdicts = sd.verdicts
	}
	for _, p := range percentiles {
		r.KaplanMeierMs[p.name], r.CompletedMs[p.name] = nil, nil
		if v, err := h.Quantile(p.q); err == nil {
			r.KaplanMeierMs[p.name] = ms(v)
		}
		if v, err := sd.done.Quantile(p.q); err == nil {
			r.CompletedMs[p.name] = ms(v)
		}
	}
	if c := mostCommon(sd.ceilings); c > 0 {
		r.CurrentCeilingMs = ms(c)
	}
	sug, err := learn.Suggest(name, h, o.suggest)
	r.sug, r.err = sug, err
	r.Censored = sug.Censored
	if sug.Censored {
		r.RaiseAboveMs = ms(sug.RaiseAbove)
	}
	if err != nil {
		r.NoSuggestion = err.Error()
	} else {
		r.SuggestedCeilingMs = ms(sug.Ceiling)
	}
	return r
}

func mostCommon(m map[time.Duration]uint64) time.Duration {
	var best time.Duration
	var n uint64
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] > n {
			best, n = k, m[k]
		}
	}
	return best
}

// planOrder orders the steps as the traces ran them (by their mean
// position among the call spans of a trace); steps the traces do not
// show come after, by name.
func planOrder(ds *dataset) []string {
	byTrace := map[[16]byte][]callSpan{}
	for _, c := range ds.calls {
		byTrace[c.trace] = append(byTrace[c.trace], c)
	}
	pos := map[string][2]float64{}
	for _, cs := range byTrace {
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].start.Before(cs[j].start) })
		for i, c := range cs {
			p := pos[c.step]
			pos[c.step] = [2]float64{p[0] + float64(i), p[1] + 1}
		}
	}
	names := map[string]bool{}
	for k := range ds.spans {
		names[k] = true
	}
	for k := range ds.metrics {
		names[k] = true
	}
	order := slices.Sorted(maps.Keys(names))
	mean := func(s string) float64 {
		if p := pos[s]; p[1] > 0 {
			return p[0] / p[1]
		}
		return math.Inf(1)
	}
	sort.SliceStable(order, func(i, j int) bool { return mean(order[i]) < mean(order[j]) })
	return order
}

// planBudget suggests a run budget for the steps in order, from the traces
// when they have attempts, else from the metrics. Each step's MaxAttempts
// and floor come from its call spans (o.attempts and 0 without them); the
// backoff is o's (full jitter): the spans record the waits chosen, not the
// policy.
func planBudget(ds *dataset, order []string, o options) *budgetReport {
	src, steps := "traces", ds.spans
	if !hasAttempts(steps) {
		src, steps = "metrics", ds.metrics
	}
	if !hasAttempts(steps) {
		return nil
	}
	var plan []otelbudget.PlanStep
	br := &budgetReport{Source: src, Target: o.target}
	for _, name := range order {
		sd := steps[name]
		if sd == nil || sd.hist.Samples == 0 {
			continue
		}
		h := sd.hist
		p := otelbudget.PlanStep{Name: name, Attempts: &h}
		if t := ds.spans[name]; t != nil && t.maxAtt > 0 {
			p.MaxAttempts, p.Floor = t.maxAtt, t.floor
		}
		plan = append(plan, p)
		br.Steps = append(br.Steps, name)
	}
	// The one computation of a run budget, the demo's too (tracedemo -runs'
	// "plan budget"): the same spans give both the same figures.
	b, err := otelbudget.SuggestRunBudget(plan, otelbudget.PlanOptions{
		PlanOptions: learn.PlanOptions{SuggestOptions: o.suggest, Target: o.target},
		Attempts:    o.attempts,
		Backoff:     deadline.Backoff{Base: o.backoffBase, Max: o.backoffMax, Jitter: deadline.JitterFull},
	})
	if err != nil {
		br.Error, br.err = err.Error(), err
		return br
	}
	br.BudgetMs, br.Success, br.budget = ms(b.Budget), b.Success, b.Budget
	br.Target = b.Target
	return br
}

func hasAttempts(m map[string]*stepData) bool {
	for _, sd := range m {
		if sd.hist.Samples > 0 {
			return true
		}
	}
	return false
}

// errNothingRead is returned when no input held anything of this project.
var errNothingRead = errors.New("nothing could be read: no attempt spans (deadline.attempt.ended_by) nor deadline.attempt.duration exponential histograms in the input")

func nothingRead(ds *dataset) error {
	if ds.spansSeen == 0 && ds.pointsSeen == 0 {
		return errNothingRead
	}
	return nil
}

// fmtMs formats a duration in milliseconds.
func fmtMs(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0fms", v)
	}
	return fmt.Sprintf("%.3gms", v)
}

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
	Step               string         `json:"step"`
	Source             string         `json:"source"` // traces or metrics
	Attempts           uint64         `json:"attempts"`
	Successes          uint64         `json:"successes"`
	Errors             uint64         `json:"errors"`
	CeilingTimeouts    uint64         `json:"ceiling_timeouts"`
	DeadlineCuts       uint64         `json:"deadline_cuts"`
	SuccessRate        float64        `json:"success_rate"`
	CeilingTimeoutRate float64        `json:"ceiling_timeout_rate"`
	QuantilesMs        map[string]any `json:"quantiles_ms"` // p50, p90, p99, p99.9: a number, or null when above the cuts
	Verdicts           map[string]int `json:"verdicts,omitempty"`
	CurrentCeilingMs   float64        `json:"current_ceiling_ms,omitempty"`
	SuggestedCeilingMs float64        `json:"suggested_ceiling_ms,omitempty"`
	Censored           bool           `json:"censored"`
	RaiseAboveMs       float64        `json:"raise_above_ms,omitempty"`
	NoSuggestion       string         `json:"no_suggestion,omitempty"` // why there is no suggested ceiling
	First              time.Time      `json:"first"`
	Last               time.Time      `json:"last"`

	data *stepData
	sug  learn.Suggestion
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
}

// report is everything budgetadvise prints.
type report struct {
	From   time.Time      `json:"from"`
	To     time.Time      `json:"to"`
	Steps  []stepReport   `json:"steps"`
	Budget *budgetReport  `json:"budget,omitempty"`
	Notes  []string       `json:"notes,omitempty"`
	Inputs map[string]int `json:"inputs"` // spans and metric points read
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
	for _, s := range rep.Steps {
		if s.First.IsZero() {
			continue
		}
		if rep.From.IsZero() || s.First.Before(rep.From) {
			rep.From = s.First
		}
		if s.Last.After(rep.To) {
			rep.To = s.Last
		}
	}
	rep.Budget = planBudget(ds, order, o)
	return rep
}

func stepAdvice(name, src string, sd *stepData, o options) stepReport {
	h := &sd.hist
	r := stepReport{
		Step: name, Source: src, Attempts: h.Samples, Successes: h.Successes, Errors: h.Errors(),
		CeilingTimeouts: h.CeilingTimeouts, DeadlineCuts: h.DeadlineCuts,
		SuccessRate:        float64(h.Successes) / float64(h.Samples),
		CeilingTimeoutRate: float64(h.CeilingTimeouts) / float64(h.Samples),
		QuantilesMs:        map[string]any{}, First: h.First, Last: h.Last, data: sd,
	}
	if len(sd.verdicts) > 0 {
		r.Verdicts = sd.verdicts
	}
	for _, p := range percentiles {
		if v, err := h.Quantile(p.q); err == nil {
			r.QuantilesMs[p.name] = ms(v)
		} else {
			r.QuantilesMs[p.name] = nil
		}
	}
	if c := mostCommon(sd.ceilings); c > 0 {
		r.CurrentCeilingMs = ms(c)
	}
	sug, err := learn.Suggest(name, h, o.suggest)
	r.sug = sug
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
	snap := &learn.Snapshot{Steps: map[string]*learn.Histogram{}}
	var plan []deadline.Policy
	br := &budgetReport{Source: src, Target: o.target}
	for _, name := range order {
		sd := steps[name]
		if sd == nil || sd.hist.Samples == 0 {
			continue
		}
		h := sd.hist
		snap.Steps[name] = &h
		p := deadline.Policy{Name: name, MaxAttempts: o.attempts,
			Backoff: deadline.Backoff{Base: o.backoffBase, Max: o.backoffMax, Jitter: deadline.JitterFull}}
		if t := ds.spans[name]; t != nil && t.maxAtt > 0 {
			p.MaxAttempts, p.Floor = t.maxAtt, t.floor
		}
		plan = append(plan, p)
		br.Steps = append(br.Steps, name)
	}
	var rec learn.Recorder
	rec.Merge(snap)
	b, err := rec.SuggestBudget(plan, learn.PlanOptions{SuggestOptions: o.suggest, Target: o.target})
	if err != nil {
		br.Error = err.Error()
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

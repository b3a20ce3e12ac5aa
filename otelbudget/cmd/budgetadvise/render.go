package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/deadlinebudget/budget/deadline/learn"
)

// barWidth is the width of the longest bar of the terminal histogram.
const barWidth = 40

func writeJSON(w io.Writer, rep report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func writeText(w io.Writer, rep report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "budgetadvise: %s, %s; data from %s to %s\n",
		plural(rep.Inputs["spans"], "attempt or call span"), plural(rep.Inputs["metric_points"], "attempt-duration point"),
		rep.From.UTC().Format(time.RFC3339), rep.To.UTC().Format(time.RFC3339))
	for _, s := range rep.Steps {
		fmt.Fprintf(&b, "\n%s (from %s)\n", s.Step, s.Source)
		if s.Attempts == 0 {
			fmt.Fprintf(&b, "  verdicts %s; %s\n", fmtCounts(s.Verdicts), s.NoSuggestion)
			continue
		}
		fmt.Fprintf(&b, "  attempts %d, success %.1f%%, errors %d; cut by a limit %d (%.1f%%: ceiling timeouts %d, deadline cuts %d)\n",
			s.Attempts, 100*s.SuccessRate, s.Errors, s.Attempts-s.Completed, 100*s.CensoredShare, s.CeilingTimeouts, s.DeadlineCuts)
		fmt.Fprintf(&b, "  completed attempts' own durations (%d): %s\n", s.Completed, fmtQuantiles(s.CompletedMs, "none"))
		if s.Completed == s.Attempts {
			fmt.Fprintf(&b, "  Kaplan–Meier estimate: the same, no attempt was cut\n")
		} else {
			fmt.Fprintf(&b, "  Kaplan–Meier estimate of all %d (a cut one counts as longer than its cut): %s\n",
				s.Attempts, fmtQuantiles(s.KaplanMeierMs, "unknown (above the cuts)"))
		}
		if len(s.Verdicts) > 0 {
			fmt.Fprintf(&b, "  verdicts %s\n", fmtCounts(s.Verdicts))
		}
		cur := "none seen"
		if s.CurrentCeilingMs > 0 {
			cur = fmtMs(s.CurrentCeilingMs)
		}
		var ne *learn.NotEnoughSamplesError
		switch {
		case errors.As(s.err, &ne):
			fmt.Fprintf(&b, "  ceiling: current %s, none suggested: %d of the %d attempts needed\n", cur, ne.Samples, ne.Min)
		case s.NoSuggestion != "":
			fmt.Fprintf(&b, "  ceiling: current %s, no suggestion: %s\n", cur, s.NoSuggestion)
		default:
			fmt.Fprintf(&b, "  ceiling: current %s, suggested %s (Kaplan–Meier p%g %s × %g)\n", cur, fmtMs(s.SuggestedCeilingMs),
				100*s.sug.Quantile, fmtMs(ms(s.sug.Estimate)), s.sug.Margin)
		}
		fmt.Fprintf(&b, "  window %s … %s\n", s.First.UTC().Format(time.RFC3339), s.Last.UTC().Format(time.RFC3339))
		if ne == nil {
			// Too few attempts draw a table of empty rows: none then.
			writeHistogram(&b, s)
		}
	}
	if m := rep.MoreRuns; m != nil {
		fmt.Fprintf(&b, "\nneed more runs: %s read, %q has %d of the %d attempts a suggestion needs: record about %d runs of the service (its spans, as your Collector exports them); for the demo's data, `%s` %s\n",
			plural(rep.Runs, "run"), m.Step, m.Have, m.Needed, m.Runs, m.Command, demoWhere)
	}
	if br := rep.Budget; br != nil {
		switch {
		case rep.MoreRuns != nil && br.Error != "":
			// The line above says why.
		case br.Error != "":
			fmt.Fprintf(&b, "\nplan %s (from %s): no budget: %s\n", strings.Join(br.Steps, " → "), br.Source, blockedBudget(rep))
		default:
			fmt.Fprintf(&b, "\nplan %s (from %s): suggested budget %s, P(success) %.4f (target %g)\n",
				strings.Join(br.Steps, " → "), br.Source, br.budget.Round(time.Millisecond), br.Success, br.Target)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fmtQuantiles formats the percentiles of q; those that are null (from
// the first on, above the cuts) are named together as unknown.
func fmtQuantiles(q map[string]any, unknown string) string {
	var known, missing []string
	for _, p := range percentiles {
		if v, ok := q[p.name].(float64); ok {
			known = append(known, p.name+" "+fmtMs(v))
		} else {
			missing = append(missing, p.name)
		}
	}
	if len(missing) > 0 {
		known = append(known, strings.Join(missing, ", ")+" "+unknown)
	}
	return strings.Join(known, ", ")
}

// writeHistogram draws s's durations, 4 bins per doubling, completed (█)
// and cut by a limit (░), marking the bins of the current and the
// suggested ceiling.
func writeHistogram(b *strings.Builder, s stepReport) {
	bins := s.data.bins
	if len(bins) == 0 {
		return
	}
	var top uint64
	for _, c := range bins {
		top = max(top, c[0]+c[1])
	}
	if z := bins[math.MinInt32]; z != nil { // zero durations
		writeBar(b, "0", z, top, "")
	}
	keys := slices.DeleteFunc(slices.Sorted(maps.Keys(bins)), func(k int32) bool { return k == math.MinInt32 })
	cur := displayBin(time.Duration(s.CurrentCeilingMs * 1e6))
	sug := displayBin(time.Duration(s.SuggestedCeilingMs * 1e6))
	var lo, hi int64 = math.MaxInt64, math.MinInt64
	if len(keys) > 0 {
		lo, hi = int64(keys[0]), int64(keys[len(keys)-1])
	}
	for _, c := range []struct {
		ms  float64
		bin int32
	}{{s.CurrentCeilingMs, cur}, {s.SuggestedCeilingMs, sug}} {
		if c.ms > 0 && c.bin != math.MinInt32 {
			lo, hi = min(lo, int64(c.bin)), max(hi, int64(c.bin))
		}
	}
	if hi-lo > 80 { // a range too wide to draw usefully: the top 80 bins
		lo = hi - 80
	}
	for i := lo; i <= hi; i++ {
		c := bins[int32(i)]
		if c == nil {
			c = new([2]uint64)
		}
		mark := ""
		if s.CurrentCeilingMs > 0 && int32(i) == cur {
			mark += " ◀ current " + fmtMs(s.CurrentCeilingMs)
		}
		if s.SuggestedCeilingMs > 0 && int32(i) == sug {
			mark += " ◀ suggested " + fmtMs(s.SuggestedCeilingMs)
		}
		writeBar(b, fmtMs(math.Exp2(float64(i+1)/4)/1e6), c, top, mark)
	}
}

// writeBar draws one bin: completed (█) then cut (░), scaled to top.
func writeBar(b *strings.Builder, label string, c *[2]uint64, top uint64, mark string) {
	full := int(math.Round(barWidth * float64(c[0]) / float64(top)))
	cut := int(math.Round(barWidth * float64(c[1]) / float64(top)))
	fmt.Fprintf(b, "  ≤%8s │%-*s %d%s\n", label, barWidth, strings.Repeat("█", full)+strings.Repeat("░", cut), c[0]+c[1], mark)
}
func fmtCounts(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

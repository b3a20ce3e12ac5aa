package main

import (
	"errors"
	"fmt"
	"html"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/deadlinebudget/budget/deadline/learn"
)

// The run report: one self-contained HTML page (inline CSS and SVG, no
// script, nothing fetched) with, per step, the attempts' latency
// distribution against the current and the suggested ceiling, the
// censored share and the verdicts; the data's date range; and the
// waterfall of the slowest and the failed runs, drawn as the demo's
// terminal waterfall is.

// reportCSS styles the page in light and dark mode (prefers-color-scheme);
// every colour is a variable, named by what it shows.
const reportCSS = `
:root{--bg:#fff;--fg:#1b1f24;--muted:#57606a;--rule:#d0d7de;--panel:#f6f8fa;
--ok:#1a7f37;--bad:#cf222e;--lease:#b6c2cf;--wait:#bf8700;--cut:#e5838a;--done:#4f8fd6;
--ceiling:#0550ae;--suggested:#8250df}
@media (prefers-color-scheme: dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;--rule:#30363d;--panel:#161b22;
--ok:#3fb950;--bad:#f85149;--lease:#3d4752;--wait:#d29922;--cut:#a4434b;--done:#388bfd;
--ceiling:#79c0ff;--suggested:#d2a8ff}}
*{box-sizing:border-box}
body{margin:0 auto;max-width:1240px;padding:20px;background:var(--bg);color:var(--fg);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid var(--rule);padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
.muted{color:var(--muted)}
.legend{display:flex;flex-wrap:wrap;gap:6px 18px;background:var(--panel);border:1px solid var(--rule);border-radius:6px;padding:8px 12px;margin:12px 0}
.legend span{display:inline-flex;align-items:center;gap:6px}
.sw{display:inline-block;width:18px;height:10px;border-radius:2px}
.steps{display:grid;grid-template-columns:repeat(auto-fill,minmax(390px,1fr));gap:12px}
.step{background:var(--panel);border:1px solid var(--rule);border-radius:6px;padding:10px 12px}
.step h3{margin-top:0}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
td,th{padding:2px 8px;text-align:left;vertical-align:middle}
th{color:var(--muted);font-weight:600}
.stats td:first-child{color:var(--muted);white-space:nowrap;padding-left:0}
.verdict-ok{color:var(--ok)}.verdict-bad{color:var(--bad)}
.wf{width:100%;margin:6px 0 4px;font-size:13px}
.wf td{border-top:1px solid var(--rule);white-space:nowrap}
.wf td.bar{width:46%;padding:0 4px}
.wf svg{display:block;width:100%;height:16px}
.run{margin-bottom:18px}
.axis{display:flex;justify-content:space-between;font-weight:400}
svg text{fill:var(--muted);font-size:11px}
`

// Colours by role, as CSS variables (the SVG uses them too).
const (
	colOK        = "var(--ok)"
	colBad       = "var(--bad)"
	colLease     = "var(--lease)"
	colWait      = "var(--wait)"
	colCut       = "var(--cut)"
	colDone      = "var(--done)"
	colCeiling   = "var(--ceiling)"
	colSuggested = "var(--suggested)"
)

// writeReport writes the HTML run report of rep and the runs of ds,
// drawing up to maxRuns failed and maxRuns of the slowest runs.
func writeReport(w io.Writer, rep report, ds *dataset, maxRuns int) error {
	var b strings.Builder
	e := html.EscapeString
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	b.WriteString("<meta name=\"color-scheme\" content=\"light dark\">\n<title>budgetadvise: run report</title>\n<style>")
	b.WriteString(reportCSS)
	b.WriteString("</style></head><body>\n<h1>Deadline budget: run report</h1>\n")
	runs := buildRuns(ds)
	fmt.Fprintf(&b, "<p class=\"muted\" id=\"range\">Data from <b>%s</b> to <b>%s</b> · %s · %s, %s.</p>\n",
		e(rep.From.UTC().Format(time.RFC3339)), e(rep.To.UTC().Format(time.RFC3339)), plural(len(runs), "run"),
		plural(rep.Inputs["spans"], "attempt or call span"), plural(rep.Inputs["metric_points"], "attempt-duration point"))
	writeLegend(&b)

	b.WriteString("<h2>Steps</h2>\n")
	if m := rep.MoreRuns; m != nil {
		fmt.Fprintf(&b, "<p id=\"more-runs\">Too few attempts to suggest a ceiling: %s has %d of the %d needed. Record about %d runs with <code>%s</code>.</p>\n",
			e(m.Step), m.Have, m.Needed, m.Runs, e(m.Command))
	}
	b.WriteString("<div class=\"steps\">\n")
	for _, s := range rep.Steps {
		writeStepPanel(&b, s)
	}
	b.WriteString("</div>\n")
	if br := rep.Budget; br != nil {
		if br.Error == "" {
			fmt.Fprintf(&b, "<p id=\"plan\">Plan %s (from %s): suggested budget <b>%s</b>, P(success) %.4f (target %g).</p>\n",
				e(strings.Join(br.Steps, " → ")), e(br.Source), e(fmtDur(br.budget)), br.Success, br.Target)
		} else if rep.MoreRuns == nil {
			fmt.Fprintf(&b, "<p id=\"plan\">Plan %s (from %s): no budget: %s</p>\n", e(strings.Join(br.Steps, " → ")), e(br.Source), e(br.Error))
		}
	}

	chosen := chooseRuns(runs, maxRuns)
	fmt.Fprintf(&b, "<h2>Runs</h2>\n<p class=\"muted\">The failed runs (up to %d, the slowest first) and the %d slowest of the others, of %s read. "+
		"Each row is an attempt, a backoff wait or a refusal, on one time axis spanning the run's budget.</p>\n",
		maxRuns, maxRuns, plural(len(runs), "run"))
	for _, r := range chosen {
		writeRunWaterfall(&b, r)
	}
	if len(chosen) == 0 {
		b.WriteString("<p>No run: the input holds no call spans (metrics alone do not tell runs apart).</p>\n")
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeLegend(b *strings.Builder) {
	b.WriteString("<div class=\"legend\" id=\"legend\"><b>Colours</b>\n")
	for _, l := range []struct{ col, what string }{
		{colDone, "completed attempts (histogram)"},
		{colCut, "attempts cut by a limit (histogram)"},
		{colCeiling, "current ceiling (solid line)"},
		{colSuggested, "suggested ceiling (dashed line)"},
		{colOK, "attempt time used, completed"},
		{colBad, "attempt time used, failed or cut; refusal ✕"},
		{colLease, "lease granted, not used"},
		{colWait, "backoff wait"},
	} {
		fmt.Fprintf(b, "<span><i class=\"sw\" style=\"background:%s\"></i>%s</span>\n", l.col, html.EscapeString(l.what))
	}
	b.WriteString("</div>\n")
}

// writeStepPanel writes a step's numbers and its latency histogram.
func writeStepPanel(b *strings.Builder, s stepReport) {
	e := html.EscapeString
	fmt.Fprintf(b, "<section class=\"step\" data-step=\"%s\" data-source=\"%s\"><h3>%s <span class=\"muted\">from %s</span></h3>\n",
		e(s.Step), e(s.Source), e(s.Step), e(s.Source))
	if s.Attempts == 0 {
		fmt.Fprintf(b, "<p>Verdicts %s; %s</p></section>\n", e(fmtCounts(s.Verdicts)), e(s.NoSuggestion))
		return
	}
	if s.data != nil && len(s.data.bins) > 0 {
		b.WriteString(histogramSVG(s))
	}
	b.WriteString("<table class=\"stats\">\n")
	row := func(k, v string) { fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td></tr>\n", e(k), v) }
	row("attempts", fmt.Sprintf("%d · success %.1f%% · errors %d", s.Attempts, 100*s.SuccessRate, s.Errors))
	row("cut by a limit", fmt.Sprintf("<b class=\"censored\">%.1f%%</b> (censored: ceiling timeouts %d, deadline cuts %d)", 100*s.CensoredShare, s.CeilingTimeouts, s.DeadlineCuts))
	row("completed, own", fmt.Sprintf("%s <span class=\"muted\">(%d attempts)</span>", e(fmtQuantiles(s.CompletedMs, "none")), s.Completed))
	if s.Completed == s.Attempts {
		row("Kaplan–Meier", "the same: no attempt was cut")
	} else {
		row("Kaplan–Meier, all", e(fmtQuantiles(s.KaplanMeierMs, "unknown (above the cuts)")))
	}
	cur := "none seen"
	if s.CurrentCeilingMs > 0 {
		cur = fmtMs(s.CurrentCeilingMs)
	}
	row("ceiling now", fmt.Sprintf("<b class=\"ceiling-current\">%s</b>", e(cur)))
	sug := e(shortNoSuggestion(s))
	if s.SuggestedCeilingMs > 0 {
		sug = fmt.Sprintf("<b class=\"ceiling-suggested\">%s</b> (Kaplan–Meier p%g %s × %g)", e(fmtMs(s.SuggestedCeilingMs)),
			100*s.sug.Quantile, e(fmtMs(ms(s.sug.Estimate))), s.sug.Margin)
	}
	row("suggested", sug)
	if len(s.Verdicts) > 0 {
		var vs []string
		for _, k := range slices.Sorted(maps.Keys(s.Verdicts)) {
			vs = append(vs, fmt.Sprintf("<span class=\"verdict %s\">%s %d</span>", verdictClass(k), e(k), s.Verdicts[k]))
		}
		row("verdicts", strings.Join(vs, " · "))
	}
	row("window", e(s.First.UTC().Format(time.RFC3339)+" … "+s.Last.UTC().Format(time.RFC3339)))
	b.WriteString("</table></section>\n")
}

// shortNoSuggestion says in a few words why s has no suggested ceiling.
func shortNoSuggestion(s stepReport) string {
	var ne *learn.NotEnoughSamplesError
	switch {
	case errors.As(s.err, &ne):
		return fmt.Sprintf("none: %d of the %d attempts needed", ne.Samples, ne.Min)
	case s.Censored:
		return fmt.Sprintf("none: %.1f%% of the attempts were cut, more than 1 − %g, so p%g is above the cut: raise the ceiling above %s",
			100*s.CensoredShare, s.sug.Quantile, 100*s.sug.Quantile, fmtMs(s.RaiseAboveMs))
	}
	return s.NoSuggestion
}

func verdictClass(v string) string {
	if v == "ok" {
		return "verdict-ok"
	}
	return "verdict-bad"
}

// histogramSVG draws s's attempt durations on a log axis (4 bins per
// doubling): completed and cut stacked, the current ceiling a solid line,
// the suggested one dashed.
func histogramSVG(s stepReport) string {
	bins := s.data.bins
	keys := slices.DeleteFunc(slices.Sorted(maps.Keys(bins)), func(k int32) bool { return k == math.MinInt32 })
	if len(keys) == 0 {
		return ""
	}
	lo, hi := int(keys[0]), int(keys[len(keys)-1])
	for _, c := range []float64{s.CurrentCeilingMs, s.SuggestedCeilingMs} {
		if c > 0 {
			k := int(displayBin(time.Duration(c * 1e6)))
			lo, hi = min(lo, k), max(hi, k)
		}
	}
	lo, hi = lo-1, hi+1
	if hi-lo > 72 {
		lo = hi - 72
	}
	var top uint64
	for _, c := range bins {
		top = max(top, c[0]+c[1])
	}
	// Bars between top and H-bottom, the ceilings' labels above them.
	const W, H, left, right, bottom, topPad = 400.0, 150.0, 30.0, 22.0, 18.0, 30.0
	n := float64(hi - lo + 1)
	bw := (W - left - right) / n
	x := func(bin float64) float64 { return left + (bin-float64(lo))*bw }
	y := func(v uint64) float64 { return (H - bottom - topPad) * float64(v) / float64(top) }
	var b strings.Builder
	fmt.Fprintf(&b, "<svg class=\"hist\" viewBox=\"0 0 %g %g\" width=\"100%%\" role=\"img\" aria-label=\"latency distribution of %s\">\n", W, H, html.EscapeString(s.Step))
	fmt.Fprintf(&b, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"var(--rule)\"/>\n", left, H-bottom, W, H-bottom)
	fmt.Fprintf(&b, "<text x=\"0\" y=\"%g\">%d</text><text x=\"0\" y=\"%g\">0</text>\n", topPad+4, top, H-bottom)
	for k := lo; k <= hi; k++ {
		c := bins[int32(k)]
		if c == nil {
			continue
		}
		h0, h1 := y(c[0]), y(c[1])
		if c[0] > 0 {
			fmt.Fprintf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>", x(float64(k)), H-bottom-h0, bw-1, h0, colDone)
		}
		if c[1] > 0 {
			fmt.Fprintf(&b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>", x(float64(k)), H-bottom-h0-h1, bw-1, h1, colCut)
		}
	}
	b.WriteString("\n")
	// Axis labels at each doubling: bin k covers durations up to 2^((k+1)/4) ns.
	for k := lo; k <= hi; k++ {
		if (k+1)%4 != 0 {
			continue
		}
		if (hi-lo) > 24 && (k+1)%8 != 0 {
			continue
		}
		fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%s</text>", x(float64(k+1)), H-5, fmtMs(math.Exp2(float64(k+1)/4)/1e6))
	}
	b.WriteString("\n")
	// A ceiling at c ms sits at fractional bin log2(c ns) × 4 - 1, the
	// right edge of the bin that holds it.
	mark := func(c float64, col, dash, label string, row int) {
		if c <= 0 {
			return
		}
		px := x(4 * math.Log2(c*1e6)) // the bin edges are 2^(k/4)
		fmt.Fprintf(&b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%g\" stroke=\"%s\" stroke-width=\"2\"%s/>", px, 14*row+2, px, H-bottom, col, dash)
		anchor := "start"
		tx := px + 4
		if px > W-110 {
			anchor, tx = "end", px-4
		}
		fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"%s\" style=\"fill:%s\">%s %s</text>\n", tx, 12+14*row, anchor, col, label, fmtMs(c))
	}
	mark(s.CurrentCeilingMs, colCeiling, "", "current", 0)
	mark(s.SuggestedCeilingMs, colSuggested, " stroke-dasharray=\"5 3\"", "suggested", 1)
	b.WriteString("</svg>\n")
	return b.String()
}

// writeRunWaterfall writes one run as the terminal waterfall draws it: a
// row per attempt (its lease, the time it used, how it ended, which limit
// set the lease), a row per backoff wait, a row per refusal, then each
// call's verdict and which deadline bound it.
func writeRunWaterfall(b *strings.Builder, r runView) {
	e := html.EscapeString
	budget := r.budget
	if budget <= 0 {
		budget = r.used
	}
	outcomeClass := verdictClass(r.outcome)
	fmt.Fprintf(b, "<section class=\"run\" data-trace=\"%x\"><h3>Run %x… <span class=\"verdict %s\">%s</span> "+
		"<span class=\"muted\">· started %s · budget %s · used %s</span></h3>\n",
		r.trace[:], r.trace[:4], outcomeClass, e(r.outcome), e(r.origin.UTC().Format("2006-01-02 15:04:05.000")), e(fmtDur(r.budget)), e(fmtDur(r.used)))
	if r.exhausted != "" {
		fmt.Fprintf(b, "<p>The budget was exhausted at <b>%s</b>.</p>\n", e(r.exhausted))
	}
	b.WriteString("<table class=\"wf\"><tr><th>step</th><th>try</th><th>lease, set by</th><th>used</th><th>ended</th><th class=\"bar\">")
	b.WriteString(axisLabels(budget))
	b.WriteString("</th></tr>\n")
	for _, c := range r.calls {
		name := c.step
		for _, a := range c.attempts {
			col := colBad
			if a.endedBy == "completed" {
				col = colOK
			}
			bar := newSVGBar(budget)
			if a.granted > a.used {
				bar.rect(a.start, a.granted, colLease)
			}
			bar.rect(a.start, a.used, col)
			lease := fmtDur(a.granted)
			if a.limitedBy != "" {
				lease += ", " + a.limitedBy
			}
			fmt.Fprintf(b, "<tr class=\"attempt\" data-step=\"%s\"><td>%s</td><td>#%d</td><td>%s</td><td>%s</td><td>%s</td><td class=\"bar\">%s</td></tr>\n",
				e(c.step), e(name), a.number, e(lease), e(fmtDur(a.used)), e(a.endedBy), bar.svg())
			name = ""
			if a.hasWait {
				wb := newSVGBar(budget)
				ended := ""
				from := a.start + a.used
				if a.waitFits {
					wb.rect(from, a.wait, colWait)
				} else {
					wb.cross(from, colBad)
					ended = "did not fit"
				}
				src := "backoff"
				if a.waitFrom == "retry_after" {
					src = "retry-after"
				}
				fmt.Fprintf(b, "<tr class=\"wait\"><td></td><td>wait</td><td>%s %s</td><td></td><td>%s</td><td class=\"bar\">%s</td></tr>\n",
					e(fmtDur(a.wait)), src, ended, wb.svg())
			}
		}
		if c.reason == "refused" {
			rb := newSVGBar(budget)
			rb.cross(c.end, colBad)
			left := ""
			if c.hasLeft {
				left = fmtDur(c.left) + " left"
			}
			fmt.Fprintf(b, "<tr class=\"refusal\"><td>%s</td><td>–</td><td>refused</td><td></td><td>%s</td><td class=\"bar\">%s</td></tr>\n",
				e(name), e(left), rb.svg())
		}
	}
	b.WriteString("</table>\n<table class=\"verdicts\">\n")
	for _, c := range r.calls {
		fmt.Fprintf(b, "<tr class=\"call\"><td>%s</td><td class=\"verdict %s\">%s</td><td>%s after %s</td><td class=\"muted\">bound by %s</td></tr>\n",
			e(c.step), verdictClass(c.verdict), e(c.verdict), e(c.reason), plural(len(c.attempts), "attempt"), e(c.boundBy))
	}
	b.WriteString("</table></section>\n")
}

// axisLabels labels the waterfall's time axis at 0, ¼, ½, ¾ and the
// whole budget.
func axisLabels(budget time.Duration) string {
	var b strings.Builder
	b.WriteString("<div class=\"axis\">")
	for k := 0; k <= 4; k++ {
		fmt.Fprintf(&b, "<span>%s</span>", html.EscapeString(fmtDur(budget*time.Duration(k)/4)))
	}
	b.WriteString("</div>")
	return b.String()
}

// svgBar is one waterfall row's time axis, spanning [0, budget].
type svgBar struct {
	budget time.Duration
	parts  strings.Builder
}

func newSVGBar(budget time.Duration) *svgBar { return &svgBar{budget: budget} }

// pos is t's place on a 1000-wide axis, clamped to it.
func (s *svgBar) pos(t time.Duration) float64 {
	if s.budget <= 0 {
		return 0
	}
	return math.Max(0, math.Min(1000, 1000*float64(t)/float64(s.budget)))
}

// rect marks [from, from+d), at least one unit wide.
func (s *svgBar) rect(from, d time.Duration, col string) {
	x0, x1 := s.pos(from), s.pos(from+d)
	fmt.Fprintf(&s.parts, "<rect x=\"%.1f\" y=\"2\" width=\"%.1f\" height=\"12\" rx=\"1\" fill=\"%s\"/>", x0, math.Max(1.5, x1-x0), col)
}

// cross marks the instant at with ✕.
func (s *svgBar) cross(at time.Duration, col string) {
	x := s.pos(at)
	fmt.Fprintf(&s.parts, "<path d=\"M%.1f 3 l8 10 M%.1f 3 l-8 10\" transform=\"translate(-4 0)\" stroke=\"%s\" stroke-width=\"2\"/>", x+4, x+4, col)
}

func (s *svgBar) svg() string {
	return "<svg viewBox=\"0 0 1000 16\" preserveAspectRatio=\"none\"><rect x=\"0\" y=\"7.5\" width=\"1000\" height=\"1\" fill=\"var(--rule)\"/>" +
		s.parts.String() + "</svg>"
}

// fmtDur formats d rounded to the millisecond, as the demo's waterfall.
func fmtDur(d time.Duration) string {
	r := d.Round(time.Millisecond)
	switch {
	case r == 0 && d > 0:
		return "<1ms"
	case r == 0:
		return "0ms"
	}
	return r.String()
}

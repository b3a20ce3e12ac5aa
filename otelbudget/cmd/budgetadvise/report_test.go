package main

import (
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The report page's content, checked on the generated HTML: what a reader
// needs without a browser (the layout is TestReportInBrowser's).

// throttledRun is the demo's ratelimited scenario: fetch answers 429 with
// Retry-After 1s, which fits, then 429 with Retry-After 5s, which does not
// fit in what is left of the 3s budget; extract then runs and succeeds.
func throttledRun(start time.Time) genRun {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	return genRun{instance: "agent-t", start: start, budget: 3 * time.Second, outcome: "budget_exhausted", exhaustedBy: "fetch",
		calls: []genCall{
			{step: "search", ceiling: ms(250), maxAttempts: 2, start: 0, end: ms(12), remaining: 3 * time.Second, reason: "success", verdict: "ok",
				attempts: []genAttempt{{number: 1, used: ms(12), granted: ms(250), limit: "ceiling", ended: "completed"}}},
			{step: "fetch", ceiling: ms(100), maxAttempts: 3, start: ms(12), end: ms(1030), remaining: ms(2988), reason: "retry_after_exceeds_budget", verdict: "throttled",
				attempts: []genAttempt{
					{number: 1, start: ms(12), used: ms(8), granted: ms(100), limit: "ceiling", ended: "error", status: 429, wait: time.Second, fits: true, after: true},
					{number: 2, start: ms(1020), used: ms(9), granted: ms(100), limit: "ceiling", ended: "error", status: 429, wait: 5 * time.Second, fits: false, after: true},
				}},
			{step: "extract", ceiling: ms(200), maxAttempts: 2, start: ms(1030), end: ms(1211), remaining: ms(1970), reason: "success", verdict: "ok",
				attempts: []genAttempt{{number: 1, start: ms(1030), used: ms(181), granted: ms(200), limit: "ceiling", ended: "completed"}}},
		}}
}

// refusedRun is the demo's refused scenario (a 10ms budget, below the
// floor: every step refused), without a run span: its outcome is derived.
func refusedRun(start time.Time) genRun {
	r := genRun{instance: "agent-r", start: start, budget: 10 * time.Millisecond, outcome: "budget_exhausted", noRunSpan: true}
	for _, s := range genPlan {
		r.calls = append(r.calls, genCall{step: s.name, ceiling: s.ceiling, maxAttempts: s.maxAttempts, remaining: 10 * time.Millisecond,
			reason: "refused", verdict: "deadline_too_small"})
	}
	return r
}

// reportOf writes runs as traces and returns budgetadvise's report page of
// them, with the input's path.
func reportOf(t *testing.T, runs []genRun, args ...string) (page, input string) {
	t.Helper()
	out, input := reportFile(t, runs, args...)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	return string(b), input
}

// reportFile writes runs as traces and budgetadvise's report page of them,
// and returns both paths.
func reportFile(t *testing.T, runs []genRun, args ...string) (page, input string) {
	t.Helper()
	input = writeFile(t, traceLines(t, runs, 100)...)
	page = filepath.Join(t.TempDir(), "report.html")
	code, _, errOut := runCmd(t, append(append([]string{"-report", page}, args...), input)...)
	require.Equal(t, 0, code, errOut)
	return page, input
}

// mixedRuns are 1200 runs of the generated plan (every 97th finding fetch
// down), the throttled run and the refused run.
func mixedRuns() []genRun {
	runs := genRuns("agent-a", 1, 1200, 97, t0)
	return append(runs, throttledRun(t0.Add(time.Hour)), refusedRun(t0.Add(time.Hour+time.Minute)))
}

// fewRuns are 20 runs of the generated plan, the throttled run and the
// refused run: every failed run is drawn.
func fewRuns() []genRun {
	runs := genRuns("agent-a", 1, 20, 0, t0)
	return append(runs, throttledRun(t0.Add(time.Hour)), refusedRun(t0.Add(time.Hour+time.Minute)))
}

// section returns the HTML of the run section of trace id hex.
func runSection(t *testing.T, page, hex string) string {
	t.Helper()
	i := strings.Index(page, `data-trace="`+hex+`"`)
	require.GreaterOrEqual(t, i, 0, "run %s drawn", hex)
	j := strings.Index(page[i:], "</section>")
	require.Greater(t, j, 0)
	return page[i : i+j]
}

// traceHex is the trace id writeRun gives the run at index id.
func traceHex(r genRun, id uint64) string {
	tr := [16]byte{byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id), 0xad, 0x71, 0x5e}
	copy(tr[8:], r.instance)
	return fmt.Sprintf("%x", tr[:])
}

var tagRE = regexp.MustCompile(`<[^>]*>`)

// text is html without its tags.
func text(s string) string { return html.UnescapeString(tagRE.ReplaceAllString(s, "")) }

// The refusal mark is a cross: two strokes from different points that
// cross each other (it was Λ: both started at the same point).
func TestReportRefusalMarkIsACross(t *testing.T) {
	runs := fewRuns()
	page, _ := reportOf(t, runs)
	for _, c := range []struct {
		run int
		row string
	}{{len(runs) - 1, `class="refusal"`}, {len(runs) - 2, "did not fit"}} {
		sec := runSection(t, page, traceHex(runs[c.run], uint64(c.run)))
		i := strings.Index(sec, c.row)
		require.GreaterOrEqual(t, i, 0, "a row with %s", c.row)
		m := regexp.MustCompile(`<path[^>]* d="([^"]*)"`).FindStringSubmatch(sec[i:])
		require.NotNil(t, m, "the mark is a path")
		checkCross(t, m[1])
	}
}

// checkCross checks that the path d draws ✕: two strokes from different
// points that cross each other, drawn square.
func checkCross(t *testing.T, d string) {
	t.Helper()
	m := []string{"", d}
	strokes := parseStrokes(t, m[1])
	require.Len(t, strokes, 2, "two strokes: %s", m[1])
	a, b := strokes[0], strokes[1]
	assert.NotEqual(t, a[0], b[0], "the strokes start at different points (Λ otherwise): %s", m[1])
	assert.True(t, segmentsCross(a, b), "the strokes cross: %s", m[1])
	w, h := math.Abs(a[1][0]-a[0][0]), math.Abs(a[1][1]-a[0][1])
	assert.InDelta(t, 1, w/h, 0.01, "drawn square: %s", m[1])
}

// parseStrokes reads a path of "M x y l dx dy" or "M x y L x y" strokes
// into their end points.
func parseStrokes(t *testing.T, d string) [][2][2]float64 {
	t.Helper()
	var out [][2][2]float64
	var cur [2]float64
	for _, m := range regexp.MustCompile(`([MLl])\s*(-?[\d.]+)[\s,]+(-?[\d.]+)`).FindAllStringSubmatch(d, -1) {
		x, err1 := strconv.ParseFloat(m[2], 64)
		y, err2 := strconv.ParseFloat(m[3], 64)
		require.NoError(t, err1, d)
		require.NoError(t, err2, d)
		switch m[1] {
		case "M":
			cur = [2]float64{x, y}
		case "L":
			out = append(out, [2][2]float64{cur, {x, y}})
		case "l":
			out = append(out, [2][2]float64{cur, {cur[0] + x, cur[1] + y}})
		}
	}
	return out
}

// segmentsCross reports whether the segments a and b cross inside both.
func segmentsCross(a, b [2][2]float64) bool {
	cross := func(o, p, q [2]float64) float64 { return (p[0]-o[0])*(q[1]-o[1]) - (p[1]-o[1])*(q[0]-o[0]) }
	d1, d2 := cross(a[0], a[1], b[0]), cross(a[0], a[1], b[1])
	d3, d4 := cross(b[0], b[1], a[0]), cross(b[0], b[1], a[1])
	return d1*d2 < 0 && d3*d4 < 0
}

// roundMs reports whether a tick label ("20ms", "1s", "500µs") is 1, 2 or
// 5 times a power of ten, and returns its value in ms.
func roundMs(label string) (float64, bool) {
	d, err := time.ParseDuration(strings.ReplaceAll(label, " ", ""))
	if err != nil {
		return 0, false
	}
	v := float64(d) / 1e6
	if v == 0 {
		return 0, true
	}
	e := math.Floor(math.Log10(v) + 1e-9)
	m := v / math.Pow(10, e)
	for _, r := range []float64{1, 2, 5, 10} {
		if math.Abs(m-r) < 1e-6 {
			return v, true
		}
	}
	return v, false
}

// The histograms: a titled, labelled log scale in ms, round ticks, a
// titled y axis with more than its maximum, and one time axis shared by
// every card.
func TestReportHistogramAxes(t *testing.T) {
	page, _ := reportOf(t, mixedRuns())
	hists := regexp.MustCompile(`(?s)<svg class="hist".*?</svg>`).FindAllString(page, -1)
	require.GreaterOrEqual(t, len(hists), 3, "a histogram per step")
	tickRE := regexp.MustCompile(`<text[^>]*class="xtick"[^>]*>([^<]*)</text>`)
	var first []string
	for i, h := range hists {
		var ticks []string
		for _, m := range tickRE.FindAllStringSubmatch(h, -1) {
			ticks = append(ticks, m[1])
			_, ok := roundMs(m[1])
			assert.True(t, ok, "tick %q is round", m[1])
		}
		assert.GreaterOrEqual(t, len(ticks), 3, "x ticks of card %d", i)
		if i == 0 {
			first = ticks
		} else {
			assert.Equal(t, first, ticks, "card %d shares the first card's time axis", i)
		}
		assert.Contains(t, h, "attempt duration (ms, log scale)", "the x axis is titled with its unit and scale")
		assert.Contains(t, h, `class="ytitle"`, "the y axis is titled")
		assert.GreaterOrEqual(t, strings.Count(h, `class="ytick"`), 3, "the y axis has ticks besides its maximum")
	}
}

// The waterfall's ticks are round: equally spaced by 1, 2 or 5 times a
// power of ten, for the 10ms budget as for the 3s one.
func TestReportWaterfallTicksRound(t *testing.T) {
	runs := fewRuns()
	page, _ := reportOf(t, runs)
	for _, i := range []int{len(runs) - 1, len(runs) - 2} {
		sec := runSection(t, page, traceHex(runs[i], uint64(i)))
		m := regexp.MustCompile(`(?s)<div class="axis"[^>]*>(.*?)</div>`).FindStringSubmatch(sec)
		require.NotNil(t, m)
		var vals []float64
		for _, l := range regexp.MustCompile(`<span[^>]*>([^<]*)</span>`).FindAllStringSubmatch(m[1], -1) {
			d, err := time.ParseDuration(l[1])
			require.NoError(t, err, l[1])
			vals = append(vals, float64(d)/1e6)
		}
		require.GreaterOrEqual(t, len(vals), 3, "ticks of %s", runs[i].budget)
		step := vals[1] - vals[0]
		_, round := roundMs(time.Duration(math.Round(step * 1e6)).String())
		assert.True(t, round, "the ticks' step %gms is 1, 2 or 5 times a power of ten (budget %s)", step, runs[i].budget)
		for k := 1; k < len(vals); k++ {
			assert.InDelta(t, step, vals[k]-vals[k-1], 1e-9, "equally spaced: %v", vals)
		}
		assert.LessOrEqual(t, vals[len(vals)-1], float64(runs[i].budget)/1e6, "no tick past the budget")
	}
}

// One outcome vocabulary: the run outcome is the deadline.run.outcome
// attribute's (derived the same way when there is no run span), the
// call verdicts deadline.verdict's, each word on the page explained once;
// the run says what happened (the Retry-After that did not fit).
func TestReportOutcomeVocabulary(t *testing.T) {
	runs := fewRuns()
	page, _ := reportOf(t, runs)
	gl := regexp.MustCompile(`(?s)<dl id="outcomes".*?</dl>`).FindString(page)
	require.NotEmpty(t, gl, "the outcomes are explained on the page")
	words := map[string]bool{}
	for _, m := range regexp.MustCompile(`class="outcome[^"]*"[^>]*>([a-z_]+)<`).FindAllStringSubmatch(page, -1) {
		words[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`class="verdict[^"]*"[^>]*>([a-z_]+)<`).FindAllStringSubmatch(page, -1) {
		words[m[1]] = true
	}
	require.NotEmpty(t, words)
	for w := range words {
		assert.Equal(t, 1, strings.Count(gl, "<dt>"+w+"</dt>"), "%q explained once", w)
	}
	assert.NotContains(t, words, "failed run", "no second word for a failed run")

	thr := runSection(t, page, traceHex(runs[len(runs)-2], uint64(len(runs)-2)))
	assert.Regexp(t, `class="outcome bad"[^>]*>throttled<`, thr, "labelled by what stopped it (TestReportLabelsARunByWhatStoppedIt)")
	assert.Contains(t, text(thr), "Retry-After 5s did not fit", "what exhausted the budget")
	ref := runSection(t, page, traceHex(runs[len(runs)-1], uint64(len(runs)-1)))
	assert.Contains(t, ref, `title="deadline.run.outcome: budget_exhausted"`, "derived as otelbudget does: every step refused")
}

// An attempt that ended with an HTTP status shows the status, as the
// terminal does, not "error".
func TestReportKeepsHTTPStatus(t *testing.T) {
	runs := fewRuns()
	page, _ := reportOf(t, runs)
	thr := runSection(t, page, traceHex(runs[len(runs)-2], uint64(len(runs)-2)))
	rows := regexp.MustCompile(`(?s)<tr class="attempt" data-step="fetch".*?</tr>`).FindAllString(thr, -1)
	require.Len(t, rows, 2)
	for _, r := range rows {
		assert.Contains(t, text(r), "HTTP 429")
	}
}

// Each run shows its full trace id, selectable as one token, and its start
// time with its time zone.
func TestReportTraceIDAndTimeZone(t *testing.T) {
	runs := fewRuns()
	page, _ := reportOf(t, runs)
	hex := traceHex(runs[len(runs)-2], uint64(len(runs)-2))
	sec := runSection(t, page, hex)
	assert.Contains(t, sec, `<code class="trace-id">`+hex+`</code>`, "the full trace id, copyable")
	assert.Regexp(t, `class="run-start[^"]*">\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z<`, sec, "the start time's zone")
	assert.Contains(t, page, ".trace-id{", "the trace id is styled (selectable as one token)")
}

// The verdicts: one compact line per run, "bound by the run's deadline"
// said once on the page, not on every call.
func TestReportVerdictsCompact(t *testing.T) {
	runs := fewRuns()
	page, _ := reportOf(t, runs)
	assert.LessOrEqual(t, strings.Count(page, "bound by the run"), 1, "said once")
	thr := runSection(t, page, traceHex(runs[len(runs)-2], uint64(len(runs)-2)))
	assert.NotContains(t, thr, `<table class="verdicts"`, "no table of verdicts as tall as the waterfall")
	assert.Equal(t, 1, strings.Count(thr, `class="verdicts"`), "one verdict line")
}

// The suggestion stands beside the configured value, and what blocks one
// is said in words, with no error chain.
func TestReportSuggestionBesideConfigured(t *testing.T) {
	page, _ := reportOf(t, mixedRuns())
	for _, step := range []string{"search", "fetch", "extract"} {
		card := regexp.MustCompile(`(?s)<section class="step" data-step="` + step + `".*?</section>`).FindString(page)
		require.NotEmpty(t, card, step)
		row := regexp.MustCompile(`(?s)<tr class="ceiling">.*?</tr>`).FindString(card)
		require.NotEmpty(t, row, "%s: one row with the configured and the suggested ceiling", step)
		assert.Contains(t, row, `class="ceiling-current"`, step)
		assert.Contains(t, row, "configured", step)
	}
	plan := regexp.MustCompile(`(?s)<div id="plan".*?</div>`).FindString(page)
	require.NotEmpty(t, plan, "the plan's budget, near the top")
	assert.Less(t, strings.Index(page, `id="plan"`), strings.Index(page, `class="step"`), "above the cards")
	assert.Contains(t, text(plan), "configured 1s", "the runs' budget")

	// fetch cut too often to know its p99: no suggested budget, said in words.
	slow := append([]genStep(nil), genPlan...)
	slow[1].median = 80 * time.Millisecond
	page, _ = reportOf(t, genRunsPlan(slow, "agent-s", 4, 1200, 0, t0))
	plan = regexp.MustCompile(`(?s)<div id="plan".*?</div>`).FindString(page)
	require.NotEmpty(t, plan)
	assert.NotContains(t, page, "learn:", "no raw error chain")
	assert.NotContains(t, page, "plan step", "no raw error chain")
	assert.Contains(t, text(plan), "fetch", "which step blocks the budget")
	assert.Contains(t, text(plan), "raise its ceiling above", "what to do")
}

// The terms of the page are explained on it.
func TestReportExplainsTerms(t *testing.T) {
	page, _ := reportOf(t, mixedRuns())
	for _, term := range []string{"completed, own", "Kaplan–Meier", "censored"} {
		assert.Regexp(t, `<dt><dfn[^>]*>`+regexp.QuoteMeta(term)+`</dfn></dt>\s*<dd>[^<]{40,}`, page, "%q defined", term)
	}
}

// A date is never broken across lines: each timestamp is one nowrap token.
func TestReportTimestampsDoNotWrap(t *testing.T) {
	page, _ := reportOf(t, mixedRuns())
	body := page[strings.Index(page, "<body"):]
	stamps := regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?Z`).FindAllStringIndex(body, -1)
	require.NotEmpty(t, stamps)
	for _, s := range stamps {
		before := body[max(0, s[0]-40):s[0]]
		assert.Regexp(t, `<(span|time)[^>]*class="[^"]*\bts\b[^"]*"[^>]*>$`, before, "%s is a nowrap token", body[s[0]:s[1]])
	}
	assert.Regexp(t, `\.ts\{[^}]*white-space:nowrap`, page)
}

// The page says where it comes from: when it was generated, from which
// input files, by which version of the tool.
func TestReportProvenance(t *testing.T) {
	page, input := reportOf(t, mixedRuns())
	prov := regexp.MustCompile(`(?s)<p id="provenance".*?</p>`).FindString(page)
	require.NotEmpty(t, prov)
	assert.Regexp(t, `Generated <time class="ts"[^>]*>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z</time>`, prov)
	assert.Contains(t, text(prov), filepath.Base(input))
	assert.Regexp(t, `budgetadvise [^ <]+`, text(prov), "the tool's version")
}

// Data from a learning run (ceilings opened to the budget) beside runs
// under the configured ceilings (as make advise records them): the page
// shows the configured ceilings, not the opened ones, and says in one line
// where the data came from.
func TestReportConfiguredCeilingsWithLearningRuns(t *testing.T) {
	open := append([]genStep(nil), genPlan...)
	for i := range open {
		open[i].ceiling = time.Second
	}
	runs := append(genRunsPlan(open, "agent-l", 5, 2000, 0, t0.Add(-time.Hour)), fewRuns()...)
	page, input := reportOf(t, runs)
	rep := adviseJSON(t, input)
	assert.Equal(t, 2000, rep.OpenedRuns)
	fetch := stepOf(t, rep, "fetch", "traces")
	assert.Equal(t, 100.0, fetch.CurrentCeilingMs, "the configured ceiling")
	assert.Equal(t, 1000.0, fetch.OpenedCeilingMs, "the learning runs' opened ceiling")
	for step, want := range map[string]string{"search": "250ms", "fetch": "100ms", "extract": "200ms"} {
		card := regexp.MustCompile(`(?s)<section class="step" data-step="` + step + `".*?</section>`).FindString(page)
		require.NotEmpty(t, card)
		m := regexp.MustCompile(`class="ceiling-current">([^<]*)<`).FindStringSubmatch(card)
		require.NotNil(t, m, step)
		assert.Equal(t, want, m[1], "%s: the configured ceiling, not the learning runs' opened one", step)
		assert.Contains(t, card, `class="ceiling-suggested"`, step)
	}
	assert.Equal(t, 1, strings.Count(page, `id="opened"`))
	opened := regexp.MustCompile(`(?s)<p id="opened".*?</p>`).FindString(page)
	assert.Contains(t, text(opened), "learning run")
	assert.Contains(t, text(opened), "2000 of 2022 runs")
	assert.NotContains(t, strings.TrimSpace(text(opened)), "\n", "one line")
}

// With no failed run, the page says so instead of a heading about failed
// runs over green ones.
func TestReportSaysWhenNoRunFailed(t *testing.T) {
	page, _ := reportOf(t, genRuns("agent-b", 2, 50, 0, t0))
	assert.Contains(t, page, `<p id="no-failed">`)
	assert.Contains(t, text(page), "No run failed")
}

// A step cut by the run's deadline (not by its ceiling) too often for its
// p99: the page and the terminal say so in words, and do not advise raising
// a ceiling that cut nothing.
func TestBlockedByDeadlineCutsInWords(t *testing.T) {
	open := append([]genStep(nil), genPlan...)
	for i := range open {
		open[i].ceiling = time.Second
	}
	open[1].median, open[1].sigma = 400*time.Millisecond, 0.5
	runs := genRunsPlan(open, "agent-l", 6, 1500, 0, t0)
	page, input := reportOf(t, runs)
	plan := regexp.MustCompile(`(?s)<div id="plan".*?</div>`).FindString(page)
	require.NotEmpty(t, plan)
	assert.Contains(t, text(plan), "cut by the run's deadline too often")
	assert.NotContains(t, text(plan), "raise its ceiling")
	assert.NotContains(t, page, "learn:", "no raw error chain")
	code, out, errOut := runCmd(t, input)
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, out, "no budget: learn:", "the terminal says it in words too")
	assert.Contains(t, out, "cut by the run's deadline too often")
}

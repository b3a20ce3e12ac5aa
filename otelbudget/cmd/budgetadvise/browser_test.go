package main

import (
	"cmp"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// chromiumPath is where Debian's chromium package installs the browser
// (`make browser`); a variable for TestNeedChromiumSkipsOutsideCI.
var chromiumPath = "/usr/bin/chromium"

// screenshotEnv, when set to a path, makes TestReportInBrowser write a
// screenshot of the generated data's report there (docs/run-report.png is
// instead the page make advise RUNS=2000 writes: docs/ceilings.md).
const screenshotEnv = "BUDGETADVISE_SCREENSHOT"

// needChromium returns the browser's path. Without it the test skips,
// saying why, unless CI is set: there a missing browser is a failure.
func needChromium(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing and CI is set: `make browser` installs Debian's chromium package (%v)", chromiumPath, err)
		}
		t.Skipf("%s is missing: `make browser` installs Debian's chromium package; skipped outside CI (%v)", chromiumPath, err)
	}
	return chromiumPath
}

// browser starts headless Chromium, offline and with a fresh profile, and
// returns a tab's context; everything stops at the test's end.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(needChromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1500),
	}
	before := goleak.IgnoreCurrent() // the goroutines running before the browser
	ctx, cancelTimeout := context.WithTimeout(context.Background(), 2*time.Minute)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tab, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		cancelTimeout()
		goleak.VerifyNone(t, before) // the browser and its readers are gone
	})
	return tab
}

// expectedRows returns the attempt rows the report draws of runs: the
// failed runs (up to n: the slowest of each kind, then the slowest) and
// the n slowest others.
func expectedRows(runs []genRun, n int) (rows int, chosen []genRun) {
	used := func(r genRun) time.Duration { return r.calls[len(r.calls)-1].end }
	var failed, ok []genRun
	for _, r := range runs {
		bad := r.outcome != "ok"
		for _, c := range r.calls {
			bad = bad || c.verdict != "ok"
		}
		if bad {
			failed = append(failed, r)
		} else {
			ok = append(ok, r)
		}
	}
	slowest := func(a, b genRun) int { return cmp.Compare(used(b), used(a)) }
	slices.SortStableFunc(failed, slowest)
	slices.SortStableFunc(ok, slowest)
	// One failed run of each kind (outcome and failed verdicts) first.
	var first, rest []genRun
	seen := map[string]bool{}
	for _, r := range failed {
		k := r.outcome
		for _, c := range r.calls {
			if c.verdict != "ok" {
				k += " " + c.step + "=" + c.verdict
			}
		}
		if !seen[k] {
			seen[k] = true
			first = append(first, r)
		} else {
			rest = append(rest, r)
		}
	}
	failed = append(first, rest...)
	chosen = append(failed[:min(n, len(failed))], ok[:min(n, len(ok))]...)
	for _, r := range chosen {
		for _, c := range r.calls {
			rows += len(c.attempts)
		}
	}
	return rows, chosen
}

// The report in a real browser: it loads with no console error and no
// request (self-contained), has one waterfall row per attempt of the runs
// drawn, shows the verdicts and the ceilings, and follows the dark mode.
func TestReportInBrowser(t *testing.T) {
	tab := browser(t)
	g := newGenSet(t)
	page := filepath.Join(t.TempDir(), "report.html")
	code, _, errOut := runCmd(t, "-report", page, "-report-runs", "3", g.traces, g.metrics)
	require.Equal(t, 0, code, errOut)
	rows, chosen := expectedRows(g.runs, 3)
	require.Len(t, chosen, 6)

	var mu sync.Mutex
	var problems, requests []string
	require.NoError(t, chromedp.Listen(tab, func(ev any) {
		// Runs in the tab's loop: record, and return.
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == "error" || ev.Type == "warning" || ev.Type == "assert" {
				problems = append(problems, "console "+string(ev.Type))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+ev.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError {
				problems = append(problems, "log: "+ev.Entry.Text)
			}
		case *network.EventRequestWillBeSent:
			if !strings.HasPrefix(ev.Request.URL, "file://") {
				requests = append(requests, ev.Request.URL)
			}
		}
	}))
	_, err := chromedp.Call(tab, log.Enable, cdp.Empty{})
	require.NoError(t, err)
	_, err = chromedp.Call(tab, network.Enable, network.EnableParams{})
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(tab,
		chromedp.Navigate("file://"+page),
		chromedp.WaitVisible(chromedp.CSS("#legend")),
	))
	eval := func(js string) string {
		t.Helper()
		v, err := chromedp.Run(tab, chromedp.Evaluate[string](js))
		require.NoError(t, err, js)
		return v
	}
	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(tab, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(sel)+`).length`))
		require.NoError(t, err, sel)
		return n
	}
	texts := func(sel string) string {
		return eval(`[...document.querySelectorAll(` + strconv.Quote(sel) + `)].map(e => e.textContent).join(",")`)
	}
	attemptRows, waitRows := count("section.run tr.attempt"), count("section.run tr.wait")
	verdicts := texts("section.run .verdicts .verdict")
	ceilings, suggested := texts(".ceiling-current"), texts(".ceiling-suggested")
	legend, rangeText := texts("#legend"), texts("#range")
	background := `getComputedStyle(document.body).backgroundColor`
	lightBG := eval(background)
	media := func(scheme string) {
		t.Helper()
		_, err := chromedp.Call(tab, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		require.NoError(t, err)
	}
	media("dark")
	darkBG := eval(background)
	media("light")

	mu.Lock()
	assert.Empty(t, problems, "no console error")
	assert.Empty(t, requests, "the page fetches nothing")
	mu.Unlock()

	assert.Equal(t, rows, attemptRows, "one waterfall row per attempt of the runs drawn")
	assert.Positive(t, waitRows, "the backoff waits are drawn")
	var want []string
	for _, r := range chosen {
		ran := map[string]bool{}
		failed := r.outcome != "ok"
		for _, c := range r.calls {
			want = append(want, c.verdict)
			ran[c.step] = true
			failed = failed || c.verdict != "ok"
		}
		for _, s := range genPlan {
			if failed && !ran[s.name] {
				want = append(want, notRun) // the steps a failed run did not start
			}
		}
	}
	assert.Equal(t, strings.Join(want, ","), verdicts, "each call's verdict, run by run")
	assert.Contains(t, verdicts, "operation_too_slow")
	assert.Contains(t, ceilings, "100ms", "fetch's current ceiling")
	assert.Contains(t, ceilings, "250ms", "search's current ceiling")
	assert.NotEmpty(t, suggested, "the suggested ceilings of the steps with enough attempts")
	assert.Contains(t, legend, "suggested ceiling")
	assert.Contains(t, legend, "backoff wait")
	assert.Contains(t, rangeText, g.metricsFrom.UTC().Format(reportTime))
	assert.NotEqual(t, lightBG, darkBG, "the dark mode has its own colours")

	// The run report's defects, seen in the browser on a page with the
	// throttled and the refused runs: the ✕ drawn square with its strokes
	// crossing, the full trace ids, the time zones, the HTTP statuses, and
	// no horizontal overflow at 400 px.
	runs := fewRuns()
	runsPage, _ := reportFile(t, runs)
	require.NoError(t, chromedp.Do(tab, chromedp.Navigate("file://"+runsPage), chromedp.WaitVisible(chromedp.CSS("#legend"))))
	marks := eval(`JSON.stringify([...document.querySelectorAll("section.run tr.refusal path, section.run tr.wait path")].map(p => {
		const r = p.getBoundingClientRect(), L = p.getTotalLength(), m = p.getScreenCTM();
		const at = l => { const q = p.getPointAtLength(l); return [q.x * m.a + m.e, q.y * m.d + m.f]; };
		return {w: r.width, h: r.height, s1: at(0), s2: at(L / 2 + 0.01), m1: at(L / 4), m2: at(3 * L / 4)};
	}))`)
	var geo []struct {
		W, H           float64
		S1, S2, M1, M2 [2]float64
	}
	require.NoError(t, json.Unmarshal([]byte(marks), &geo))
	require.GreaterOrEqual(t, len(geo), 2, "the refusal and the Retry-After that did not fit are marked")
	for i, g := range geo {
		assert.InDelta(t, g.W, g.H, 1, "mark %d drawn square on screen: %+v", i, g)
		assert.GreaterOrEqual(t, g.W, 7.0, "mark %d visible: %+v", i, g)
		assert.Greater(t, math.Hypot(g.S1[0]-g.S2[0], g.S1[1]-g.S2[1]), 5.0, "mark %d: the strokes start apart (not Λ): %+v", i, g)
		assert.Less(t, math.Hypot(g.M1[0]-g.M2[0], g.M1[1]-g.M2[1]), 1.0, "mark %d: the strokes cross in their middles (✕): %+v", i, g)
	}
	shown := eval(`JSON.stringify([...document.querySelectorAll("section.run")].map(s => ({id: s.dataset.trace, text: s.innerText,
		zone: [...s.querySelectorAll(".run-start")].map(e => e.textContent)})))`)
	var sections []struct {
		ID, Text string
		Zone     []string
	}
	require.NoError(t, json.Unmarshal([]byte(shown), &sections))
	require.NotEmpty(t, sections)
	for _, s := range sections {
		assert.Len(t, s.ID, 32)
		assert.Contains(t, s.Text, s.ID, "the full trace id is shown")
		if assert.Len(t, s.Zone, 1, "run %s: its start time", s.ID) {
			assert.Regexp(t, `Z$`, s.Zone[0], "run %s: its start time's zone", s.ID)
		}
	}
	throttled := traceHex(runs[len(runs)-2], uint64(len(runs)-2))
	assert.Equal(t, "2", eval(`String((document.querySelector('section.run[data-trace="`+throttled+`"]').innerText.match(/HTTP 429/g) || []).length)`),
		"the throttled run's two 429s are shown as such")
	_, err = chromedp.Call(tab, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: 400, Height: 900, DeviceScaleFactor: 1})
	require.NoError(t, err)
	narrow := eval(`JSON.stringify({scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth,
		bars: [...document.querySelectorAll("section.run td.bar .track")].map(s => { const r = s.getBoundingClientRect(); return [r.left, r.right]; }),
		cards: [...document.querySelectorAll("section.step")].map(s => s.getBoundingClientRect().right)})`)
	var layout struct {
		Scroll, Client float64
		Bars           [][2]float64
		Cards          []float64
	}
	require.NoError(t, json.Unmarshal([]byte(narrow), &layout))
	assert.LessOrEqual(t, layout.Scroll, 400.0, "no horizontal overflow at 400 px")
	require.NotEmpty(t, layout.Bars)
	for _, b := range layout.Bars {
		assert.LessOrEqual(t, b[1], 400.0, "a waterfall bar on screen at 400 px: %v", b)
		assert.GreaterOrEqual(t, b[1]-b[0], 150.0, "a waterfall bar wide enough to read at 400 px: %v", b)
	}
	for _, r := range layout.Cards {
		assert.LessOrEqual(t, r, 400.0, "a step card on screen at 400 px")
	}
	_, err = chromedp.Call(tab, emulation.ClearDeviceMetricsOverride, cdp.Empty{})
	require.NoError(t, err)

	// The generated data's page at 400, 800 and 1 280 px: the histograms'
	// text keeps the page's 11 px whatever the card's width (it scaled with
	// the drawing: about 20 px in an 800 px card, 9.6 px at 400 px), and the
	// glossary's two lists share one column of terms.
	require.NoError(t, chromedp.Do(tab, chromedp.Navigate("file://"+page), chromedp.WaitVisible(chromedp.CSS("#legend"))))
	for _, width := range []int64{400, 800, 1280} {
		_, err = chromedp.Call(tab, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: width, Height: 900, DeviceScaleFactor: 1})
		require.NoError(t, err)
		got := eval(`JSON.stringify({
			fonts: [...document.querySelectorAll("svg.hist text")].map(e => parseFloat(getComputedStyle(e).fontSize) * (e.getScreenCTM() ? Math.hypot(e.getScreenCTM().a, e.getScreenCTM().b) : 1)),
			heights: [...document.querySelectorAll("svg.hist text.xtick")].map(e => e.getBoundingClientRect().height),
			dd: [...document.querySelectorAll("#outcomes dd, #stat-terms dd")].map(e => e.getBoundingClientRect().left),
			dt: [...document.querySelectorAll("#outcomes dt, #stat-terms dt")].map(e => e.getBoundingClientRect().left)})`)
		var lay struct{ Fonts, Heights, DD, DT []float64 }
		require.NoError(t, json.Unmarshal([]byte(got), &lay))
		require.NotEmpty(t, lay.Fonts, "%d px: the histograms have text", width)
		for _, f := range lay.Fonts {
			assert.InDelta(t, 11, f, 0.01, "%d px: a chart label's font on screen", width)
		}
		for _, h := range lay.Heights {
			assert.Less(t, h, 16.0, "%d px: a tick label is drawn at the page's size, not scaled up", width)
			assert.Greater(t, h, 9.0, "%d px: a tick label is drawn at the page's size, not scaled down", width)
		}
		require.NotEmpty(t, lay.DD)
		if width >= 800 { // one column below 640 px: each term above its text
			for _, x := range lay.DD {
				assert.InDelta(t, lay.DD[0], x, 0.5, "%d px: every explanation, of both lists, starts in one column", width)
			}
		}
		for _, x := range lay.DT {
			assert.InDelta(t, lay.DT[0], x, 0.5, "%d px: every term starts in one column", width)
		}
	}
	_, err = chromedp.Call(tab, emulation.ClearDeviceMetricsOverride, cdp.Empty{})
	require.NoError(t, err)

	if out := os.Getenv(screenshotEnv); out != "" {
		// The README's picture: the traces' report, two runs of each kind.
		shot := filepath.Join(t.TempDir(), "shot.html")
		code, _, errOut := runCmd(t, "-report", shot, "-report-runs", "2", g.traces)
		require.Equal(t, 0, code, errOut)
		require.NoError(t, chromedp.Do(tab, chromedp.Navigate("file://"+shot), chromedp.WaitVisible(chromedp.CSS("#legend"))))
		png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
		require.NoError(t, err)
		require.Less(t, len(png), 300<<10, "the screenshot stays under 300 KB")
		require.NoError(t, os.WriteFile(out, png, 0o644))
	}
}

// Without the browser and outside CI, the browser test skips and says why
// (under CI it fails instead).
func TestNeedChromiumSkipsOutsideCI(t *testing.T) {
	saved := chromiumPath
	t.Cleanup(func() { chromiumPath = saved })
	chromiumPath = filepath.Join(t.TempDir(), "chromium")
	t.Setenv("CI", "")
	var skipped bool
	t.Run("missing", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		needChromium(t)
		t.Error("needChromium returned without the browser")
	})
	assert.True(t, skipped, "skipped outside CI")
}

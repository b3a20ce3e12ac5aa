package test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetgenkit"
)

// tally is what the measurement runs add up.
type tally struct {
	runs, answered, stopped, untyped, unnamed    int
	abandonedReported, slowPastLease, lateStarts int
	overshoots                                   []time.Duration
	modelCalls, toolCalls                        int
	late                                         map[string]int // runs over 5 ms late, by how they ended
}

func (ta *tally) percentile(q float64) time.Duration {
	s := slices.Clone(ta.overshoots)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func (ta *tally) String() string {
	return fmt.Sprintf("runs %d: answered %d, stopped %d (untyped %d, step unnamed %d); overshoot p50 %v p99 %v max %v; "+
		"slow tools past their lease %d, reported abandoned %d; calls started with <= floor left %d; model calls %d, tool calls %d; runs > 5 ms late by end %v",
		ta.runs, ta.answered, ta.stopped, ta.untyped, ta.unnamed, ta.percentile(0.5), ta.percentile(0.99), ta.percentile(1),
		ta.slowPastLease, ta.abandonedReported, ta.lateStarts, ta.modelCalls, ta.toolCalls, ta.late)
}

// measured is one randomized ten-turn run: model latency 10–60 ms, tool
// latency 10–40 ms, and one call (turn 1–10) of the tool that turns slow
// (0.3–3 s) and ignores its context.
type measured struct {
	prov *provider
	tl   *tool
	g    *genkit.Genkit
}

func newMeasured(t testing.TB, ctx context.Context, base http.RoundTripper, url string, plain bool) *measured {
	prov := &provider{Turns: 10}
	tl := &tool{}
	s := newSetup(t, ctx, base, url, prov, tl, plain)
	return &measured{prov: prov, tl: tl, g: s.g}
}

func (m *measured) reset(rng *rand.Rand) {
	lat := make([]time.Duration, 64)
	for i := range lat {
		lat[i] = time.Duration(10+rng.IntN(51)) * time.Millisecond
	}
	m.prov.Reset()
	m.prov.LatencyOf = func(n int) time.Duration { return lat[n%len(lat)] }
	m.tl.calls.Store(0)
	m.tl.starts = nil
	m.tl.Latency = time.Duration(10+rng.IntN(31)) * time.Millisecond
	m.tl.SlowAt = 1 + rng.IntN(10)
	m.tl.Slow = time.Duration(300+rng.IntN(2701)) * time.Millisecond
}

// record adds one of our runs to ta.
func (ta *tally) record(m *measured, d deadline.Deadline, floor time.Duration, res *otelbudgetgenkit.Result, err error, end time.Time) {
	ta.runs++
	ta.overshoots = append(ta.overshoots, end.Sub(d.End()))
	ta.modelCalls += res.ModelCalls
	ta.toolCalls += res.ToolCalls
	if end.Sub(d.End()) > 5*time.Millisecond {
		if ta.late == nil {
			ta.late = map[string]int{}
		}
		how := "answer"
		if s, ok := errors.AsType[*deadline.StopError](err); ok {
			how = s.Name + " " + s.Reason.String()
		}
		ta.late[how]++
	}
	if err == nil {
		ta.answered++
	} else {
		ta.stopped++
		stop, ok := errors.AsType[*deadline.StopError](err)
		if !ok || !errors.Is(err, context.DeadlineExceeded) {
			ta.untyped++
		} else if stop.Name != "chat fake-1" && stop.Name != "execute_tool lookup" {
			ta.unnamed++
		}
	}
	for _, s := range append(starts(m.prov), m.tl.starts...) {
		if d.End().Sub(s) <= floor {
			ta.lateStarts++
		}
	}
	// The slow call's start: was it still running at its lease's end?
	if n := m.tl.SlowAt; n <= len(m.tl.starts) {
		start := m.tl.starts[n-1]
		if start.Add(m.tl.Slow).After(d.End().Add(-floor)) {
			ta.slowPastLease++
			if len(res.Abandoned) == 1 {
				ta.abandonedReported++
			}
		}
	}
}

// measureRuns is 1000 with GENKIT_MEASURE=1 (the figures of
// docs/benchmarks.md), else 50 (the CI run, a few seconds).
var measureRuns = func() int {
	if os.Getenv("GENKIT_MEASURE") != "" {
		return 1000
	}
	return 50
}()

// measureSeed seeds the randomized runs: GENKIT_MEASURE_SEED, else 1.
var measureSeed = func() uint64 {
	if n, err := strconv.ParseUint(os.Getenv("GENKIT_MEASURE_SEED"), 10, 64); err == nil {
		return n
	}
	return 1
}()

// TestMeasureSlowTool runs the randomized ten-turn agent 1000 times in
// virtual time, without and with a reserve: every run returns inside its
// deadline, no call starts with the floor or less left, every abandoned
// tool is reported, every stop is typed and names its step, and with a
// reserve at least 95 % of the runs answer. The figures are logged (-v).
func TestMeasureSlowTool(t *testing.T) {
	const budget, floor = time.Second, 20 * time.Millisecond
	for _, reserve := range []time.Duration{0, 150 * time.Millisecond} {
		t.Run(fmt.Sprintf("reserve=%v", reserve), func(t *testing.T) {
			var ta tally
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				prov, tl := &provider{Turns: 10}, &tool{}
				m := &measured{prov: prov, tl: tl, g: newSetup(t, ctx, memTransport{H: prov}, fakeURL, prov, tl, false).g}
				a := agent(t, reserve, nil)
				rng := rand.New(rand.NewPCG(measureSeed, uint64(reserve)))
				for range measureRuns {
					m.reset(rng)
					d := deadline.New(budget)
					res, err := a.Run(deadline.NewContext(ctx, d), m.g, tenTurns()...)
					end := time.Now()
					res.WaitTools()
					ta.record(m, d, floor, res, err, end)
				}
			})
			t.Log(ta.String())
			assert.LessOrEqual(t, ta.percentile(1), time.Duration(0), "a run returned after its deadline (virtual time)")
			assert.Zero(t, ta.lateStarts, "calls started with the floor or less left")
			assert.Zero(t, ta.untyped, "stops not matching DeadlineExceeded and *deadline.StopError")
			assert.Zero(t, ta.unnamed, "stops not naming the step")
			assert.Equal(t, ta.slowPastLease, ta.abandonedReported, "abandoned tools reported")
			if reserve > 0 {
				assert.GreaterOrEqual(t, float64(ta.answered), 0.95*float64(ta.runs), "answers with a reserve")
			}
		})
	}
}

// TestMeasureDefaults runs the same agent with Genkit's defaults (no
// budget of this project: a 1 s context.WithTimeout, openai-go's default
// retries, plain genkit.DefineTool), 20 runs in virtual time, and logs how
// long it runs and how many calls it makes. It checks today's problem is
// there: the runs overshoot by the slow tool.
func TestMeasureDefaults(t *testing.T) {
	const budget = time.Second
	var over []time.Duration
	var answered, modelCalls, toolCalls, afterDeadline, deadlineErrs int
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		prov := &provider{Turns: 10, Latency: 30 * time.Millisecond}
		tl := &tool{Latency: 20 * time.Millisecond}
		s := newSetup(t, ctx, memTransport{H: prov}, fakeURL, prov, tl, true)
		rng := rand.New(rand.NewPCG(2, 2))
		for range 20 {
			prov.Reset()
			tl.calls.Store(0)
			tl.starts = nil
			tl.SlowAt = 1 + rng.IntN(10)
			tl.Slow = 2 * time.Second
			rctx, rcancel := context.WithTimeout(ctx, budget)
			end, _ := rctx.Deadline()
			resp, err := genkit.Generate(rctx, s.g, append(tenTurns(), ai.WithModelName("fake/fake-1"))...)
			over = append(over, time.Since(end))
			rcancel()
			if err == nil && resp.Text() != "" {
				answered++
			}
			if err != nil && len(over) == 1 {
				t.Logf("first run's error: %v", err)
			}
			if err != nil && errors.Is(err, context.DeadlineExceeded) {
				deadlineErrs++
			}
			modelCalls += len(prov.Requests())
			toolCalls += int(tl.calls.Load())
			for _, st := range starts(prov) {
				if st.After(end) {
					afterDeadline++
				}
			}
		}
	})
	// A 429 with retry-after-ms 2000 on the first request, budget 1 s:
	// openai-go's default retries.
	var over429 []time.Duration
	var after429 int
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		prov := &provider{Turns: 3, Latency: 30 * time.Millisecond, Reject: rateLimit(1, 2*time.Second)}
		tl := &tool{Latency: 20 * time.Millisecond}
		s := newSetup(t, ctx, memTransport{H: prov}, fakeURL, prov, tl, true)
		for range 20 {
			prov.Reset()
			rctx, rcancel := context.WithTimeout(ctx, budget)
			end, _ := rctx.Deadline()
			_, _ = genkit.Generate(rctx, s.g, append(tenTurns(), ai.WithModelName("fake/fake-1"))...)
			over429 = append(over429, time.Since(end))
			rcancel()
			for _, st := range starts(prov) {
				if st.After(end) {
					after429++
				}
			}
		}
	})
	slices.Sort(over429)
	t.Logf("Genkit defaults, 429 retry-after-ms 2000, 20 runs: overshoot min %v max %v; requests sent after the deadline %d",
		over429[0], over429[len(over429)-1], after429)
	slices.Sort(over)
	t.Logf("Genkit defaults, 20 runs: overshoot min %v median %v max %v; answered %d; errors matching DeadlineExceeded %d/20; model requests %d, tool calls %d; requests sent after the deadline %d",
		over[0], over[len(over)/2], over[len(over)-1], answered, deadlineErrs, modelCalls, toolCalls, afterDeadline)
	assert.Greater(t, over[0], 500*time.Millisecond, "Genkit alone waits for the slow tool past the deadline")
}

// loadavg is /proc/loadavg's three averages, or "?".
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// TestMeasureLoopback is the real-time figure: the randomized run over a
// loopback httptest provider, 1000 runs (GENKIT_MEASURE=1; 10 at a time),
// the overshoot's p50/p99/max logged. It asserts no wall-clock duration.
func TestMeasureLoopback(t *testing.T) {
	if os.Getenv("GENKIT_MEASURE") == "" {
		t.Skip("set GENKIT_MEASURE=1: 1000 real-time runs")
	}
	const budget, floor = 300 * time.Millisecond, 20 * time.Millisecond
	par := 1 // sequential: the figure is the run's, not the scheduler's
	if n, err := strconv.Atoi(os.Getenv("GENKIT_MEASURE_PAR")); err == nil && n > 0 {
		par = n
	}
	for _, reserve := range []time.Duration{0, 100 * time.Millisecond} {
		var mu sync.Mutex
		var ta tally
		var wg sync.WaitGroup
		// The control: how late a plain 5 ms sleep wakes on this machine
		// meanwhile, the scheduler's share of any lateness.
		stopControl := make(chan struct{})
		var control []time.Duration
		controlDone := make(chan struct{})
		go func() {
			defer close(controlDone)
			for {
				select {
				case <-stopControl:
					return
				default:
				}
				t0 := time.Now()
				time.Sleep(5 * time.Millisecond)
				control = append(control, time.Since(t0)-5*time.Millisecond)
			}
		}()
		for w := range par {
			wg.Go(func() {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				prov := &provider{Turns: 10}
				srv := httptest.NewServer(prov)
				defer srv.Close()
				tr := &http.Transport{}
				defer tr.CloseIdleConnections()
				m := newMeasured(t, ctx, tr, srv.URL+"/v1/", false)
				a := agent(t, reserve, nil)
				rng := rand.New(rand.NewPCG(measureSeed+2, uint64(w)))
				runs := measureRuns / par
				if n, err := strconv.Atoi(os.Getenv("GENKIT_MEASURE_RUNS")); err == nil && n > 0 {
					runs = n
				}
				for range runs {
					m.reset(rng)
					m.prov.LatencyOf = func(int) time.Duration { return time.Duration(2+rng.IntN(8)) * time.Millisecond }
					m.tl.Latency = time.Duration(2+rng.IntN(6)) * time.Millisecond
					m.tl.Slow = time.Duration(100+rng.IntN(400)) * time.Millisecond
					d := deadline.New(budget)
					res, err := a.Run(deadline.NewContext(ctx, d), m.g, tenTurns()...)
					end := time.Now()
					res.WaitTools()
					mu.Lock()
					ta.record(m, d, floor, res, err, end)
					mu.Unlock()
					if late := end.Sub(d.End()); late > 100*time.Millisecond {
						t.Logf("late %v: err %v; model %d, tool %d calls, abandoned %v; slow call %d of %v", late, err, res.ModelCalls, res.ToolCalls, res.Abandoned, m.tl.SlowAt, m.tl.Slow)
					}
				}
			})
		}
		wg.Wait()
		close(stopControl)
		<-controlDone
		ct := tally{overshoots: control}
		t.Logf("loopback, budget %v, reserve %v: %s", budget, reserve, ta.String())
		t.Logf("control, a 5 ms sleep meanwhile (%d): woke late p50 %v p99 %v max %v; load average %s", len(control), ct.percentile(0.5), ct.percentile(0.99), ct.percentile(1), loadavg())
		require.Zero(t, ta.untyped)
	}
}

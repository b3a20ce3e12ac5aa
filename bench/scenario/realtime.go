package scenario

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/deadlinebudget/budget/bench/peers"
)

// DoomedBelow is the time left under which an attempt counts as doomed: it
// cannot do useful work before the run's deadline. It equals this project's
// own floor (peers.Scenario1().Floor), so the tables also count attempts
// started with less than the operation's latency left ([Run.DoomedWithin]),
// a threshold that owes nothing to this project's configuration.
const DoomedBelow = 20 * time.Millisecond

// FastFailLatency is how long scenario 2's operation takes to answer.
const FastFailLatency = 30 * time.Millisecond

// SlowLatency is the latency scenario 1's second doomed column uses. Its
// operation never answers (it blocks until its context ends), so it has no
// latency of its own; the per-attempt timeout is what the caller configured
// an attempt to need.
func SlowLatency(c peers.Call) time.Duration { return c.AttemptTimeout }

// attemptRec is what one attempt saw.
type attemptRec struct {
	start, end  time.Time
	hasDeadline bool
	ctxDeadline time.Time
}

// Run is the record of one call: when it started, its deadline, when the
// library returned, and every attempt.
type Run struct {
	Start, Deadline, Return time.Time
	Err                     error

	mu       sync.Mutex
	attempts []attemptRec
}

// begin records the start of an attempt run under ctx and returns its index.
func (r *Run) begin(ctx context.Context) int {
	a := attemptRec{start: time.Now()}
	a.ctxDeadline, a.hasDeadline = ctx.Deadline()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts = append(r.attempts, a)
	return len(r.attempts) - 1
}

// end records the end of attempt i.
func (r *Run) end(i int) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts[i].end = now
}

// Overshoot is the return time minus the deadline; negative when the call
// returned early.
func (r *Run) Overshoot() time.Duration { return r.Return.Sub(r.Deadline) }

// Attempts is the number of attempts started.
func (r *Run) Attempts() int { return len(r.attempts) }

// Doomed counts attempts started with less than DoomedBelow left.
func (r *Run) Doomed() int { return r.DoomedWithin(DoomedBelow) }

// DoomedWithin counts attempts started with less than d left before the
// run's deadline: with d the operation's latency, attempts that could not
// answer in time at their usual speed.
func (r *Run) DoomedWithin(d time.Duration) int {
	n := 0
	for _, a := range r.attempts {
		if r.Deadline.Sub(a.start) < d {
			n++
		}
	}
	return n
}

// WithDeadline counts attempts whose context carried a deadline.
func (r *Run) WithDeadline() int {
	n := 0
	for _, a := range r.attempts {
		if a.hasDeadline {
			n++
		}
	}
	return n
}

// Unbounded counts attempts whose context could outlive the run's deadline
// (no deadline, or one more than 1ms past it): the operation could not know
// how long the run had.
func (r *Run) Unbounded() int {
	n := 0
	for _, a := range r.attempts {
		if !a.hasDeadline || a.ctxDeadline.After(r.Deadline.Add(time.Millisecond)) {
			n++
		}
	}
	return n
}

// gaps returns the pauses between attempts and after the last one, i.e.
// the time the library spent sleeping (and its bookkeeping).
func (r *Run) gaps() [][2]time.Time {
	var g [][2]time.Time
	for i := range r.attempts {
		end := r.Return
		if i+1 < len(r.attempts) {
			end = r.attempts[i+1].start
		}
		g = append(g, [2]time.Time{r.attempts[i].end, end})
	}
	return g
}

// Slept is the total pause between attempts and after the last one.
func (r *Run) Slept() time.Duration {
	var t time.Duration
	for _, g := range r.gaps() {
		t += g[1].Sub(g[0])
	}
	return t
}

// SleepsIntoDeadline counts pauses longer than 1ms that ended at or after
// 1ms before the deadline: sleeps the run could not afford, cut by the
// deadline or carried past it.
func (r *Run) SleepsIntoDeadline() int {
	n := 0
	for _, g := range r.gaps() {
		if g[1].Sub(g[0]) > time.Millisecond && !g[1].Before(r.Deadline.Add(-time.Millisecond)) {
			n++
		}
	}
	return n
}

// call runs op through r in mode m and records it.
func call(r peers.Retrier, m Mode, c peers.Call, op func(*Run) peers.Op) *Run {
	run := &Run{}
	ctx := context.Background()
	run.Start = time.Now()
	run.Deadline = run.Start.Add(c.Budget)
	if m == ModeContext {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, run.Deadline)
		defer cancel()
	}
	run.Err = r.Do(ctx, c, op(run))
	run.Return = time.Now()
	return run
}

// SlowOp is scenario 1's operation: it blocks until its context ends.
func SlowOp(run *Run) peers.Op {
	return func(ctx context.Context) error {
		i := run.begin(ctx)
		defer run.end(i)
		<-ctx.Done()
		return ctx.Err()
	}
}

// FastFailOp is scenario 2's operation: it fails retryably after 30ms.
func FastFailOp(run *Run) peers.Op {
	return func(ctx context.Context) error {
		i := run.begin(ctx)
		defer run.end(i)
		t := time.NewTimer(FastFailLatency)
		defer t.Stop()
		select {
		case <-t.C:
			return &peers.Failure{Status: 503}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Results holds the runs of one scenario, per library and mode.
type Results map[string]map[Mode][]*Run

// PlanScenario returns the jobs that run op o.Runs times per library and
// mode, interleaving the libraries so that they share the machine's
// conditions, and the Results they fill in once run (see RunAll).
func PlanScenario(rs []peers.Retrier, c peers.Call, o Options, op func(*Run) peers.Op) (Results, []func()) {
	return plan(rs, Modes, o, func(r peers.Retrier, m Mode) *Run { return call(r, m, c, op) })
}

// plan returns o.Runs jobs per library and mode, interleaving the libraries
// so that they share the machine's conditions; each job runs one and files
// its result under the library's name and the mode.
func plan[L interface{ Name() string }, R any](libs []L, modes []Mode, o Options, one func(L, Mode) R) (map[string]map[Mode][]R, []func()) {
	res := map[string]map[Mode][]R{}
	var mu sync.Mutex
	var jobs []func()
	for range o.Runs {
		for _, m := range modes {
			for _, l := range libs {
				jobs = append(jobs, func() {
					run := one(l, m)
					mu.Lock()
					defer mu.Unlock()
					if res[l.Name()] == nil {
						res[l.Name()] = map[Mode][]R{}
					}
					res[l.Name()][m] = append(res[l.Name()][m], run)
				})
			}
		}
	}
	return res, jobs
}

// OvershootGoal is the bound on this project's overshoot p99 in
// scenarios 1 and 2.
const OvershootGoal = 2 * time.Millisecond

// SlowTable renders scenario 1.
func SlowTable(rs []peers.Retrier, res Results, c peers.Call) Table {
	t := Table{
		Title: fmt.Sprintf("Scenario 1: slow operation (budget %v, per-attempt %v, backoff %v..%v, ≤%d attempts, op blocks until its ctx ends)",
			c.Budget, c.AttemptTimeout, c.BackoffBase, c.BackoffMax, c.MaxAttempts),
		Header: []string{"library", "mode", "runs", "overshoot median", "overshoot tail", "attempts median (max)",
			"doomed attempts (total)", fmt.Sprintf("attempts started with < %v left (total)", SlowLatency(c)),
			"attempts whose ctx had a deadline", "attempts whose ctx outlived the run deadline", "goal"},
	}
	for _, r := range rs {
		for _, m := range Modes {
			runs := res[r.Name()][m]
			var over Durations
			var att, doomed, late, withDl, unb ints
			total := 0
			for _, x := range runs {
				over = append(over, x.Overshoot())
				att = append(att, x.Attempts())
				doomed = append(doomed, x.Doomed())
				late = append(late, x.DoomedWithin(SlowLatency(c)))
				withDl = append(withDl, x.WithDeadline())
				unb = append(unb, x.Unbounded())
				total += x.Attempts()
			}
			lbl, tv := tail(over)
			goal := "—"
			if _, ok := r.(peers.Deadline); ok {
				goal = fmt.Sprintf("overshoot ≤ %v: %s; zero doomed: %s", OvershootGoal, verdict(tv <= OvershootGoal), verdict(doomed.sum() == 0))
			}
			t.Rows = append(t.Rows, []string{r.Name(), m.String(), fmt.Sprint(len(runs)), ms(over.Quantile(0.5)), lbl + " " + ms(tv),
				fmt.Sprintf("%d (%d)", att.median(), att.max()), fmt.Sprint(doomed.sum()), fmt.Sprint(late.sum()),
				fmt.Sprintf("%d/%d", withDl.sum(), total), fmt.Sprintf("%d/%d", unb.sum(), total), goal})
		}
	}
	t.Notes = append(t.Notes,
		"Overshoot = return time − the run's deadline (negative: returned early). Doomed = started with less than "+DoomedBelow.String()+
			" left, which is this project's own floor; the next column uses a threshold that is not: the op never answers, so it is the "+
			"per-attempt timeout ("+SlowLatency(c).String()+"), what the caller configured an attempt to need. Mode ctx: the caller's context carries the deadline and the library's own overall limit is set; mode lib: only the library's own limit.")
	return t
}

// FastTable renders scenario 2.
func FastTable(rs []peers.Retrier, res Results, c peers.Call) Table {
	t := Table{
		Title: fmt.Sprintf("Scenario 2: fast failures (op fails retryably after 30ms; budget %v, per-attempt %v, backoff %v..%v, ≤%d attempts)",
			c.Budget, c.AttemptTimeout, c.BackoffBase, c.BackoffMax, c.MaxAttempts),
		Header: []string{"library", "mode", "runs", "overshoot median", "overshoot tail", "attempts median (max)",
			"time slept median", "sleeps into the deadline (total)", "doomed attempts (total)",
			fmt.Sprintf("attempts started with < %v left (total)", FastFailLatency), "goal"},
	}
	for _, r := range rs {
		for _, m := range Modes {
			runs := res[r.Name()][m]
			var over, slept Durations
			var att, into, doomed, late ints
			for _, x := range runs {
				over = append(over, x.Overshoot())
				slept = append(slept, x.Slept())
				att = append(att, x.Attempts())
				into = append(into, x.SleepsIntoDeadline())
				doomed = append(doomed, x.Doomed())
				late = append(late, x.DoomedWithin(FastFailLatency))
			}
			lbl, tv := tail(over)
			goal := "—"
			if _, ok := r.(peers.Deadline); ok {
				goal = fmt.Sprintf("overshoot ≤ %v: %s; no sleep into the deadline: %s; zero doomed: %s", OvershootGoal,
					verdict(tv <= OvershootGoal), verdict(into.sum() == 0), verdict(doomed.sum() == 0))
			}
			t.Rows = append(t.Rows, []string{r.Name(), m.String(), fmt.Sprint(len(runs)), ms(over.Quantile(0.5)), lbl + " " + ms(tv),
				fmt.Sprintf("%d (%d)", att.median(), att.max()), ms(slept.Quantile(0.5)), fmt.Sprint(into.sum()), fmt.Sprint(doomed.sum()),
				fmt.Sprint(late.sum()), goal})
		}
	}
	t.Notes = append(t.Notes,
		"Time slept = all time outside attempts, including after the last one until the library returned. A sleep into the deadline is a pause "+
			"longer than 1ms that ended within 1ms of the deadline or after it: a sleep the run could not use. Doomed = started with less than "+
			DoomedBelow.String()+" left (this project's floor); the next column counts attempts started with less than the op's own latency ("+
			FastFailLatency.String()+") left, which could not answer before the deadline.")
	return t
}

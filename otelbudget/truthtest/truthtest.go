// Package truthtest generates the runs of an agent with a known truth, for
// the tests of what reads otelbudget's telemetry (budgetadvise, the
// Collector connector): every attempt's true duration is drawn from a
// seeded source, so the exact percentiles, the share of attempts a ceiling
// cuts and the date range are known before any tool reads the spans.
//
// The runs follow otelbudget's rules for a call (a lease of the ceiling or
// what is left above the floor, a refusal at or below the floor, a seeded
// backoff that must fit in what is left), and are described with the
// values of otelbudget's attributes (deadline.attempt.ended_by,
// deadline.stop_reason, deadline.verdict, deadline.run.outcome). Writing
// them as spans or metrics (pdata, OTLP JSON) is left to each test: this
// package imports the standard library only.
//
// The same [Set] gives the same runs on every call: every draw comes from
// math/rand/v2's PCG seeded with Set.Seed.
package truthtest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Floor is the floor of every generated call: an attempt is refused when
// no more than Floor is left of the run's budget, and a lease limited by the
// deadline ends Floor before it.
const Floor = 20 * time.Millisecond

// Budget is the budget of every generated run.
const Budget = time.Second

// Interval is the time between the starts of two successive runs of a
// [Set].
const Interval = 2 * time.Second

// maxAttempts bounds Step.MaxAttempts: the backoff's upper bound, 50ms
// doubled per attempt, must stay an int64 of nanoseconds.
const maxAttempts = 32

// Step is one step of a plan: its policy (Ceiling, MaxAttempts) and its
// true latency, log-normal with the Median and the log-scale Sigma, with a
// share Errors of attempts failing with a retryable error.
type Step struct {
	Name        string
	Ceiling     time.Duration
	MaxAttempts int
	Median      time.Duration
	Sigma       float64
	Errors      float64
}

// Plan returns the plan of the known-truth data set, a new slice on each
// call: search (ceiling 250ms, 2 attempts, median 20ms, σ 0.4), fetch
// (100ms, 3 attempts, median 50ms, σ 0.565, 2% errors) and extract (200ms,
// 2 attempts, median 30ms, σ 0.3). Fetch's σ puts about 11% of its
// attempts above its 100ms ceiling (ln 2 / 0.565 ≈ 1.23 standard
// deviations).
func Plan() []Step {
	return []Step{
		{"search", 250 * time.Millisecond, 2, 20 * time.Millisecond, 0.4, 0},
		{"fetch", 100 * time.Millisecond, 3, 50 * time.Millisecond, 0.565, 0.02},
		{"extract", 200 * time.Millisecond, 2, 30 * time.Millisecond, 0.3, 0},
	}
}

// Attempt is one generated attempt. Start is from the run's start; Used is
// the attempt span's length: the true duration when it completed, a
// quarter of it when it failed, Granted when it was cut. Wait and Fits are
// the backoff after a failed attempt that is retried or refused (zero
// otherwise).
type Attempt struct {
	Number    int
	Start     time.Duration
	Used      time.Duration
	Granted   time.Duration
	LimitedBy string // ceiling or deadline
	EndedBy   string // completed, error, attempt_timeout or deadline
	Wait      time.Duration
	Fits      bool
}

// Cut reports whether the attempt was ended by its lease (attempt_timeout
// or deadline): its true duration is unknown, above Used.
func (a Attempt) Cut() bool { return a.EndedBy == "attempt_timeout" || a.EndedBy == "deadline" }

// Call is one generated call of a step: Start and End from the run's
// start, Remaining the budget left at Start, Reason and Verdict its
// deadline.stop_reason and deadline.verdict. A call refused at the floor
// has no attempts.
type Call struct {
	Step        string
	Ceiling     time.Duration
	MaxAttempts int
	Start, End  time.Duration
	Remaining   time.Duration
	Attempts    []Attempt
	Reason      string
	Verdict     string
}

// Run is one generated run: a call per step of the plan, up to the first
// call whose attempts were exhausted (the plan stops there). Outcome is
// its deadline.run.outcome: ok, failed, or budget_exhausted when the first
// call that did not succeed was stopped by the budget.
type Run struct {
	Instance string
	Start    time.Time
	Budget   time.Duration
	Calls    []Call
	Outcome  string
}

// End is the time the run's last call ended (Start for a run without
// calls).
func (r Run) End() time.Time {
	if len(r.Calls) == 0 {
		return r.Start
	}
	return r.Start.Add(r.Calls[len(r.Calls)-1].End)
}

// Set describes N runs of a plan on one instance, one every [Interval] from
// Start, each with a budget of [Budget] and a floor of [Floor].
type Set struct {
	// Instance names the instance the runs are on (Run.Instance).
	Instance string
	// Seed seeds the PCG source the durations, errors and backoffs are
	// drawn from.
	Seed uint64
	// N is the number of runs, 0 or more.
	N int
	// Plan is the steps of each run; nil means [Plan]().
	Plan []Step
	// Failing names a step whose every attempt fails in every FailEvery-th
	// run (runs FailEvery-1, 2·FailEvery-1, …), as when its provider is
	// down; FailEvery 0 means never.
	Failing   string
	FailEvery int
	// Start is the start of the first run.
	Start time.Time
}

// ErrInvalid is the error [Set.Runs] returns, wrapped with what was wrong,
// for a set it cannot generate.
var ErrInvalid = errors.New("truthtest: invalid set")

// Runs generates the set's runs. It returns an error wrapping [ErrInvalid]
// when N or FailEvery is negative, the plan is empty (not nil), FailEvery
// is positive and Failing names no step of the plan, or a step has no
// name, a ceiling or median that is not positive, MaxAttempts outside 1 to
// 32, a negative or non-finite Sigma, or Errors outside [0, 1].
func (s Set) Runs() ([]Run, error) {
	plan := s.Plan
	if plan == nil {
		plan = Plan()
	}
	if err := s.check(plan); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(s.Seed, s.Seed^0x5eed))
	runs := make([]Run, 0, s.N)
	for i := range s.N {
		r := Run{Instance: s.Instance, Start: s.Start.Add(time.Duration(i) * Interval), Budget: Budget, Outcome: "ok"}
		down := s.FailEvery > 0 && i%s.FailEvery == s.FailEvery-1
		now := time.Duration(0)
		for _, st := range plan {
			c := call(rng, st, r.Budget, now, down && st.Name == s.Failing)
			now = c.End
			r.Calls = append(r.Calls, c)
			if c.Verdict != "ok" && r.Outcome == "ok" {
				r.Outcome = "failed"
				if c.Reason != "attempts_exhausted" {
					r.Outcome = "budget_exhausted"
				}
			}
			if c.Reason == "attempts_exhausted" {
				break // the plan stops on a failure other than the budget
			}
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// call plays one call of st from now in a run with budget; failing makes
// every attempt fail.
func call(rng *rand.Rand, st Step, budget, now time.Duration, failing bool) Call {
	c := Call{Step: st.Name, Ceiling: st.Ceiling, MaxAttempts: st.MaxAttempts, Start: now, Remaining: budget - now}
	for k := 1; ; k++ {
		left := budget - now
		if left <= Floor {
			c.Reason, c.Verdict = "refused", "deadline_too_small"
			break
		}
		a := Attempt{Number: k, Start: now, Granted: st.Ceiling, LimitedBy: "ceiling"}
		if left-Floor < st.Ceiling {
			a.Granted, a.LimitedBy = left-Floor, "deadline"
		}
		d := time.Duration(float64(st.Median) * math.Exp(st.Sigma*rng.NormFloat64()))
		isErr := failing || rng.Float64() < st.Errors
		switch {
		case d >= a.Granted && a.LimitedBy == "ceiling":
			a.Used, a.EndedBy = a.Granted, "attempt_timeout"
		case d >= a.Granted:
			a.Used, a.EndedBy = a.Granted, "deadline"
		case isErr:
			a.Used, a.EndedBy = d/4, "error"
		default:
			a.Used, a.EndedBy = d, "completed"
		}
		now += a.Used
		if a.EndedBy == "completed" {
			c.Attempts = append(c.Attempts, a)
			c.Reason, c.Verdict = "success", "ok"
			break
		}
		if a.EndedBy == "deadline" {
			c.Attempts = append(c.Attempts, a)
			c.Reason, c.Verdict = "deadline_exceeded", "deadline_too_small"
			break
		}
		if k == st.MaxAttempts {
			c.Attempts = append(c.Attempts, a)
			c.Reason, c.Verdict = "attempts_exhausted", "operation_failed"
			if slices.ContainsFunc(c.Attempts, func(a Attempt) bool { return a.EndedBy == "attempt_timeout" }) {
				c.Verdict = "operation_too_slow"
			}
			break
		}
		a.Wait = time.Duration(rng.Int64N(int64(50*time.Millisecond) << (k - 1)))
		a.Fits = a.Wait < budget-now-Floor
		c.Attempts = append(c.Attempts, a)
		if !a.Fits {
			c.Reason, c.Verdict = "backoff_exceeds_budget", "deadline_too_small"
			break
		}
		now += a.Wait
	}
	c.End = now
	return c
}

// check reports what is wrong with s and its plan, if anything.
func (s Set) check(plan []Step) error {
	if s.N < 0 {
		return fmt.Errorf("%w: N %d: want 0 or more runs", ErrInvalid, s.N)
	}
	if s.FailEvery < 0 {
		return fmt.Errorf("%w: FailEvery %d: want 0 (never) or more", ErrInvalid, s.FailEvery)
	}
	if len(plan) == 0 {
		return fmt.Errorf("%w: an empty plan: want one step or more (nil for Plan())", ErrInvalid)
	}
	if s.FailEvery > 0 && !slices.ContainsFunc(plan, func(st Step) bool { return st.Name == s.Failing }) {
		return fmt.Errorf("%w: Failing %q with FailEvery %d: want the name of a step of the plan", ErrInvalid, s.Failing, s.FailEvery)
	}
	for i, st := range plan {
		switch {
		case st.Name == "":
			return fmt.Errorf("%w: step %d has no name", ErrInvalid, i)
		case st.Ceiling <= 0 || st.Median <= 0:
			return fmt.Errorf("%w: step %q: ceiling %s, median %s: want both positive", ErrInvalid, st.Name, st.Ceiling, st.Median)
		case st.MaxAttempts < 1 || st.MaxAttempts > maxAttempts:
			return fmt.Errorf("%w: step %q: MaxAttempts %d: want 1 to %d", ErrInvalid, st.Name, st.MaxAttempts, maxAttempts)
		case !(st.Sigma >= 0) || math.IsInf(st.Sigma, 0):
			return fmt.Errorf("%w: step %q: Sigma %v: want a finite value, 0 or more", ErrInvalid, st.Name, st.Sigma)
		case !(st.Errors >= 0 && st.Errors <= 1):
			return fmt.Errorf("%w: step %q: Errors %v: want a share from 0 to 1", ErrInvalid, st.Name, st.Errors)
		}
	}
	return nil
}

// KnownTruth returns the two sets of the known-truth data set that
// budgetadvise's and the connector's tests share: 1500 runs of [Plan] on
// each of two instances of one agent, agent-a (seed 1, fetch's provider
// down in every 97th run) from start and agent-b (seed 2, never down) from
// a second later.
func KnownTruth(start time.Time) []Set {
	return []Set{
		{Instance: "agent-a", Seed: 1, N: 1500, Failing: "fetch", FailEvery: 97, Start: start},
		{Instance: "agent-b", Seed: 2, N: 1500, Start: start.Add(time.Second)},
	}
}

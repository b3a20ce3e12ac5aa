// Package goodput is scenario 6 of docs/benchmarks.md: many runs of a
// three-step plan against a simulated provider with a fixed seed, each run
// under one budget, measured in virtual time.
//
// The libraries read the real clock (time.Now, timers) and cannot be given
// a fake one, so the only honest virtual time is testing/synctest: [Simulate]
// must be called inside a synctest bubble, which only a test can open. The
// report is therefore produced by TestGoodputReport in this package, which
// cmd/compare runs with `go test` and reads back as JSON.
//
// The provider's fate for a run's k-th request (latency, 503, 429 with
// Retry-After) is drawn from a generator seeded with the model's seed and the
// run's index, so every library meets the same sequence of answers in the
// same run; only the libraries' own jitter, drawn from their unseedable
// global sources, differs between invocations.
package goodput

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/deadlinebudget/budget/bench/peers"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// Model is the simulated provider and the plan run against it.
type Model struct {
	Seed uint64 // fixes every run's sequence of answers

	// Latency of an answered request: log-normal with this median and
	// sigma, except a TailShare of requests drawn from a Pareto tail
	// (minimum TailMin, index TailAlpha, capped at TailCap).
	Median    time.Duration
	Sigma     float64
	TailShare float64
	TailMin   time.Duration
	TailAlpha float64
	TailCap   time.Duration

	Share503   float64       // requests answered 503
	Share429   float64       // requests answered 429 with Retry-After, opening a rate-limit window
	RetryAfter time.Duration // the window a 429 opens and asks the client to wait
	ErrorAfter time.Duration // how fast a 503 or 429 is answered

	Budget time.Duration // one per run, shared by the three steps
	Steps  int
	Call   peers.Call // per-step policy; its Budget is replaced by what is left of the run
}

// Default is the model of the published table.
func Default() Model {
	c := peers.Scenario1()
	return Model{
		Seed:   20260601,
		Median: 60 * time.Millisecond, Sigma: 0.7,
		TailShare: 0.05, TailMin: 300 * time.Millisecond, TailAlpha: 1.1, TailCap: 60 * time.Second,
		Share503: 0.10, Share429: 0.05, RetryAfter: time.Second, ErrorAfter: 10 * time.Millisecond,
		Budget: 1500 * time.Millisecond, Steps: 3, Call: c,
	}
}

// String describes the model in one line.
func (m Model) String() string {
	return fmt.Sprintf("seed %d; latency log-normal median %v σ %.1f, %.0f%% from a Pareto tail (min %v, α %.1f, cap %v); "+
		"%.0f%% 503 and %.0f%% 429 with Retry-After %v (requests inside that window get 429 again), answered after %v; budget %v for %d steps, each step: per-attempt %v, "+
		"backoff %v..%v, ≤%d attempts",
		m.Seed, m.Median, m.Sigma, m.TailShare*100, m.TailMin, m.TailAlpha, m.TailCap,
		m.Share503*100, m.Share429*100, m.RetryAfter, m.ErrorAfter, m.Budget, m.Steps,
		m.Call.AttemptTimeout, m.Call.BackoffBase, m.Call.BackoffMax, m.Call.MaxAttempts)
}

// answer is the provider's fate for one request.
type answer struct {
	latency    time.Duration
	status     int           // 200, 503 or 429
	retryAfter time.Duration // of a 429
}

// provider draws the answers of one run. A 429 starts a rate-limit window
// of RetryAfter: a request that arrives inside it is answered 429 again,
// asking for what is left of the window in whole seconds (as HTTP
// delta-seconds do), and draws nothing, so the k-th request admitted meets
// the same fate whatever the library.
type provider struct {
	m            Model
	rng          *rand.Rand
	blockedUntil time.Time
}

func newProvider(m Model, run int) *provider {
	return &provider{m: m, rng: rand.New(rand.NewPCG(m.Seed, uint64(run)))}
}

func (p *provider) next(now time.Time) answer {
	if left := p.blockedUntil.Sub(now); left > 0 {
		secs := (left + time.Second - 1) / time.Second
		return answer{latency: p.m.ErrorAfter, status: 429, retryAfter: secs * time.Second}
	}
	u, lat := p.rng.Float64(), p.latency()
	switch {
	case u < p.m.Share503:
		return answer{latency: p.m.ErrorAfter, status: 503}
	case u < p.m.Share503+p.m.Share429:
		p.blockedUntil = now.Add(p.m.RetryAfter)
		return answer{latency: p.m.ErrorAfter, status: 429, retryAfter: p.m.RetryAfter}
	}
	return answer{latency: lat, status: 200}
}

func (p *provider) latency() time.Duration {
	if p.rng.Float64() < p.m.TailShare {
		// Pareto by inversion: xm / U^(1/α).
		v := float64(p.m.TailMin) / math.Pow(1-p.rng.Float64(), 1/p.m.TailAlpha)
		return time.Duration(min(v, float64(p.m.TailCap)))
	}
	return time.Duration(float64(p.m.Median) * math.Exp(p.m.Sigma*p.rng.NormFloat64()))
}

// Totals is what one library did over all runs.
type Totals struct {
	Library   string
	Runs      int
	Good      int           // runs that returned every step's result by the deadline
	Requests  int           // requests sent, over all runs
	Abandoned int           // requests the client stopped waiting for
	Wasted    time.Duration // provider time on abandoned requests and on results of runs that failed
	Late      int           // runs that returned after their deadline
	MaxLate   time.Duration // the largest return time past the deadline
}

// GoodputShare is Good/Runs.
func (t Totals) GoodputShare() float64 { return float64(t.Good) / float64(max(t.Runs, 1)) }

// RequestsPerRun is Requests/Runs.
func (t Totals) RequestsPerRun() float64 { return float64(t.Requests) / float64(max(t.Runs, 1)) }

// WastedPerRun is Wasted/Runs.
func (t Totals) WastedPerRun() time.Duration { return t.Wasted / time.Duration(max(t.Runs, 1)) }

// AblationNoFloor names the extra row of the report: this project with
// Floor 0, everything else equal.
const AblationNoFloor = "deadline (this), Floor 0 (ablation)"

// Learned returns this project with the learned floor as scenario 6 runs
// it: threshold 5%, probe share 5%, the live estimate refreshed every 20
// samples from a histogram whose weights halve every 500 samples, answering
// from 100 samples. Use one per simulation: its recorder learns from every
// run it serves.
func Learned() *peers.DeadlineLearned {
	return peers.NewDeadlineLearned(0.05, 0.05, learn.LiveOptions{
		SuggestOptions: learn.SuggestOptions{Max: time.Second, MinSamples: 100}, Every: 20, HalfLife: 500,
	})
}

// LearnedSuccesses is [Learned] with the estimate that counts only
// successes ((*learn.Live).Successes): an attempt is refused when its chance
// of succeeding within its lease is below 5%, a 503 or 429 counting as no
// success.
func LearnedSuccesses() *peers.DeadlineLearned {
	return peers.NewDeadlineLearnedSuccesses(0.05, 0.05, learn.LiveOptions{
		SuggestOptions: learn.SuggestOptions{Max: time.Second, MinSamples: 100}, Every: 20, HalfLife: 500,
	})
}

// Report is what TestGoodputReport writes as JSON and cmd/compare reads.
type Report struct {
	Model  string   // Model.String()
	Runs   int      // per library
	Totals []Totals // one per library, in the order of peers.All, then the AblationNoFloor row
}

// runRecord is the accounting of one run.
type runRecord struct {
	requests, abandoned int
	abandonedTime       time.Duration
	usefulTime          time.Duration // latency of answered 200s
}

// Simulate runs the plan runs times with r, at most concurrent runs at a
// time, and returns the totals. It must be called inside a synctest bubble
// (synctest.Test): the runs sleep for the simulated latencies, budgets and
// backoffs, which only virtual time makes instant. runs and concurrent must
// be positive.
func Simulate(r peers.Retrier, m Model, runs, concurrent int) (Totals, error) {
	if runs < 1 || concurrent < 1 {
		return Totals{}, fmt.Errorf("goodput: runs %d and concurrent %d must be >= 1", runs, concurrent)
	}
	if err := m.Call.Validate(); err != nil {
		return Totals{}, err
	}
	tot := Totals{Library: r.Name(), Runs: runs}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, concurrent)
	for i := range runs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			good, late, rec := oneRun(r, m, i)
			mu.Lock()
			defer mu.Unlock()
			tot.Requests += rec.requests
			tot.Abandoned += rec.abandoned
			tot.Wasted += rec.abandonedTime
			if good {
				tot.Good++
			} else {
				tot.Wasted += rec.usefulTime
			}
			if late > 0 {
				tot.Late++
				tot.MaxLate = max(tot.MaxLate, late)
			}
		})
	}
	wg.Wait()
	return tot, nil
}

// oneRun runs the plan once: the caller's context carries the run's
// deadline, and each step's own limit is what is left of it.
func oneRun(r peers.Retrier, m Model, i int) (good bool, late time.Duration, rec runRecord) {
	p := newProvider(m, i)
	start := time.Now()
	end := start.Add(m.Budget)
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	var mu sync.Mutex
	op := func(ctx context.Context) error {
		mu.Lock()
		a := p.next(time.Now())
		rec.requests++
		mu.Unlock()
		t := time.NewTimer(a.latency)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			mu.Lock()
			rec.abandoned++
			rec.abandonedTime += a.latency // the provider finishes what it started
			mu.Unlock()
			return ctx.Err()
		}
		switch a.status {
		case 503:
			return &peers.Failure{Status: 503}
		case 429:
			return &peers.Failure{Status: 429, RetryAfter: a.retryAfter}
		}
		mu.Lock()
		rec.usefulTime += a.latency
		mu.Unlock()
		return nil
	}
	good = true
	for range m.Steps {
		c := m.Call
		c.Budget = time.Until(end)
		if c.Budget <= 0 {
			good = false
			break
		}
		if err := r.Do(ctx, c, op); err != nil {
			good = false
			break
		}
	}
	late = time.Since(end)
	if late > 0 {
		good = false
	}
	return good, max(late, 0), rec
}

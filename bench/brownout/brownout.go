// Package brownout is the brownout scenario of issue 21: clients call a
// provider that becomes five times slower for a third of the run, and the
// question is how many attempts each library sends that can no longer
// answer in time (doomed attempts: ended by their lease or the deadline
// without an answer), and how soon it succeeds again once the provider
// recovers.
//
// The provider serves each request on one of Workers workers, in arrival
// order, for a service time drawn from a log-normal distribution (the
// request's fate is drawn from a generator seeded with the model's seed and
// the request's order, so every library meets the same sequence); a request
// that would wait more than MaxQueue for a worker is answered 503 at once.
// It finishes every request it started, even one its client stopped waiting
// for: a doomed attempt keeps a worker busy, which is the cost the source
// article names ("a doomed attempt still occupies a connection and a slot").
//
// Everything runs in virtual time (testing/synctest): [Simulate] must be
// called inside a bubble.
package brownout

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

// Model is the brownout scenario's parameters.
type Model struct {
	Seed     uint64
	Clients  int           // each starting one logical call every Interval (open loop)
	Interval time.Duration // between one client's calls
	Workers  int           // requests the provider serves at once
	MaxQueue time.Duration // a request that would wait longer for a worker is answered 503 at once

	Median time.Duration // service time: log-normal with this median and Sigma
	Sigma  float64
	Slow   float64 // the service time's factor during the brownout

	// Before is the time before the brownout, Brownout its length, After
	// the time after it.
	Before, Brownout, After time.Duration
	Call                    peers.Call // each logical call's policy; the caller's context carries Call.Budget
}

// Default is the model published in docs/benchmarks.md: 100 clients, one
// call per second each; service log-normal, median 40ms, σ 0.3, on 32
// workers (13% busy); 20s before, a 20s brownout at 5× (median 200ms),
// 20s after; each call: budget 300ms, per-attempt 100ms, backoff
// 10ms..40ms, at most 3 attempts, this project's 5ms floor.
func Default() Model {
	return Model{
		Seed: 20261201, Clients: 100, Interval: time.Second, Workers: 48, MaxQueue: 2 * time.Second,
		Median: 40 * time.Millisecond, Sigma: 0.3, Slow: 5,
		Before: 20 * time.Second, Brownout: 20 * time.Second, After: 20 * time.Second,
		Call: peers.Call{
			Budget: 300 * time.Millisecond, AttemptTimeout: 100 * time.Millisecond,
			BackoffBase: 10 * time.Millisecond, BackoffMax: 40 * time.Millisecond,
			MaxAttempts: 3, Floor: 5 * time.Millisecond,
		},
	}
}

// Validate reports the first parameter out of range.
func (m Model) Validate() error {
	switch {
	case m.Clients < 1 || m.Interval <= 0 || m.Workers < 1 || m.MaxQueue < 0:
		return fmt.Errorf("brownout: Clients %d, Interval %v, Workers %d, MaxQueue %v: want >= 1, > 0, >= 1, >= 0", m.Clients, m.Interval, m.Workers, m.MaxQueue)
	case m.Median <= 0 || !(m.Sigma >= 0) || !(m.Slow >= 1):
		return fmt.Errorf("brownout: Median %v, Sigma %v, Slow %v: want > 0, >= 0, >= 1", m.Median, m.Sigma, m.Slow)
	case m.Before < time.Second || m.Brownout <= 0 || m.After < 2*time.Second:
		return fmt.Errorf("brownout: Before %v, Brownout %v, After %v: want >= 1s, > 0, >= 2s", m.Before, m.Brownout, m.After)
	}
	return m.Call.Validate()
}

// String describes the model in one line.
func (m Model) String() string {
	return fmt.Sprintf("seed %d; %d clients × 1 call per %v (%.0f calls/s) on a provider of %d workers, service log-normal median %v σ %.1f, "+
		"503 at once beyond %v of queue, finishing abandoned requests; %v before, a %v brownout (service %g× slower), %v after; "+
		"each call: budget %v on the caller's context, per-attempt %v, backoff %v..%v, ≤%d attempts",
		m.Seed, m.Clients, m.Interval, float64(m.Clients)*float64(time.Second)/float64(m.Interval), m.Workers, m.Median, m.Sigma,
		m.MaxQueue, m.Before, m.Brownout, m.Slow, m.After, m.Call.Budget, m.Call.AttemptTimeout, m.Call.BackoffBase, m.Call.BackoffMax, m.Call.MaxAttempts)
}

// Second is what happened in one second of the run: logical calls started
// in it and how many of those succeeded, requests sent in it and how many
// of those were doomed.
type Second struct {
	Calls, Good, Requests, Doomed int
}

// Result is one library's run of the model.
type Result struct {
	Library string
	Seed    uint64 // the model's seed for this run
	Seconds []Second
	// Calls, Good, Requests and Doomed are the run's totals; Doomed counts
	// the requests ended by their lease or the deadline without an answer.
	Calls, Good, Requests, Doomed int
	// BrownoutDoomed counts the doomed requests sent during the brownout.
	BrownoutDoomed int
	// FirstSuccess is the time from the end of the brownout to the first
	// answer a client accepted (a 200 before its attempt ended) after it;
	// -1 when none came.
	FirstSuccess time.Duration
	// Recovery is the time from the end of the brownout to the start of
	// the first second from which every second's calls succeed at least 90%
	// as often as before the brownout; -1 when that never happens.
	Recovery time.Duration
	// Baseline is the share of calls that succeeded before the brownout.
	Baseline float64
}

// Goodput is the share of the run's logical calls that succeeded.
func (r Result) Goodput() float64 { return float64(r.Good) / float64(max(r.Calls, 1)) }

// provider is the model's provider.
type provider struct {
	m     Model
	start time.Time
	rng   *rand.Rand

	mu        sync.Mutex
	free      []time.Time // when each worker is next free
	perSecond []Second
	first     time.Time // the first accepted answer after the brownout
}

func (p *provider) second(t time.Time) int {
	return min(max(int(t.Sub(p.start)/time.Second), 0), len(p.perSecond)-1)
}

// serviceTime draws one request's service time at now.
func (p *provider) serviceTime(now time.Time) time.Duration {
	d := float64(p.m.Median) * math.Exp(p.m.Sigma*p.rng.NormFloat64())
	if at := now.Sub(p.start); at >= p.m.Before && at < p.m.Before+p.m.Brownout {
		d *= p.m.Slow
	}
	return time.Duration(d)
}

// handle is one request, as the operation every library retries.
func (p *provider) handle(ctx context.Context) error {
	now := time.Now()
	p.mu.Lock()
	sec := p.second(now)
	p.perSecond[sec].Requests++
	service := p.serviceTime(now)
	w := 0
	for i, f := range p.free {
		if f.Before(p.free[w]) {
			w = i
		}
	}
	begin := now
	if p.free[w].After(begin) {
		begin = p.free[w]
	}
	if begin.Sub(now) > p.m.MaxQueue {
		p.mu.Unlock()
		return &peers.Failure{Status: 503}
	}
	done := begin.Add(service)
	p.free[w] = done
	p.mu.Unlock()

	t := time.NewTimer(done.Sub(now))
	defer t.Stop()
	select {
	case <-t.C:
		p.mu.Lock()
		if end := p.start.Add(p.m.Before + p.m.Brownout); !done.Before(end) && (p.first.IsZero() || done.Before(p.first)) {
			p.first = done
		}
		p.mu.Unlock()
		return nil
	case <-ctx.Done():
		p.mu.Lock()
		p.perSecond[sec].Doomed++
		p.mu.Unlock()
		return ctx.Err()
	}
}

// Simulate runs the model once for r. It must run inside a synctest bubble.
func Simulate(r peers.Retrier, m Model) (Result, error) {
	if err := m.Validate(); err != nil {
		return Result{}, err
	}
	total := m.Before + m.Brownout + m.After
	p := &provider{m: m, start: time.Now(), rng: rand.New(rand.NewPCG(m.Seed, 0)),
		free: make([]time.Time, m.Workers), perSecond: make([]Second, int((total+time.Second-1)/time.Second))}
	var wg sync.WaitGroup
	for k := range m.Clients {
		wg.Go(func() {
			next := p.start.Add(m.Interval * time.Duration(k) / time.Duration(m.Clients))
			for next.Before(p.start.Add(total)) {
				time.Sleep(time.Until(next))
				wg.Go(func() {
					started := time.Now()
					ctx, cancel := context.WithDeadline(context.Background(), started.Add(m.Call.Budget))
					defer cancel()
					err := r.Do(ctx, m.Call, p.handle)
					p.mu.Lock()
					defer p.mu.Unlock()
					sec := &p.perSecond[p.second(started)]
					sec.Calls++
					if err == nil {
						sec.Good++
					}
				})
				next = next.Add(m.Interval)
			}
		})
	}
	wg.Wait()
	res := Result{Library: r.Name(), Seed: m.Seed, Seconds: p.perSecond, FirstSuccess: -1, Recovery: -1}
	b, e := int(m.Before/time.Second), int((m.Before+m.Brownout)/time.Second)
	var before Second
	for i, sec := range p.perSecond {
		res.Calls += sec.Calls
		res.Good += sec.Good
		res.Requests += sec.Requests
		res.Doomed += sec.Doomed
		switch {
		case i >= 1 && i < b:
			before.Calls += sec.Calls
			before.Good += sec.Good
		case i >= b && i < e:
			res.BrownoutDoomed += sec.Doomed
		}
	}
	res.Baseline = float64(before.Good) / float64(max(before.Calls, 1))
	if !p.first.IsZero() {
		res.FirstSuccess = p.first.Sub(p.start.Add(m.Before + m.Brownout))
	}
	for i := e; i < len(p.perSecond)-1; i++ {
		ok := true
		for _, sec := range p.perSecond[i : len(p.perSecond)-1] {
			if float64(sec.Good) < 0.9*res.Baseline*float64(sec.Calls) {
				ok = false
				break
			}
		}
		if ok {
			res.Recovery = time.Duration(i-e) * time.Second
			break
		}
	}
	return res, nil
}

// Learned returns this project with the learned floor as the scenario
// configures it: threshold 5%, probe share 10%; the live estimate refreshed
// every 5 samples of the step from a histogram whose weights halve every 40
// samples, and answering from 20 samples. (With probe share 5%, Every 10,
// HalfLife 100 and MinSamples 50, recovery after the brownout took 2–4 s
// instead of 1 s, and goodput varied more between seeds.)
func Learned() *peers.DeadlineLearned {
	return peers.NewDeadlineLearned(0.05, 0.10, learn.LiveOptions{
		SuggestOptions: learn.SuggestOptions{Max: time.Second, MinSamples: 20}, Every: 5, HalfLife: 40,
	})
}

// Libraries returns the retriers the scenario compares: this project, this
// project with the learned floor, then the peers and the hand-written loop
// of peers.All. Each call returns new retriers: a recorder belongs to one
// run.
func Libraries() []peers.Retrier {
	var out []peers.Retrier
	for _, r := range peers.All() {
		out = append(out, r)
		if _, ok := r.(peers.Deadline); ok {
			out = append(out, Learned())
		}
	}
	return out
}

// Report is what TestBrownoutReport writes for cmd/compare: the model (its
// first seed), the seeds run, and one Result per seed and library, by seed
// then in the order of [Libraries].
type Report struct {
	Model   string
	Seeds   []uint64
	Results []Result
}

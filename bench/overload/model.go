// Package overload is the overload scenario of issue 31: clients call one
// downstream through a concurrency limiter, a throttle or a breaker (or
// none), at one to ten times what the downstream can serve, and the
// question is how much of the downstream's work ends as answers delivered
// within their deadline (goodput), how much of its busy time goes to calls
// whose caller has already left (wasted work), how soon after the onset of
// the overload goodput reaches the downstream's capacity, and how soon it
// recovers once the overload ends.
//
// The downstream has [Model.Workers] workers and a bounded FIFO queue: a
// request that would wait longer than [Model.MaxQueue] for a worker is
// refused at once (503). Each call has its own service time (log-normal,
// with a Pareto tail) and its own deadline (drawn from a mix of three), and
// the downstream finishes every request it accepted, even one whose caller
// has left: nothing tells it. The [Row] variants with a downstream that runs
// this project's server admission ([Row.Admission]) replace that queue with
// package deadline/admission's.
//
// Every row meets the same calls: the arrival times (Poisson), service
// times and deadlines are drawn from a generator seeded with the model's
// seed, in arrival order, before any row sees them.
//
// Everything runs in virtual time (testing/synctest): [Simulate] must be
// called inside a bubble, where failsafe-go's clock, timers and waits are
// virtual too.
package overload

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// Route is one class of calls to the downstream: its share of the calls and
// its service time's distribution.
type Route struct {
	Name  string
	Share float64 // of the calls, in (0, 1]; the routes' shares sum to 1

	Median time.Duration // log-normal body: median and σ
	Sigma  float64
	// TailShare of the calls take a Pareto time instead (minimum TailMin,
	// index TailAlpha, capped at TailCap); 0: no tail.
	TailShare        float64
	TailMin, TailCap time.Duration
	TailAlpha        float64
}

// Mean returns the route's mean service time.
func (r Route) Mean() time.Duration {
	body := float64(r.Median) * math.Exp(r.Sigma*r.Sigma/2)
	tail := 0.0
	if r.TailShare > 0 {
		// Mean of min(X, cap) for X Pareto(min, α), α > 1:
		// α·min/(α−1) − min^α·cap^(1−α)/(α−1).
		a, m, c := r.TailAlpha, float64(r.TailMin), float64(r.TailCap)
		tail = a*m/(a-1) - math.Pow(m, a)*math.Pow(c, 1-a)/(a-1)
	}
	return time.Duration((1-r.TailShare)*body + r.TailShare*tail)
}

// draw draws one service time.
func (r Route) draw(rng *rand.Rand) time.Duration {
	if r.TailShare > 0 && rng.Float64() < r.TailShare {
		x := float64(r.TailMin) / math.Pow(1-rng.Float64(), 1/r.TailAlpha)
		return time.Duration(min(x, float64(r.TailCap)))
	}
	return time.Duration(float64(r.Median) * math.Exp(r.Sigma*rng.NormFloat64()))
}

// Deadline is one class of per-call deadlines: a call of the class has
// Budget from its start; Share of the calls are of it.
type Deadline struct {
	Budget time.Duration
	Share  float64
}

// Model is the scenario's parameters.
type Model struct {
	Seed      uint64
	Workers   int           // requests the downstream serves at once
	MaxQueue  time.Duration // a request that would wait longer for a worker is refused at once (503)
	Routes    []Route
	Deadlines []Deadline

	// Load is the offered load during the overload, in multiples of the
	// downstream's capacity ([Model.Capacity]); Base is the load before
	// and after it. Arrivals are Poisson.
	Load, Base float64
	// Before is the time at Base before the overload, Overload its length,
	// After the time at Base after it.
	Before, Overload, After time.Duration
	// Cold is the first part of the overload measured as the cold phase;
	// the steady phase is the overload from SteadyFrom to its end.
	Cold, SteadyFrom time.Duration
}

// Default is the model of issue 31: 50 workers, a queue of 2s; service
// log-normal median 40ms σ 0.5 with a 2% Pareto tail (min 300ms, α 1.2, cap
// 5s); deadlines 100ms (30%), 300ms (50%), 1s (20%); 10s at 0.5× capacity,
// 80s of overload at load× (cold: its first 30s; steady: from 60s on, 20s),
// 20s at 0.5× after.
func Default(seed uint64, load float64) Model {
	return Model{
		Seed: seed, Workers: 50, MaxQueue: 2 * time.Second,
		Routes: []Route{{Name: "work", Share: 1, Median: 40 * time.Millisecond, Sigma: 0.5,
			TailShare: 0.02, TailMin: 300 * time.Millisecond, TailAlpha: 1.2, TailCap: 5 * time.Second}},
		Deadlines: []Deadline{{100 * time.Millisecond, 0.3}, {300 * time.Millisecond, 0.5}, {time.Second, 0.2}},
		Load:      load, Base: 0.5,
		Before: 10 * time.Second, Overload: 80 * time.Second, After: 20 * time.Second,
		Cold: 30 * time.Second, SteadyFrom: 60 * time.Second,
	}
}

// TwoRoutes is [Default] with two routes sharing the downstream, half the
// calls each: a fast one (median 20ms) and a slow one (median 200ms), both
// log-normal σ 0.5 with the same Pareto tail.
func TwoRoutes(seed uint64, load float64) Model {
	m := Default(seed, load)
	fast, slow := m.Routes[0], m.Routes[0]
	fast.Name, fast.Share, fast.Median = "fast", 0.5, 20*time.Millisecond
	slow.Name, slow.Share, slow.Median = "slow", 0.5, 200*time.Millisecond
	m.Routes = []Route{fast, slow}
	return m
}

// Short shrinks m for CI: 3s before, 12s of overload (cold: the first 4s,
// steady: from 8s on), 5s after.
func Short(m Model) Model {
	m.Before, m.Overload, m.After = 3*time.Second, 12*time.Second, 5*time.Second
	m.Cold, m.SteadyFrom = 4*time.Second, 8*time.Second
	return m
}

// Validate reports the first parameter out of range.
func (m Model) Validate() error {
	switch {
	case m.Workers < 1 || m.MaxQueue < 0:
		return fmt.Errorf("overload: Workers %d, MaxQueue %v: want >= 1, >= 0", m.Workers, m.MaxQueue)
	case len(m.Routes) == 0 || len(m.Deadlines) == 0:
		return errors.New("overload: want at least one route and one deadline class")
	case !(m.Load > 0) || !(m.Base > 0):
		return fmt.Errorf("overload: Load %v, Base %v: want > 0", m.Load, m.Base)
	case m.Before < time.Second || m.Overload < 2*time.Second || m.After < 2*time.Second:
		return fmt.Errorf("overload: Before %v, Overload %v, After %v: want >= 1s, >= 2s, >= 2s", m.Before, m.Overload, m.After)
	case m.Cold <= 0 || m.Cold > m.Overload || m.SteadyFrom < 0 || m.SteadyFrom >= m.Overload:
		return fmt.Errorf("overload: Cold %v, SteadyFrom %v: want within the overload (%v)", m.Cold, m.SteadyFrom, m.Overload)
	}
	var rs, ds float64
	for _, r := range m.Routes {
		if r.Median <= 0 || !(r.Sigma >= 0) || !(r.Share > 0) || r.TailShare < 0 || r.TailShare > 1 ||
			(r.TailShare > 0 && (r.TailMin <= 0 || r.TailCap < r.TailMin || !(r.TailAlpha > 1))) {
			return fmt.Errorf("overload: route %+v out of range", r)
		}
		rs += r.Share
	}
	for _, d := range m.Deadlines {
		if d.Budget <= 0 || !(d.Share > 0) {
			return fmt.Errorf("overload: deadline class %+v out of range", d)
		}
		ds += d.Share
	}
	if math.Abs(rs-1) > 1e-9 || math.Abs(ds-1) > 1e-9 {
		return fmt.Errorf("overload: route shares sum to %v, deadline shares to %v: want 1", rs, ds)
	}
	return nil
}

// Mean returns the mean service time over the routes.
func (m Model) Mean() time.Duration {
	var s float64
	for _, r := range m.Routes {
		s += r.Share * float64(r.Mean())
	}
	return time.Duration(s)
}

// Capacity returns the downstream's nominal capacity in calls per second:
// Workers / mean service time.
func (m Model) Capacity() float64 { return float64(m.Workers) / m.Mean().Seconds() }

// String describes the model in one line.
func (m Model) String() string {
	routes := ""
	for i, r := range m.Routes {
		if i > 0 {
			routes += "; "
		}
		routes += fmt.Sprintf("route %s (%.0f%% of calls): log-normal median %v σ %g", r.Name, 100*r.Share, r.Median, r.Sigma)
		if r.TailShare > 0 {
			routes += fmt.Sprintf(", %g%% Pareto tail (min %v, α %g, cap %v)", 100*r.TailShare, r.TailMin, r.TailAlpha, r.TailCap)
		}
		routes += fmt.Sprintf(", mean %v", r.Mean().Round(100*time.Microsecond))
	}
	dl := ""
	for i, d := range m.Deadlines {
		if i > 0 {
			dl += ", "
		}
		dl += fmt.Sprintf("%v (%.0f%%)", d.Budget, 100*d.Share)
	}
	return fmt.Sprintf("a downstream of %d workers, FIFO queue bounded at %v of waiting (503 at once beyond), finishing every request it accepted; %s; "+
		"capacity %d workers / mean %v = %.0f calls/s; per-call deadlines %s; Poisson arrivals: %v at %g×, %v of overload at %g×, %v at %g×; "+
		"cold phase: the first %v of the overload, steady: from %v of it to its end",
		m.Workers, m.MaxQueue, routes, m.Workers, m.Mean().Round(100*time.Microsecond), m.Capacity(), dl,
		m.Before, m.Base, m.Overload, m.Load, m.After, m.Base, m.Cold, m.SteadyFrom)
}

// Call is one logical call, as the scenario draws it: what an oracle would
// know of it.
type Call struct {
	Index    int
	Route    string
	Service  time.Duration // the downstream's time to serve it, once it has a worker
	Start    time.Time
	Deadline time.Time
}

// Send sends one request of the call to the downstream and waits for its
// answer: nil when it answered in time, [ErrOverloaded] when its queue was
// full or its admission refused the request as overload, a [*Refused] when
// its admission refused the budget, or ctx's error when ctx ended first.
type Send func(ctx context.Context) error

// ErrOverloaded is the downstream's 503: its queue is full.
var ErrOverloaded = errors.New("overload: downstream overloaded (503)")

// Refused is the admission's refusal of a budget too small (the answer a
// transport marks Deadline-Refused, which this project's client never
// retries).
type Refused struct{ Reason string }

func (r *Refused) Error() string {
	return "overload: refused by the downstream's admission: " + r.Reason
}

// second is what happened to the calls that started in one second of the
// run, and to the downstream's work for the requests sent in it.
type second struct {
	Calls, Good int
	Busy        time.Duration // service time of the requests the downstream accepted
	Wasted      time.Duration // of which answered after their caller had left
}

// recorder collects a run's figures.
type recorder struct {
	start time.Time
	mu    sync.Mutex
	secs  []second
	// latencies of the good calls started in the cold and steady phases
	cold, steady                           []time.Duration
	coldFrom, coldTo, steadyFrom, steadyTo time.Time
}

func (r *recorder) sec(t time.Time) *second {
	return &r.secs[min(max(int(t.Sub(r.start)/time.Second), 0), len(r.secs)-1)]
}

// work records a request the downstream accepted at t: its service time,
// and whether its answer came after its caller had left.
func (r *recorder) work(t time.Time, service time.Duration, wasted bool) {
	r.mu.Lock()
	s := r.sec(t)
	s.Busy += service
	if wasted {
		s.Wasted += service
	}
	r.mu.Unlock()
}

// call records a logical call started at c.Start, and whether it got its
// answer in time, after latency.
func (r *recorder) call(c Call, good bool, latency time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sec(c.Start)
	s.Calls++
	if !good {
		return
	}
	s.Good++
	switch {
	case !c.Start.Before(r.coldFrom) && c.Start.Before(r.coldTo):
		r.cold = append(r.cold, latency)
	case !c.Start.Before(r.steadyFrom) && c.Start.Before(r.steadyTo):
		r.steady = append(r.steady, latency)
	}
}

// Phase is one phase's figures.
type Phase struct {
	Calls, Good int
	// Goodput is good calls per second; Capacity its share of the
	// downstream's nominal capacity.
	Goodput, Capacity float64
	// Wasted is the share of the downstream's busy time spent on requests
	// answered after their caller had left.
	Wasted float64
	// P99 is the 99th percentile latency of the good calls.
	P99 time.Duration
}

// Result is one row's run of the model.
type Result struct {
	Row    string
	Seed   uint64
	Load   float64
	Cold   Phase
	Steady Phase
	// Onset is the time from the onset of the overload to the end of the
	// first second whose good calls reach 90% of capacity; -1 when none
	// does within the overload.
	Onset time.Duration
	// Recovery is the time from the end of the overload to the start of
	// the first second from which every second's calls succeed at least
	// 90% as often as before it; -1 when that never happens in the run.
	Recovery time.Duration
	// Baseline is the share of the calls that succeeded before the
	// overload.
	Baseline float64
	// PerSecond is the good calls of each second of the run.
	PerSecond []int
}

func (r *recorder) phase(from, to time.Time, lat []time.Duration, capacity float64) Phase {
	var p Phase
	var busy, wasted time.Duration
	a, b := int(from.Sub(r.start)/time.Second), int(to.Sub(r.start)/time.Second)
	for _, s := range r.secs[a:b] {
		p.Calls += s.Calls
		p.Good += s.Good
		busy += s.Busy
		wasted += s.Wasted
	}
	p.Goodput = float64(p.Good) / to.Sub(from).Seconds()
	p.Capacity = p.Goodput / capacity
	if busy > 0 {
		p.Wasted = float64(wasted) / float64(busy)
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		p.P99 = lat[min(len(lat)-1, int(math.Ceil(0.99*float64(len(lat))))-1)]
	}
	return p
}

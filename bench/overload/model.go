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
// In the propagated variant ([Model.Propagate]) the downstream honours the
// deadline each request carries: its handler's context ends at the budget
// this project's server side derives from the request's header (arrival +
// the budget in whole milliseconds, rounded up, as deadlinehttp and
// deadlinegrpc do), and the modelled handler stops there: a request whose
// deadline passed while it waited costs nothing, one cut while served costs
// the time it ran.
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
	Seed     uint64
	Workers  int           // requests the downstream serves at once
	MaxQueue time.Duration // a request that would wait longer for a worker is refused at once (503)
	// Backlog is the server admission's backlog, in time at capacity, in
	// the rows behind it ([Row.Admission]); 0: MaxQueue.
	Backlog time.Duration
	// Propagate makes the downstream honour the deadline each request
	// carries: its handler stops when the budget it derived ends.
	Propagate bool
	Routes    []Route
	Deadlines []Deadline

	// Load is the offered load during the overload, in multiples of the
	// downstream's capacity ([Model.Capacity]); Base is the load before
	// and after it. Arrivals are Poisson.
	Load, Base float64
	// Before is the time at Base before the overload (0: a cold start,
	// every row meets the overload with nothing learned), Overload its
	// length, After the time at Base after it.
	Before, Overload, After time.Duration
	// Cold is the first part of the overload measured as the cold phase;
	// the steady phase is the overload from SteadyFrom to its end.
	Cold, SteadyFrom time.Duration
}

// Default is the model of issue 31: 50 workers, a queue of 2s; service
// log-normal median 40ms σ 0.5 with a 2% Pareto tail (min 300ms, α 1.2, cap
// 5s); deadlines 100ms (30%), 300ms (50%), 1s (20%); issue 38's phases: a
// cold start (the overload at load× from the first call, nothing learned
// before it) for 360s, the cold phase its first 30s and the steady phase
// the 300s from 60s on, then 20s at 0.5×.
func Default(seed uint64, load float64) Model {
	return Model{
		Seed: seed, Workers: 50, MaxQueue: 2 * time.Second,
		Routes: []Route{{Name: "work", Share: 1, Median: 40 * time.Millisecond, Sigma: 0.5,
			TailShare: 0.02, TailMin: 300 * time.Millisecond, TailAlpha: 1.2, TailCap: 5 * time.Second}},
		Deadlines: []Deadline{{100 * time.Millisecond, 0.3}, {300 * time.Millisecond, 0.5}, {time.Second, 0.2}},
		Load:      load, Base: 0.5,
		Before: 0, Overload: 360 * time.Second, After: 20 * time.Second,
		Cold: 30 * time.Second, SteadyFrom: 60 * time.Second,
	}
}

// Uniform is issue 38's uniform-budget model: 10 workers, every call 20ms
// of service and a 100ms deadline; the downstream's FIFO queue is
// unbounded (a plain server: nothing refuses), the server admission's
// backlog 2s; a cold start into 300s of overload at load× (cold phase: the
// first 30s, steady: from 60s on), then 10s at 0.5×.
func Uniform(seed uint64, load float64) Model {
	return Model{
		Seed: seed, Workers: 10, MaxQueue: time.Hour, Backlog: 2 * time.Second,
		Routes:    []Route{{Name: "work", Share: 1, Median: 20 * time.Millisecond}},
		Deadlines: []Deadline{{100 * time.Millisecond, 1}},
		Load:      load, Base: 0.5,
		Before: 0, Overload: 300 * time.Second, After: 10 * time.Second,
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

// Short shrinks m for CI: a cold start into 12s of overload (cold: the
// first 4s, steady: from 6s on), 4s after.
func Short(m Model) Model {
	m.Before, m.Overload, m.After = 0, 12*time.Second, 4*time.Second
	m.Cold, m.SteadyFrom = 4*time.Second, 6*time.Second
	return m
}

// Validate reports the first parameter out of range.
func (m Model) Validate() error {
	switch {
	case m.Workers < 1 || m.MaxQueue < 0 || m.Backlog < 0:
		return fmt.Errorf("overload: Workers %d, MaxQueue %v, Backlog %v: want >= 1, >= 0, >= 0", m.Workers, m.MaxQueue, m.Backlog)
	case len(m.Routes) == 0 || len(m.Deadlines) == 0:
		return errors.New("overload: want at least one route and one deadline class")
	case !(m.Load > 0) || !(m.Base > 0):
		return fmt.Errorf("overload: Load %v, Base %v: want > 0", m.Load, m.Base)
	case m.Before < 0 || m.Overload < 2*time.Second || m.After < 2*time.Second:
		return fmt.Errorf("overload: Before %v, Overload %v, After %v: want >= 0, >= 2s, >= 2s", m.Before, m.Overload, m.After)
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
	queue := fmt.Sprintf("FIFO queue bounded at %v of waiting (503 at once beyond)", m.MaxQueue)
	if m.MaxQueue >= time.Hour {
		queue = "unbounded FIFO queue (nothing refused)"
	}
	ends := "finishing every request it accepted (nothing tells it that its caller has left)"
	if m.Propagate {
		ends = "honouring the propagated deadline (its handler stops at arrival + the request's budget in whole ms, rounded up; a request whose deadline passed while it waited costs nothing)"
	}
	before := fmt.Sprintf("%v at %g×, then ", m.Before, m.Base)
	if m.Before == 0 {
		before = "a cold start (nothing learned before the overload): "
	}
	return fmt.Sprintf("a downstream of %d workers, %s, %s; %s; "+
		"capacity %d workers / mean %v = %.0f calls/s; per-call deadlines %s; Poisson arrivals: %s%v of overload at %g×, %v at %g×; "+
		"cold phase: the first %v of the overload, steady: from %v of it to its end (%v)",
		m.Workers, queue, ends, routes, m.Workers, m.Mean().Round(100*time.Microsecond), m.Capacity(), dl,
		before, m.Overload, m.Load, m.After, m.Base, m.Cold, m.SteadyFrom, m.Overload-m.SteadyFrom)
}

// Floor returns the model's unavoidable waste for a downstream that
// finishes what it started: the share of the offered work (every call sent
// once) spent on calls whose own service time exceeds their deadline even
// when started at once, from n calls drawn as [Simulate] draws them.
func (m Model) Floor(n int) float64 {
	rng := rand.New(rand.NewPCG(m.Seed, 38))
	var all, late float64
	for range n {
		route, budget := m.draw(rng)
		s := route.draw(rng)
		all += float64(s)
		if s > budget {
			late += float64(s)
		}
	}
	return late / all
}

// draw draws a call's route and deadline class.
func (m Model) draw(rng *rand.Rand) (Route, time.Duration) {
	route := m.Routes[len(m.Routes)-1]
	for u, r := rng.Float64(), 0; r < len(m.Routes); r++ {
		if u -= m.Routes[r].Share; u < 0 {
			route = m.Routes[r]
			break
		}
	}
	budget := m.Deadlines[len(m.Deadlines)-1].Budget
	for u, d := rng.Float64(), 0; d < len(m.Deadlines); d++ {
		if u -= m.Deadlines[d].Share; u < 0 {
			budget = m.Deadlines[d].Budget
			break
		}
	}
	return route, budget
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

// late reports whether c's service time exceeds its deadline: it misses
// even if started at once.
func (c Call) late() bool { return c.Service > c.Deadline.Sub(c.Start) }

// Send sends one request of the call to the downstream and waits for its
// answer: nil when it answered in time, [ErrOverloaded] when its queue was
// full or its admission refused the request as overload, a [*Refused] when
// its admission refused the budget, or ctx's error when ctx ended first.
type Send func(ctx context.Context) error

// ErrOverloaded is the downstream's 503: its queue is full.
var ErrOverloaded = errors.New("overload: downstream overloaded (503)")

// ErrShed is the admission's 503 for a request it shed from a standing
// queue after it waited there as long as such a queue lets a request wait
// (admission.RefusalQueueFull with Decision.Queued: what deadlinehttp
// answers 503 with "Deadline-Refused: ..., reason=standing_queue"). It
// matches [ErrOverloaded].
var ErrShed = fmt.Errorf("%w: shed from a standing queue", ErrOverloaded)

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
	Possible    int           // calls whose service time is within their deadline
	Busy        time.Duration // the downstream's time on the requests it accepted
	Wasted      time.Duration // of which answered after their caller had left
	Late        time.Duration // of Busy, on calls whose service time exceeds their deadline
}

// recorder collects a run's figures.
type recorder struct {
	start time.Time
	mu    sync.Mutex
	secs  []second
	// latencies of the good calls started in the cold and steady phases
	// and in the whole overload
	cold, steady, whole                    []time.Duration
	coldFrom, coldTo, steadyFrom, steadyTo time.Time
	onset, end                             time.Time
}

func (r *recorder) sec(t time.Time) *second {
	return &r.secs[min(max(int(t.Sub(r.start)/time.Second), 0), len(r.secs)-1)]
}

// work records a request of call c the downstream accepted at t: the time
// it spent on it, and whether its answer came after its caller had left.
func (r *recorder) work(t time.Time, c Call, spent time.Duration, wasted bool) {
	r.mu.Lock()
	s := r.sec(t)
	s.Busy += spent
	if wasted {
		s.Wasted += spent
	}
	if c.late() {
		s.Late += spent
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
	if !c.late() {
		s.Possible++
	}
	if !good {
		return
	}
	s.Good++
	if !c.Start.Before(r.onset) && c.Start.Before(r.end) {
		r.whole = append(r.whole, latency)
	}
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
	// Floor is the share of the downstream's busy time spent on calls
	// whose own service time exceeds their deadline (they miss even when
	// started at once): of Wasted, what no caller could have avoided
	// once it sent them.
	Floor float64
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
	// Whole is the whole overload.
	Whole Phase
	// Onset is the time from the onset of the overload to the end of the
	// first second whose good calls reach 90% of capacity; -1 when none
	// does within the overload.
	Onset time.Duration
	// Recovery is the time from the end of the overload to the start of
	// the first second from which every second's calls succeed at least
	// 90% as often as before it; -1 when that never happens in the run.
	Recovery time.Duration
	// Baseline is the share of the calls that succeeded before the
	// overload; after a cold start, the share of the run's calls whose
	// service time is within their deadline.
	Baseline float64
	// PerSecond is the good calls of each second of the run.
	PerSecond []int
}

func (r *recorder) phase(from, to time.Time, lat []time.Duration, capacity float64) Phase {
	var p Phase
	var busy, wasted, late time.Duration
	a, b := int(from.Sub(r.start)/time.Second), int(to.Sub(r.start)/time.Second)
	for _, s := range r.secs[a:b] {
		p.Calls += s.Calls
		p.Good += s.Good
		busy += s.Busy
		wasted += s.Wasted
		late += s.Late
	}
	p.Goodput = float64(p.Good) / to.Sub(from).Seconds()
	p.Capacity = p.Goodput / capacity
	if busy > 0 {
		p.Wasted = float64(wasted) / float64(busy)
		p.Floor = float64(late) / float64(busy)
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		p.P99 = lat[min(len(lat)-1, int(math.Ceil(0.99*float64(len(lat))))-1)]
	}
	return p
}

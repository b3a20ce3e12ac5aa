package admission_test

import (
	"context"
	"flag"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// contended is a server whose handlers share a bounded resource: workers
// slots taken in arrival order (a database pool, a CPU), each call holding
// one for service. A handler waits for its slot while its context lasts,
// and, once it has one, finishes its work whatever happens to its caller.
type contended struct {
	g       *admission.Admitter
	slots   chan struct{}
	service time.Duration

	warm time.Time // refusals from then on are counted apart

	good, refused, refusedWarm, cut atomic.Int64

	mu  sync.Mutex
	lat []time.Duration // the good calls' latencies
}

// serve is one request with budget b, from arrival to its answer.
func (s *contended) serve(ctx context.Context, b time.Duration) {
	start := time.Now()
	a, tk := s.g.Admit(ctx, "r", budget(b), deadline.Deadline{})
	if a.Refused() {
		s.refused.Add(1)
		if !time.Now().Before(s.warm) {
			s.refusedWarm.Add(1)
		}
		return
	}
	hctx, cancel := a.Deadline.Scope(ctx)
	defer cancel()
	select {
	case s.slots <- struct{}{}:
	case <-hctx.Done():
		tk.Done(hctx, true)
		s.cut.Add(1)
		return
	}
	time.Sleep(s.service)
	<-s.slots
	tk.Done(hctx, true)
	if hctx.Err() != nil {
		s.cut.Add(1)
		return
	}
	s.good.Add(1)
	s.mu.Lock()
	s.lat = append(s.lat, time.Since(start))
	s.mu.Unlock()
}

// load is one run of [contended]: workers × service, requests arriving
// at load × capacity (Poisson) for dur, each with a budget drawn uniformly
// from [lo, hi].
type load struct {
	workers  int
	service  time.Duration
	load     float64
	dur      time.Duration
	lo, hi   time.Duration
	seed     uint64
	newAdmit func() (*admission.Admitter, *overload.Limiter, error)
}

// result is what a run of [load] served: goodput (answers in time) as a
// share of capacity, and the refusals as a share of the requests, in all and
// after the first 10 s (once an adaptive limit has climbed from its start);
// the 99th percentile latency of the good calls; the peaks of the limit and
// of the waiting calls, sampled every 10 ms.
type result struct {
	goodput, refused, cut  float64
	refusedWarm            int64
	requests               int64
	p99                    time.Duration // of the good calls' latencies
	peakLimit, peakWaiting int
}

func (l load) run(t *testing.T) result {
	var r result
	synctest.Test(t, func(t *testing.T) {
		g, lim, err := l.newAdmit()
		if err != nil {
			t.Fatal(err)
		}
		s := &contended{g: g, slots: make(chan struct{}, l.workers), service: l.service, warm: time.Now().Add(10 * time.Second)}
		capacity := float64(l.workers) / l.service.Seconds()
		rate := l.load * capacity
		rng := rand.New(rand.NewPCG(l.seed, 7))
		// A sampler of the limit and the queue, every 10 ms.
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
				_, w := lim.Len()
				r.peakLimit, r.peakWaiting = max(r.peakLimit, lim.Limit()), max(r.peakWaiting, w)
			}
		})
		end := time.Now().Add(l.dur)
		var calls sync.WaitGroup
		for time.Now().Before(end) {
			b := l.lo + time.Duration(rng.Int64N(int64(l.hi-l.lo)+1))
			calls.Go(func() { s.serve(t.Context(), b) })
			r.requests++
			time.Sleep(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		}
		calls.Wait()
		close(stop)
		wg.Wait()
		r.goodput = float64(s.good.Load()) / (capacity * l.dur.Seconds())
		r.refused = float64(s.refused.Load()) / float64(r.requests)
		r.cut = float64(s.cut.Load()) / float64(r.requests)
		r.refusedWarm = s.refusedWarm.Load()
		if len(s.lat) > 0 {
			slices.Sort(s.lat)
			r.p99 = s.lat[len(s.lat)*99/100]
		}
	})
	return r
}

func adaptive(opts ...overload.Option) func() (*admission.Admitter, *overload.Limiter, error) {
	return func() (*admission.Admitter, *overload.Limiter, error) {
		l, err := overload.NewLimiter(append([]overload.Option{overload.WithArrivalOrder()}, opts...)...)
		if err != nil {
			return nil, nil, err
		}
		g, err := admission.NewAdmitter(admission.Config{Limits: admission.DefaultLimits(), Limiter: l})
		return g, l, err
	}
}

// TestDefaultQueue: [admission.DefaultQueue] in front of handlers that
// share GOMAXPROCS workers (bound by the CPU) refuses and serves what a
// queue of as many slots with a backlog of 1 000 does, within half a point,
// below capacity and at 2×: its backlog is not what refuses. (With 10
// workers, a backlog of 0 or 1 refuses 12.8 % and 8.8 % of the calls at
// 0.8× where 1 000 refuses 0.5 %.)
func TestDefaultQueue(t *testing.T) {
	workers := runtime.GOMAXPROCS(0)
	q := admission.DefaultQueue()
	require.Equal(t, workers, q.Limit())
	require.Equal(t, admission.DefaultBacklogPerSlot*workers, q.Backlog())
	withQueue := func(q func() *overload.Limiter) func() (*admission.Admitter, *overload.Limiter, error) {
		return func() (*admission.Admitter, *overload.Limiter, error) {
			q := q()
			g, err := admission.NewAdmitter(admission.Config{Limits: admission.DefaultLimits(), Limiter: q})
			return g, q, err
		}
	}
	unbounded := func() *overload.Limiter {
		q, err := admission.NewQueue(workers, 1000)
		require.NoError(t, err)
		return q
	}
	for _, x := range []float64{0.8, 2} {
		run := func(q func() *overload.Limiter) result {
			return load{workers: workers, service: 20 * time.Millisecond, load: x, dur: 30 * time.Second,
				lo: 100 * time.Millisecond, hi: time.Second, seed: 1, newAdmit: withQueue(q)}.run(t)
		}
		d, u := run(admission.DefaultQueue), run(unbounded)
		t.Logf("%.1f× load, %d workers: DefaultQueue goodput %.1f %% of capacity, %.1f %% refused; backlog 1 000: %.1f %%, %.1f %%",
			x, workers, 100*d.goodput, 100*d.refused, 100*u.goodput, 100*u.refused)
		assert.InDelta(t, u.refused, d.refused, 0.005, "%.1f×: refused", x)
		assert.InDelta(t, u.goodput, d.goodput, 0.005, "%.1f×: goodput", x)
	}
}

// TestAdaptiveAdmissionDefaults: a server's adaptive admission with every
// default ([overload.NewLimiter] with [overload.WithArrivalOrder] only, its
// maximum [overload.DefaultMaxLimit]) in front of handlers sharing 10
// workers keeps up with a fixed queue of exactly those 10 slots: at 2× and
// 5× it serves ≥ 95 % of capacity (99.8–100 %), and below capacity it
// refuses nothing. Overloaded, its limit stays near the workers (peaks of
// 22 and 28 at 2× and 5×, far from the maximum of 1 000) and the good
// calls' p99 at 60–66 ms: the maximum does not let work pile up in the
// handlers. (Below capacity it climbs higher, to 46 at 0.8×, refusing
// nothing: what runs then does not queue.) On issue 38's main (ca687b3)
// the same run piled up: peaks of 393 and 198, p99 556 and 416 ms.
func TestAdaptiveAdmissionDefaults(t *testing.T) {
	for _, c := range []struct {
		load      float64
		minGood   float64
		maxRefuse float64
	}{
		{0.8, 0.78, 0},
		{2, 0.95, 0.55},
		{5, 0.95, 0.85},
	} {
		r := load{workers: 10, service: 20 * time.Millisecond, load: c.load, dur: 60 * time.Second,
			lo: 100 * time.Millisecond, hi: time.Second, seed: 1, newAdmit: adaptive()}.run(t)
		t.Logf("%.1f× load: goodput %.1f %% of capacity, %.1f %% refused (%d after 10 s), p99 %v, peak limit %d",
			c.load, 100*r.goodput, 100*r.refused, r.refusedWarm, r.p99, r.peakLimit)
		assert.GreaterOrEqual(t, r.goodput, c.minGood, "%.1f×", c.load)
		assert.LessOrEqual(t, r.refused, c.maxRefuse, "%.1f×", c.load)
		if c.load > 1 {
			assert.Less(t, r.peakLimit, 4*10, "%.1f×: the limit piles work up in the handlers", c.load)
			assert.Less(t, r.p99, 100*time.Millisecond, "%.1f×: good calls wait in the handlers", c.load)
		}
	}
}

// TestAdaptiveAdmissionDefaultsIOBound: the same default maximum in front
// of handlers that mostly wait (400 at once, 200 ms each: on a database, on
// other services) at 0.8× refuses nothing once the limit has climbed from
// [overload.DefaultInitialLimit] (5 550 refusals in the first 10 s, 5.8 %
// of the 60 s; none after): the limit must climb far above any multiple of
// GOMAXPROCS (with a maximum of 64, 80 % are refused).
func TestAdaptiveAdmissionDefaultsIOBound(t *testing.T) {
	r := load{workers: 400, service: 200 * time.Millisecond, load: 0.8, dur: 60 * time.Second,
		lo: 300 * time.Millisecond, hi: time.Second, seed: 1, newAdmit: adaptive()}.run(t)
	t.Logf("0.8× load: goodput %.1f %% of capacity, %.1f %% refused (%d after 10 s), peak limit %d",
		100*r.goodput, 100*r.refused, r.refusedWarm, r.peakLimit)
	assert.LessOrEqual(t, r.refused, 0.10)
	assert.Zero(t, r.refusedWarm, "refused after the limit's climb")
	assert.Greater(t, r.peakLimit, 400)
}

var figures = flag.Bool("admission.figures", false, "TestDefaultsFigures: print the tables the defaults' doc comments quote (about 15 s)")

// TestDefaultsFigures prints the measurements behind [admission.DefaultBacklogPerSlot]
// and [overload.DefaultMaxLimit]: go test -run TestDefaultsFigures -v -admission.figures ./deadline/admission.
func TestDefaultsFigures(t *testing.T) {
	if !*figures {
		t.Skip("run with -admission.figures")
	}
	fixed := func(limit, backlog int) func() (*admission.Admitter, *overload.Limiter, error) {
		return func() (*admission.Admitter, *overload.Limiter, error) {
			q, err := admission.NewQueue(limit, backlog)
			if err != nil {
				return nil, nil, err
			}
			g, err := admission.NewAdmitter(admission.Config{Limits: admission.DefaultLimits(), Limiter: q})
			return g, q, err
		}
	}
	type row struct {
		name     string
		newAdmit func() (*admission.Admitter, *overload.Limiter, error)
	}
	for _, x := range []float64{0.8, 0.95, 1, 2, 5} {
		for _, c := range []row{
			{"adaptive, defaults", adaptive()},
			{"NewQueue(10, 0)", fixed(10, 0)},
			{"NewQueue(10, 1)", fixed(10, 1)},
			{"NewQueue(10, 5)", fixed(10, 5)},
			{"NewQueue(10, 10)", fixed(10, 10)},
			{"NewQueue(10, 20)", fixed(10, 20)},
			{"NewQueue(10, 1000)", fixed(10, 1000)},
		} {
			r := load{workers: 10, service: 20 * time.Millisecond, load: x, dur: 60 * time.Second,
				lo: 100 * time.Millisecond, hi: time.Second, seed: 1, newAdmit: c.newAdmit}.run(t)
			t.Logf("10 workers × 20 ms, %4.2f×, %-20s goodput %5.1f %%, refused %5.1f %%, p99 %3d ms, peak limit %3d, peak waiting %3d",
				x, c.name, 100*r.goodput, 100*r.refused, r.p99.Milliseconds(), r.peakLimit, r.peakWaiting)
		}
	}
	for _, c := range []row{
		{"adaptive, defaults", adaptive()},
		{"adaptive, max 256", adaptive(overload.WithLimitRange(1, 20, 256))},
		{"adaptive, max 64", adaptive(overload.WithLimitRange(1, 20, 64))},
		{"adaptive, max 16", adaptive(overload.WithLimitRange(1, 16, 16))},
	} {
		r := load{workers: 400, service: 200 * time.Millisecond, load: 0.8, dur: 60 * time.Second,
			lo: 300 * time.Millisecond, hi: time.Second, seed: 1, newAdmit: c.newAdmit}.run(t)
		t.Logf("400 workers × 200 ms, 0.80×, %-20s goodput %5.1f %%, refused %5.1f %% (%d after 10 s), peak limit %3d",
			c.name, 100*r.goodput, 100*r.refused, r.refusedWarm, r.peakLimit)
	}
}

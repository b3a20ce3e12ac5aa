package overload

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline/internal/cputime"
)

func newLimiter(t *testing.T, opts ...Option) *Limiter {
	t.Helper()
	l, err := NewLimiter(opts...)
	require.NoError(t, err)
	return l
}

func TestNewLimiterRejectsBadOptions(t *testing.T) {
	for _, c := range []struct {
		opt   Option
		field string
	}{
		{WithFixedLimit(0), "overload.WithFixedLimit"},
		{WithLimitRange(0, 1, 2), "overload.WithLimitRange"},
		{WithLimitRange(5, 4, 10), "overload.WithLimitRange"},
		{WithLimitRange(1, 11, 10), "overload.WithLimitRange"},
		{WithBacklog(-1), "overload.WithBacklog"},
		{WithLatencyTolerance(0.9), "overload.WithLatencyTolerance"},
		{WithLimitWindow(0), "overload.WithLimitWindow"},
		{WithBreaker(WithFailureRatio(0, 1)), "overload.WithFailureRatio ratio"},
		{WithBreaker(WithFailureRatio(0.5, 0)), "overload.WithFailureRatio minCalls"},
		{WithBreaker(WithFailureWindow(0)), "overload.WithFailureWindow"},
		{WithBreaker(WithOpenFor(-1)), "overload.WithOpenFor"},
		{WithBreaker(WithProbes(0, 0)), "overload.WithProbes n"},
		{WithBreaker(WithProbes(1, -1)), "overload.WithProbes ceiling"},
	} {
		_, err := NewLimiter(c.opt)
		var oe *OptionError
		require.ErrorAs(t, err, &oe, c.field)
		assert.Equal(t, c.field, oe.Option)
		assert.Equal(t, "invalid_policy", oe.ErrorType())
		assert.Contains(t, oe.Error(), "must be")
	}
	_, err := NewLimiter(nil)
	require.NoError(t, err, "a nil option is ignored")
	_, err = NewLimiter(WithBreaker(nil))
	require.NoError(t, err, "a nil breaker option is ignored")
}

func TestLimiterHotPath(t *testing.T) {
	l := newLimiter(t, WithFixedLimit(2), WithBacklog(0))
	a, ok := l.TryAcquire("r")
	require.True(t, ok)
	b, ok := l.TryAcquire("r")
	require.True(t, ok)
	_, ok = l.TryAcquire("r")
	require.False(t, ok, "the limit is 2")
	_, err := l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 0)
	var le *RefusedError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, CauseQueueFull, le.Cause)
	assert.ErrorIs(t, err, ErrLimited)
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "the downstream's capacity, not the budget")
	a.Done(OutcomeSuccess)
	a.Done(OutcomeSuccess) // a second Done does nothing
	running, waiting := l.Len()
	assert.Equal(t, 1, running)
	assert.Equal(t, 0, waiting)
	b.Done(OutcomeIgnore)
	var zero Permit
	zero.Done(OutcomeSuccess)
	running, _ = l.Len()
	assert.Equal(t, 0, running)
}

// TestLimiterQueueLeavesWhenItCannotFinish: a waiting call leaves at once,
// typed, when its deadline less its need passes, and is refused on arrival
// when it could not finish even from the head of the queue.
func TestLimiterQueueLeavesWhenItCannotFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, WithFixedLimit(1))
		held, ok := l.TryAcquire("r")
		require.True(t, ok)
		start := time.Now()
		_, err := l.Acquire(context.Background(), "r", start.Add(100*time.Millisecond), 30*time.Millisecond)
		var le *RefusedError
		require.ErrorAs(t, err, &le)
		assert.Equal(t, CauseQueueTimeout, le.Cause)
		assert.True(t, le.Queued)
		assert.Equal(t, 70*time.Millisecond, le.Waited, "it left as soon as 30ms were left of its 100ms")
		assert.Equal(t, 30*time.Millisecond, le.Remaining)
		assert.Equal(t, 1, le.Position)
		assert.Contains(t, le.Error(), "queue_timeout")

		_, err = l.Acquire(context.Background(), "r", time.Now().Add(10*time.Millisecond), 20*time.Millisecond)
		require.ErrorAs(t, err, &le)
		assert.Equal(t, CauseQueueTimeout, le.Cause)
		assert.False(t, le.Queued, "refused on arrival: its need exceeds its budget")
		held.Done(OutcomeSuccess)
	})
}

// TestLimiterHandsOffInOrder: FIFO while the queue empties regularly, the
// latest deadline (less twice the need) first once it has stood for
// LIFOAfter.
func TestLimiterHandsOffInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, WithFixedLimit(1), WithBacklog(10))
		held, ok := l.TryAcquire("r")
		require.True(t, ok)
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		wait := func(name string, budget, need time.Duration) {
			wg.Go(func() {
				p, err := l.Acquire(context.Background(), "r", time.Now().Add(budget), need)
				if err != nil {
					return
				}
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
				p.Done(OutcomeSuccess)
			})
			synctest.Wait()
		}
		wait("a", 5*time.Second, 0)
		wait("b", 5*time.Second, 0)
		held.Done(OutcomeSuccess) // the queue has not stood for LIFOAfter: FIFO
		wg.Wait()
		held, ok = l.TryAcquire("r")
		require.True(t, ok)
		wait("c", 2*time.Second, 0)
		wait("d", 3*time.Second, 0)
		wait("e", 3*time.Second, time.Second) // later than c, but needs 1s: 3s-2×1s < 2s
		time.Sleep(LIFOWait)
		held.Done(OutcomeSuccess)
		wg.Wait()
		assert.Equal(t, []string{"a", "b", "d", "c", "e"}, order)
	})
}

// LIFOWait is longer than LIFOAfter.
const LIFOWait = LIFOAfter + 50*time.Millisecond

// TestLimiterAdapts: the limit falls when latency rises above the
// baseline, and grows back (within twice what is in flight) when it falls.
func TestLimiterAdapts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, WithLimitRange(1, 40, 1000))
		run := func(d time.Duration, dur time.Duration) {
			var wg sync.WaitGroup
			for end := time.Now().Add(dur); time.Now().Before(end); time.Sleep(time.Millisecond) {
				for range 2 {
					p, ok := l.TryAcquire("r")
					if !ok {
						continue
					}
					wg.Go(func() {
						time.Sleep(d)
						p.Done(OutcomeSuccess)
					})
				}
			}
			wg.Wait()
		}
		run(20*time.Millisecond, 2*time.Second)
		calm := l.Limit()
		assert.GreaterOrEqual(t, calm, 40, "2 calls a millisecond of 20ms each keep 40 in flight")
		run(100*time.Millisecond, 2*time.Second)
		assert.Less(t, l.Limit(), calm/2, "latency 5× the baseline: the limit falls")
		run(20*time.Millisecond, 3*time.Second)
		assert.GreaterOrEqual(t, l.Limit(), 40, "back to the baseline: it grows again")
		assert.LessOrEqual(t, l.Limit(), 2*calm+20)
	})
}

// TestBreakerOpensAndProbes: sustained failures open it (ErrDownstreamOpen,
// distinct from a budget refusal), a cut by the caller's deadline is no
// failure, a probe needs twice its ceiling in budget, and probes close it.
func TestBreakerOpensAndProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := []BreakerOption{WithFailureRatio(0.5, 4), WithFailureWindow(10 * time.Second), WithOpenFor(time.Second), WithProbes(2, 100*time.Millisecond)}
		l := newLimiter(t, WithBreaker(b...))
		end := func(o Outcome) {
			p, ok := l.TryAcquire("r")
			require.True(t, ok)
			p.Done(o)
		}
		for range 10 {
			end(OutcomeCut)
		}
		assert.Equal(t, "closed", l.Breaker().State().String(), "cuts by the caller's deadline are no failures")
		for range 4 {
			end(OutcomeFailure)
		}
		assert.Equal(t, "open", l.Breaker().State().String())
		_, ok := l.TryAcquire("r")
		assert.False(t, ok)
		_, err := l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 0)
		assert.ErrorIs(t, err, ErrDownstreamOpen)
		assert.NotErrorIs(t, err, ErrLimited)
		assert.NotErrorIs(t, err, context.DeadlineExceeded)

		time.Sleep(time.Second)
		_, err = l.Acquire(context.Background(), "r", time.Now().Add(90*time.Millisecond), 0)
		assert.ErrorIs(t, err, ErrDownstreamOpen, "90ms cannot hold a 100ms probe")
		assert.Equal(t, "half_open", l.Breaker().State().String())
		p1, err := l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 0)
		require.NoError(t, err)
		assert.True(t, p1.Probe)
		assert.Equal(t, 100*time.Millisecond, p1.Ceiling)
		p2, err := l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 0)
		require.NoError(t, err)
		_, err = l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 0)
		assert.ErrorIs(t, err, ErrDownstreamOpen, "two probes at most")
		p1.Done(OutcomeSuccess)
		p2.Done(OutcomeSuccess)
		assert.Equal(t, "closed", l.Breaker().State().String())

		for range 4 {
			end(OutcomeFailure)
		}
		time.Sleep(time.Second)
		p, err := l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 0)
		require.NoError(t, err)
		p.Done(OutcomeFailure)
		assert.Equal(t, "open", l.Breaker().State().String(), "a failed probe opens it again")
	})
}

// TestLimiterConcurrent hammers the hot path and the queue from many
// goroutines: the limit is never exceeded and every slot comes back.
func TestLimiterConcurrent(t *testing.T) {
	l := newLimiter(t, WithFixedLimit(4), WithBacklog(64))
	var mu sync.Mutex
	inflight, most := 0, 0
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 200 {
				p, err := l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 0)
				if err != nil {
					continue
				}
				mu.Lock()
				inflight++
				most = max(most, inflight)
				mu.Unlock()
				mu.Lock()
				inflight--
				mu.Unlock()
				p.Done(OutcomeSuccess)
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, most, 4)
	running, waiting := l.Len()
	assert.Zero(t, running)
	assert.Zero(t, waiting)
}

// BenchmarkLimiterAdmit is the admission check on the hot path: a free
// slot, nobody waiting, the breaker closed (issue 31's goal: <= 50 ns, 0
// allocations).
func BenchmarkLimiterAdmit(b *testing.B) {
	// A limit no run reaches, so that the check is measured alone (the
	// slots are never freed); the breaker is checked too.
	l, err := NewLimiter(WithFixedLimit(math.MaxInt32), WithBreaker())
	require.NoError(b, err)
	b.ReportAllocs()
	// Also in CPU time of the thread (cpu-ns/op): on a shared machine the
	// wall clock counts the time other processes held the CPU.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const block = 1024
	var cpu time.Duration
	n := 0
	for b.Loop() {
		t0 := cputime.Thread()
		for range block {
			p, ok := l.TryAcquire("r")
			if !ok {
				b.Fatal("refused")
			}
			permitSink = p
		}
		cpu += cputime.Thread() - t0
		n++
	}
	b.ReportMetric(float64(cpu)/float64(n*block), "cpu-ns/op")
	b.ReportMetric(float64(b.Elapsed())/float64(n*block), "wall-ns/op")
}

var permitSink Permit

// BenchmarkAtomicBaseline is the floor BenchmarkLimiterAdmit is read
// against, run beside it so that the ratio holds on a loaded machine: a
// bare semaphore's take (a load and a compare-and-swap of one counter),
// measured the same way.
func BenchmarkAtomicBaseline(b *testing.B) {
	var inflight atomic.Int64
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const block = 1024
	var cpu time.Duration
	n := 0
	for b.Loop() {
		t0 := cputime.Thread()
		for range block {
			v := inflight.Load()
			if v >= math.MaxInt32 || !inflight.CompareAndSwap(v, v+1) {
				b.Fatal("refused")
			}
		}
		cpu += cputime.Thread() - t0
		n++
	}
	b.ReportMetric(float64(cpu)/float64(n*block), "cpu-ns/op")
	b.ReportMetric(float64(b.Elapsed())/float64(n*block), "wall-ns/op")
}

// BenchmarkLimiterAdmitRelease is a call's whole hold on a fixed limit
// (admission's Queue): the check and Done.
func BenchmarkLimiterAdmitRelease(b *testing.B) {
	l, err := NewLimiter(WithFixedLimit(64))
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		p, _ := l.TryAcquire("r")
		p.Done(OutcomeSuccess)
	}
}

// BenchmarkLimiterAdaptiveRelease is the same on the adaptive limit, whose
// Done learns the latency under the limiter's lock.
func BenchmarkLimiterAdaptiveRelease(b *testing.B) {
	l, err := NewLimiter()
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		p, _ := l.TryAcquire("r")
		p.Done(OutcomeSuccess)
	}
}

// BenchmarkLimiterAdmitParallel is the check from every CPU at once.
func BenchmarkLimiterAdmitParallel(b *testing.B) {
	l, err := NewLimiter(WithFixedLimit(1 << 20))
	require.NoError(b, err)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, _ := l.TryAcquire("r")
			p.Done(OutcomeSuccess)
		}
	})
}

// FuzzLimiterConfig: any configuration is either accepted, and then the
// limiter admits and frees a call, or refused with a PolicyError naming the
// option; nothing panics.
func FuzzLimiterConfig(f *testing.F) {
	f.Add(1, 20, 1000, 10, 1.25, int64(100*time.Millisecond), 0.5, 20, 3)
	f.Add(0, 0, 0, -1, 0.5, int64(0), 2.0, 0, 0)
	f.Fuzz(func(t *testing.T, lo, initial, hi, backlog int, tol float64, window int64, ratio float64, minCalls, probes int) {
		b := []BreakerOption{WithFailureRatio(ratio, minCalls), WithProbes(probes, 0)}
		l, err := NewLimiter(WithLimitRange(lo, initial, hi), WithBacklog(backlog),
			WithLatencyTolerance(tol), WithLimitWindow(time.Duration(window)), WithBreaker(b...))
		if err != nil {
			var oe *OptionError
			require.ErrorAs(t, err, &oe)
			require.NotEmpty(t, oe.Option)
			require.NotEmpty(t, oe.Allowed)
			return
		}
		p, ok := l.TryAcquire("r")
		require.True(t, ok, "a valid limiter admits its first call")
		p.Done(OutcomeSuccess)
		running, _ := l.Len()
		require.Zero(t, running)
	})
}

// BenchmarkLimiterPlaceDeepQueue measures how a newcomer is placed in a
// queue of n waiting calls in the overloaded order (the calls served before
// it counted, for the wait its place implies): admission's backlog at 10×
// overload holds about 1 600. The newcomer's context has ended, so it is
// refused once placed and the queue stays as it is.
func BenchmarkLimiterPlaceDeepQueue(b *testing.B) {
	for _, n := range []int{16, 1600, 16000} {
		b.Run(fmt.Sprintf("waiting=%d", n), func(b *testing.B) {
			l, err := NewLimiter(WithFixedLimit(1), WithBacklog(n+1))
			require.NoError(b, err)
			held, ok := l.TryAcquire("r")
			require.True(b, ok)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			now := time.Now()
			rng := rand.New(rand.NewPCG(1, 2))
			for range n {
				end := now.Add(time.Minute + time.Duration(rng.Int64N(int64(time.Minute))))
				wg.Go(func() { _, _ = l.Acquire(ctx, "r", end, 0) })
			}
			for {
				if _, w := l.Len(); w == n {
					break
				}
				time.Sleep(time.Millisecond)
			}
			time.Sleep(LIFOAfter + 10*time.Millisecond) // the overloaded order
			gone, stop := context.WithCancel(context.Background())
			stop()
			ends := make([]time.Time, 1024)
			for i := range ends {
				ends[i] = now.Add(time.Minute + time.Duration(rng.Int64N(int64(time.Minute))))
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := l.Acquire(gone, "r", ends[i%len(ends)], 0); err == nil {
					b.Fatal("placed a call whose context had ended")
				}
				i++
			}
			b.StopTimer()
			cancel()
			wg.Wait()
			held.Done(OutcomeSuccess)
		})
	}
}

// TestLimiterEvictsTheLastServed: a full backlog under the overloaded
// order refuses the call it would serve last, never the one it would serve
// first, and says where that call stood. Before, it evicted the oldest
// waiting call: a 1 s call with 850 ms left made room for a 100 ms call,
// which then timed out, and nothing was served.
func TestLimiterEvictsTheLastServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, WithFixedLimit(1), WithBacklog(1))
		held, ok := l.TryAcquire("r")
		require.True(t, ok)
		type result struct {
			p   Permit
			err error
		}
		long := make(chan result, 1)
		go func() {
			p, err := l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 10*time.Millisecond)
			long <- result{p, err}
		}()
		synctest.Wait()
		time.Sleep(150 * time.Millisecond) // a standing queue: the overloaded order
		_, err := l.Acquire(context.Background(), "r", time.Now().Add(100*time.Millisecond), 10*time.Millisecond)
		var le *RefusedError
		require.ErrorAs(t, err, &le, "the newcomer would be served after the 1 s call: it is the one refused")
		assert.Equal(t, CauseQueueFull, le.Cause)
		assert.Equal(t, 2, le.Position, "behind the 1 s call")
		held.Done(OutcomeSuccess)
		r := <-long
		require.NoError(t, r.err, "the call served first keeps its place")
		r.p.Done(OutcomeSuccess)

		// The other way round: a newcomer served first evicts the waiting
		// call served last, which learns where it stood.
		held, ok = l.TryAcquire("r")
		require.True(t, ok)
		short := make(chan result, 1)
		go func() {
			p, err := l.Acquire(context.Background(), "r", time.Now().Add(400*time.Millisecond), 10*time.Millisecond)
			short <- result{p, err}
		}()
		synctest.Wait()
		time.Sleep(150 * time.Millisecond)
		newer := make(chan result, 1)
		go func() {
			p, err := l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 10*time.Millisecond)
			newer <- result{p, err}
		}()
		r = <-short
		require.ErrorAs(t, r.err, &le)
		assert.Equal(t, CauseQueueFull, le.Cause)
		assert.True(t, le.Queued)
		assert.Equal(t, 2, le.Position, "evicted from behind the newcomer, beyond the backlog of 1")
		held.Done(OutcomeSuccess)
		r = <-newer
		require.NoError(t, r.err)
		r.p.Done(OutcomeSuccess)
	})
}

// TestLimiterRejectsANegativeNeed: a negative need is bad input, said at
// once, not a wait past the deadline (it once waited an hour).
func TestLimiterRejectsANegativeNeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, WithFixedLimit(1))
		held, ok := l.TryAcquire("r")
		require.True(t, ok)
		start := time.Now()
		_, err := l.Acquire(context.Background(), "r", start.Add(100*time.Millisecond), -time.Hour)
		var oe *OptionError
		require.ErrorAs(t, err, &oe)
		assert.Contains(t, oe.Error(), "need")
		assert.Zero(t, time.Since(start), "refused at once")
		held.Done(OutcomeSuccess)
		running, waiting := l.Len()
		assert.Zero(t, running+waiting)
	})
}

// TestPermitCopiesFreeOnce: a Permit is a value; whichever copy is Done
// first frees the slot, and the others do nothing. Before, q := p;
// p.Done(); q.Done() left running at −1 and let two extra calls in.
func TestPermitCopiesFreeOnce(t *testing.T) {
	l := newLimiter(t, WithFixedLimit(1), WithBacklog(0))
	p, ok := l.TryAcquire("r")
	require.True(t, ok)
	q := p
	p.Done(OutcomeSuccess)
	q.Done(OutcomeSuccess)
	running, _ := l.Len()
	assert.Zero(t, running)
	a, ok := l.TryAcquire("r")
	require.True(t, ok)
	_, ok = l.TryAcquire("r")
	assert.False(t, ok, "the limit of 1 holds")
	q.Done(OutcomeSuccess) // a stale copy, its slot now another's
	running, _ = l.Len()
	assert.Equal(t, 1, running, "a's slot stays taken")
	c := a
	c.Done(OutcomeSuccess) // a copy of the holder frees it, once
	a.Done(OutcomeSuccess)
	running, _ = l.Len()
	assert.Zero(t, running)

	// Many held at once and copied, on an adaptive limiter.
	al := newLimiter(t)
	var held []Permit
	for range 10 {
		p, ok := al.TryAcquire("r")
		require.True(t, ok)
		held = append(held, p, p)
	}
	for i := range held {
		held[i].Done(OutcomeIgnore)
	}
	running, _ = al.Len()
	assert.Zero(t, running)
}

// TestBreakerTransitionsObservable: every change of the breaker's state
// reaches OnTransition once, in order, with the counts that opened it, and
// the callback may call the limiter (it runs outside its lock).
func TestBreakerTransitionsObservable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []Transition
		var l *Limiter
		b := []BreakerOption{WithFailureRatio(0.5, 4), WithFailureWindow(10 * time.Second), WithOpenFor(time.Second), WithProbes(1, 0),
			WithOnTransition(func(tr Transition) {
				assert.Equal(t, tr.To, l.Breaker().State(), "the state is already the new one")
				got = append(got, tr)
			})}
		l = newLimiter(t, WithBreaker(b...))
		start := time.Now()
		for range 4 {
			p, ok := l.TryAcquire("r")
			require.True(t, ok)
			p.Done(OutcomeFailure)
		}
		time.Sleep(time.Second)
		p, err := l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 0)
		require.NoError(t, err)
		p.Done(OutcomeSuccess)
		assert.Equal(t, []Transition{
			{From: Closed, To: Open, At: start, Failures: 4, Calls: 4},
			{From: Open, To: HalfOpen, At: start.Add(time.Second)},
			{From: HalfOpen, To: Closed, At: start.Add(time.Second)},
		}, got)
	})
}

// TestLimiterStandingWait checks CoDel's bound in a queue ordered by
// arrival: once the queue has stood for LIFOAfter, a call waits at most
// StandingWaitNeeds × its need and is refused with CauseStandingQueue,
// its budget mostly left; a client's queue, ordered by its own deadlines,
// lets it wait while it can still finish.
func TestLimiterStandingWait(t *testing.T) {
	for _, tt := range []struct {
		name    string
		arrival bool
		cause   Cause
		waited  time.Duration
	}{
		{"arrival order: bounded", true, CauseStandingQueue, LIFOAfter + StandingWaitNeeds*20*time.Millisecond},
		{"deadline order: until it cannot finish", false, CauseQueueTimeout, time.Second - 20*time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := []Option{WithFixedLimit(1), WithBacklog(5)}
				if tt.arrival {
					opts = append(opts, WithArrivalOrder())
				}
				l := newLimiter(t, opts...)
				holder, err := l.Acquire(t.Context(), "r", time.Time{}, 0)
				require.NoError(t, err)
				start := time.Now()
				_, err = l.Acquire(t.Context(), "r", start.Add(time.Second), 20*time.Millisecond)
				var le *RefusedError
				require.ErrorAs(t, err, &le)
				assert.ErrorIs(t, err, ErrLimited)
				assert.Equal(t, tt.cause, le.Cause)
				assert.True(t, le.Queued)
				assert.Equal(t, tt.waited, le.Waited)
				assert.Equal(t, time.Since(start), le.Waited)
				assert.Contains(t, err.Error(), tt.cause.String())
				holder.Done(OutcomeSuccess)
				_, waiting := l.Len()
				assert.Zero(t, waiting)
			})
		})
	}
}

// TestLimiterStandingWaitFollowsTheMeanLatency: with an adaptive limit
// in arrival order (a server's), a cheap call in a standing queue waits
// twice the limiter's mean latency when that is longer than its own need:
// the slots turn over at the pace of the costly calls.
func TestLimiterStandingWaitFollowsTheMeanLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, WithLimitRange(1, 1, 1), WithBacklog(5), WithArrivalOrder())
		p, err := l.Acquire(t.Context(), "slow", time.Time{}, 0)
		require.NoError(t, err)
		time.Sleep(100 * time.Millisecond)
		p.Done(OutcomeSuccess) // the mean latency: 100 ms
		holder, err := l.Acquire(t.Context(), "slow", time.Time{}, 0)
		require.NoError(t, err)
		_, err = l.Acquire(t.Context(), "fast", time.Now().Add(time.Second), 2*time.Millisecond)
		var le *RefusedError
		require.ErrorAs(t, err, &le)
		assert.Equal(t, CauseStandingQueue, le.Cause)
		assert.Equal(t, LIFOAfter+StandingWaitNeeds*100*time.Millisecond, le.Waited)
		holder.Done(OutcomeSuccess)
	})
}

// TestLimiterBaselineDoesNotSink: a route's baseline, and the need the
// limiter derives from it, do not sink with time against a downstream with
// no queue at all, and no call is refused. Built as the lowest of a moving
// average over 32 calls, the baseline sank as far as that average's noise
// reached: here from a need of 68 ms after 10 s to 63 ms after two
// minutes (the route's p90: 86 ms), the limit down to the 48 calls in
// flight at the end (104 now); in scenario 10 it
// went from 34 to 31 ms under a typical 41 ms, beyond the tolerance, and
// every window then looked queued with none (the propagated 10× cell's bad
// runs). (The first, fastest calls of the cold start still set it low
// here, the need 10–15 % under the p90: under the tolerance, and when it is
// not, the windows above it now start the check that raises it.)
func TestLimiterBaselineDoesNotSink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		route := newLogNormalRoute(40*time.Millisecond, 0.6, 10)
		l := newLimiter(t)
		var wg sync.WaitGroup
		var refused atomic.Int64 // after the first 10 s
		start := time.Now()
		call := func(service time.Duration) {
			defer wg.Done()
			p, err := l.Acquire(context.Background(), "r", time.Now().Add(time.Second), 0)
			if err != nil {
				if time.Since(start) >= 10*time.Second {
					refused.Add(1)
				}
				return
			}
			time.Sleep(service)
			p.Done(OutcomeSuccess)
		}
		// A cold start: as many calls at once as the limit lets go out,
		// then one a millisecond (about 48 in flight) for two minutes.
		for range DefaultInitialLimit {
			wg.Add(1)
			go call(route.draw())
		}
		var early time.Duration
		for end := start.Add(2 * time.Minute); time.Now().Before(end); time.Sleep(time.Millisecond) {
			if early == 0 && time.Since(start) >= 10*time.Second {
				early = l.Need("r")
			}
			wg.Add(1)
			go call(route.draw())
		}
		wg.Wait()
		p90 := route.p90()
		need := l.Need("r")
		t.Logf("need after 10 s %v, after 2 min %v (the route's p90 %v), limit %d, refused %d", early, need, p90, l.Limit(), refused.Load())
		assert.GreaterOrEqual(t, float64(need), 0.95*float64(early), "the need has not sunk with time")
		assert.GreaterOrEqual(t, float64(need), 0.85*float64(p90), "the need is about the route's p90 with no queue")
		assert.Zero(t, refused.Load(), "a downstream with no queue: no call refused after the cold start")
	})
}

// TestLimiterAdmitsLikelyCallsWhenIdle: on a downstream under no pressure,
// a call whose budget lies between its route's median and p90 is more
// likely to finish than not, and is let in from a free slot; while the
// downstream shows pressure (an overload answer within pressureHold, or
// every slot taken) the entry rule keeps the p90 need and refuses it at
// once. Before, it was refused on an idle downstream too: in scenario 10's
// two-route model, the slow route's 300 ms calls (median about 200 ms)
// after the overload, and recovery never came within the run.
func TestLimiterAdmitsLikelyCallsWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const median = 200 * time.Millisecond
		route := newLogNormalRoute(median, 0.4, 12)
		l := newLimiter(t)
		// Learn the route: ten calls at a time for 20 s, no queue.
		var wg sync.WaitGroup
		for w := 0; w < 10; w++ {
			service := make([]time.Duration, 100)
			for i := range service {
				service[i] = route.draw()
			}
			wg.Go(func() {
				for _, s := range service {
					p, err := l.Acquire(context.Background(), "r", time.Now().Add(10*time.Second), 0)
					if !assert.NoError(t, err) {
						return
					}
					time.Sleep(s)
					p.Done(OutcomeSuccess)
				}
			})
		}
		wg.Wait()
		time.Sleep(pressureHold)

		p90 := route.p90() // 333 ms
		budget := 280 * time.Millisecond
		t.Logf("need %v, now %v (the route's median %v, p90 %v), budget %v", l.Need("r"), l.NeedAt("r", time.Now()), median, p90, budget)
		require.Greater(t, l.Need("r"), budget, "the p90 need refuses the budget")
		require.Less(t, l.NeedAt("r", time.Now()), budget, "idle: the typical latency admits it")
		require.InDelta(t, float64(median), float64(l.NeedAt("r", time.Now())), 0.15*float64(median), "the typical latency is about the median")

		acquire := func() (Permit, error) {
			return l.Acquire(context.Background(), "r", time.Now().Add(budget), 0)
		}
		p, err := acquire()
		require.NoError(t, err, "idle: a call that is likely to finish is let in")
		// The downstream answers that it is overloaded: pressure.
		p.Done(OutcomeOverload)
		assert.Equal(t, l.Need("r"), l.NeedAt("r", time.Now()))
		_, err = acquire()
		var re *RefusedError
		require.ErrorAs(t, err, &re, "after an overload answer the p90 need holds")
		assert.Equal(t, CauseQueueTimeout, re.Cause)
		assert.Equal(t, 1, re.Position)
		assert.False(t, re.Queued)
		time.Sleep(pressureHold)
		p, err = acquire()
		require.NoError(t, err, "pressureHold after the last overload answer, idle again")
		p.Done(OutcomeIgnore)

		// Every slot taken: refused at once, not queued.
		held := make([]Permit, 0, l.Limit())
		for {
			q, ok := l.TryAcquire("r")
			if !ok {
				break
			}
			held = append(held, q)
		}
		assert.Equal(t, l.Need("r"), l.NeedAt("r", time.Now()))
		_, err = acquire()
		require.ErrorAs(t, err, &re, "with every slot taken the p90 need holds")
		assert.Equal(t, CauseQueueTimeout, re.Cause)
		assert.False(t, re.Queued)
		for i := range held {
			held[i].Done(OutcomeIgnore)
		}
		p, err = acquire()
		require.NoError(t, err, "slots free again")
		p.Done(OutcomeIgnore)
	})
}

// logNormalRoute draws a route's service times, log-normal around median
// with log deviation sigma, from a seeded source (one seed per test).
type logNormalRoute struct {
	median time.Duration
	sigma  float64
	rng    *rand.Rand
}

func newLogNormalRoute(median time.Duration, sigma float64, seed uint64) *logNormalRoute {
	return &logNormalRoute{median, sigma, rand.New(rand.NewPCG(38, seed))}
}

func (r *logNormalRoute) draw() time.Duration {
	return time.Duration(float64(r.median) * math.Exp(r.sigma*r.rng.NormFloat64()))
}

// p90 is the route's ninth decile, what Limiter.Need aims at with no queue.
func (r *logNormalRoute) p90() time.Duration {
	return time.Duration(float64(r.median) * math.Exp(needZ*r.sigma))
}

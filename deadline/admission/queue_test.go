package admission_test

import (
	"context"
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

// queued returns an Admitter with a queue of limit slots and backlog
// waiting calls, a 1s maximum and a 10ms floor, and st's learned service
// times when st is not nil.
func queued(t *testing.T, limit, backlog int, st *serviceTimes) *admission.Admitter {
	t.Helper()
	q, err := admission.NewQueue(limit, backlog)
	require.NoError(t, err)
	c := admission.Config{Limits: admission.Limits{MaxBudget: time.Second, Floor: 10 * time.Millisecond}, Limiter: q}
	if st != nil {
		c.Learned = &admission.Learned{Recorder: st, Estimator: st, Threshold: 0.05}
	}
	g, err := admission.NewAdmitter(c)
	require.NoError(t, err)
	return g
}

func budget(d time.Duration) admission.Inbound { return admission.Inbound{Present: true, Budget: d} }

// outcome is what one call got from the queue, and when.
type outcome struct {
	a  admission.Decision
	tk admission.Ticket
	at time.Duration // since the test's start
}

// arrive starts a call of route with budget b on its own goroutine, and
// returns where its outcome will be.
func arrive(ctx context.Context, g *admission.Admitter, wg *sync.WaitGroup, b time.Duration) *outcome {
	o := &outcome{}
	start := time.Now()
	wg.Go(func() {
		o.a, o.tk = g.Admit(ctx, "r", budget(b), deadline.Deadline{})
		o.at = time.Since(start)
	})
	synctest.Wait() // it has its slot, or waits for one
	return o
}

func TestQueueLimitsConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := queued(t, 2, 100, nil)
		var running, most atomic.Int32
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * time.Millisecond)
				a, tk := g.Admit(t.Context(), "r", budget(time.Second), deadline.Deadline{})
				if a.Refused() {
					// The queue stands from 100 ms on: a call that waited
					// there StandingWaitNeeds × the floor is refused as
					// overload.
					assert.Equal(t, admission.RefusalQueueFull, a.Refusal)
					return
				}
				n := running.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(10 * time.Millisecond)
				running.Add(-1)
				tk.Done(t.Context(), true)
			})
		}
		wg.Wait()
		assert.Equal(t, int32(2), most.Load(), "never more than the limit at once, and the limit used")
	})
}

func TestQueueWaitsForASlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := queued(t, 1, 10, nil)
		var wg sync.WaitGroup
		first := arrive(t.Context(), g, &wg, time.Second)
		second := arrive(t.Context(), g, &wg, time.Second)
		time.Sleep(30 * time.Millisecond)
		first.tk.Done(t.Context(), true)
		wg.Wait()
		assert.False(t, first.a.Queued)
		assert.False(t, second.a.Refused())
		assert.True(t, second.a.Queued)
		assert.Equal(t, 30*time.Millisecond, second.a.QueueWait)
		assert.Equal(t, time.Second, second.a.Budget, "the budget as it arrived")
		second.tk.Done(t.Context(), true)
	})
}

// TestQueueLeavesWhenItCannotFinish checks that a waiting call leaves the
// queue as soon as what is left of its budget can no longer cover what the
// route needs: the floor while nothing is learned, the learned service time
// once it is.
func TestQueueLeavesWhenItCannotFinish(t *testing.T) {
	for _, tt := range []struct {
		name   string
		st     *serviceTimes
		budget time.Duration
		leave  time.Duration
	}{
		// Both leave before the queue has stood for StandingWaitNeeds ×
		// their need (at 120 ms and 280 ms).
		{"nothing learned: at the deadline less the floor", nil, 105 * time.Millisecond, 95 * time.Millisecond},
		{"learned: at the deadline less the service time", learned("r", 90), 300 * time.Millisecond, 200 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := queued(t, 1, 10, tt.st)
				var wg sync.WaitGroup
				holder := arrive(t.Context(), g, &wg, time.Second)
				waiter := arrive(t.Context(), g, &wg, tt.budget)
				wg.Wait()
				assert.Equal(t, admission.RefusalQueueTimeout, waiter.a.Refusal, "refusal %s", waiter.a.Refusal)
				assert.InDelta(t, float64(tt.leave), float64(waiter.at), float64(2*time.Millisecond), "left at %v", waiter.at)
				assert.Equal(t, waiter.at, waiter.a.QueueWait)
				_, waiting := g.Limiter().Len()
				assert.Zero(t, waiting)
				holder.tk.Done(t.Context(), true)
				running, _ := g.Limiter().Len()
				assert.Zero(t, running, "the holder's slot is freed, nobody takes it")
			})
		})
	}
}

func TestQueueLeavesWhenTheRequestEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := queued(t, 1, 10, nil)
		var wg sync.WaitGroup
		holder := arrive(t.Context(), g, &wg, time.Second)
		ctx, cancel := context.WithCancel(t.Context())
		waiter := arrive(ctx, g, &wg, time.Second)
		time.Sleep(5 * time.Millisecond)
		cancel()
		wg.Wait()
		assert.Equal(t, admission.RefusalQueueTimeout, waiter.a.Refusal)
		assert.Equal(t, 5*time.Millisecond, waiter.at, "at once")
		_, waiting := g.Limiter().Len()
		assert.Zero(t, waiting)
		holder.tk.Done(t.Context(), true)

		// A canceled request that finds every slot taken does not wait.
		holder = arrive(t.Context(), g, &wg, time.Second)
		a, _ := g.Admit(ctx, "r", budget(time.Second), deadline.Deadline{})
		assert.Equal(t, admission.RefusalQueueTimeout, a.Refusal)
		holder.tk.Done(t.Context(), true)
		wg.Wait()
	})
}

func TestQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := queued(t, 1, 1, nil)
		var wg sync.WaitGroup
		holder := arrive(t.Context(), g, &wg, time.Second)
		waiter := arrive(t.Context(), g, &wg, time.Second)
		a, _ := g.Admit(t.Context(), "r", budget(time.Second), deadline.Deadline{})
		assert.Equal(t, admission.RefusalQueueFull, a.Refusal, "FIFO: the newcomer is refused")
		assert.False(t, a.Queued, "refused on arrival: it did not wait")
		assert.Zero(t, a.QueueWait)
		holder.tk.Done(t.Context(), true)
		wg.Wait()
		assert.False(t, waiter.a.Refused())
		waiter.tk.Done(t.Context(), true)
	})
	synctest.Test(t, func(t *testing.T) {
		g := queued(t, 1, 0, nil)
		var wg sync.WaitGroup
		holder := arrive(t.Context(), g, &wg, time.Second)
		a, _ := g.Admit(t.Context(), "r", budget(time.Second), deadline.Deadline{})
		assert.Equal(t, admission.RefusalQueueFull, a.Refusal, "no backlog: nobody waits")
		holder.tk.Done(t.Context(), true)
		wg.Wait()
	})
}

// TestQueueOrder checks the adaptive LIFO: arrival order while the queue
// has held waiting calls for less than LIFOAfter, the newest first after.
func TestQueueOrder(t *testing.T) {
	for _, tt := range []struct {
		name    string
		release time.Duration // after the first waiter arrived
		first   int           // the waiter served first
	}{
		{"short queue: FIFO", admission.LIFOAfter - 10*time.Millisecond, 0},
		{"standing queue: LIFO", admission.LIFOAfter, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := queued(t, 1, 10, nil)
				var wg sync.WaitGroup
				holder := arrive(t.Context(), g, &wg, time.Second)
				var ws []*outcome
				for range 3 {
					ws = append(ws, arrive(t.Context(), g, &wg, time.Second))
					time.Sleep(time.Millisecond)
				}
				time.Sleep(tt.release - 3*time.Millisecond)
				holder.tk.Done(t.Context(), true)
				synctest.Wait()
				for i, w := range ws {
					if i == tt.first {
						assert.False(t, w.a.Refused(), "waiter %d is served", i)
						assert.Equal(t, tt.release-time.Duration(i)*time.Millisecond, w.a.QueueWait)
					} else {
						assert.Zero(t, w.at, "waiter %d still waits", i)
					}
				}
				for range ws { // each Done hands the slot to the next
					for _, w := range ws {
						w.tk.Done(t.Context(), true)
						synctest.Wait()
					}
				}
				wg.Wait()
				running, waiting := g.Limiter().Len()
				assert.Zero(t, running+waiting)
			})
		})
	}
}

// TestQueueStandingWait checks CoDel's bound on a standing queue: a call
// that has waited StandingWaitNeeds × its need since the queue became
// standing is refused as overload, with most of its budget left, while a
// queue that drains within LIFOAfter serves its calls in arrival order
// whatever they waited.
func TestQueueStandingWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := queued(t, 1, 10, nil) // need: the 10 ms floor
		var wg sync.WaitGroup
		holder := arrive(t.Context(), g, &wg, time.Second)
		early := arrive(t.Context(), g, &wg, time.Second)
		time.Sleep(admission.LIFOAfter + 5*time.Millisecond)
		late := arrive(t.Context(), g, &wg, time.Second) // comes into a standing queue
		time.Sleep(time.Millisecond)
		synctest.Wait()
		_, waiting := g.Limiter().Len()
		assert.Equal(t, 2, waiting, "early still waits: the queue has stood for 6 ms of its 20")
		wg.Wait()
		// early: the queue stood from 100 ms, so it leaves at 120 ms;
		// late: it came at 105 ms, so it leaves at 125 ms.
		assert.Equal(t, admission.RefusalQueueFull, early.a.Refusal)
		assert.Equal(t, admission.LIFOAfter+overload.StandingWaitNeeds*10*time.Millisecond, early.a.QueueWait)
		assert.Equal(t, admission.RefusalQueueFull, late.a.Refusal)
		assert.Equal(t, overload.StandingWaitNeeds*10*time.Millisecond, late.a.QueueWait)
		holder.tk.Done(t.Context(), true)
		running, waiting := g.Limiter().Len()
		assert.Zero(t, running+waiting)
	})
	synctest.Test(t, func(t *testing.T) {
		// Drained within LIFOAfter: FIFO, nobody refused, however long
		// against its need each waited.
		g := queued(t, 1, 10, nil)
		var wg sync.WaitGroup
		holder := arrive(t.Context(), g, &wg, time.Second)
		var ws []*outcome
		for range 3 {
			ws = append(ws, arrive(t.Context(), g, &wg, time.Second))
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		holder.tk.Done(t.Context(), true)
		for i, w := range ws {
			synctest.Wait()
			require.False(t, w.a.Refused(), "waiter %d", i)
			assert.Equal(t, 80*time.Millisecond-time.Duration(i)*10*time.Millisecond, w.a.QueueWait, "waiter %d: served in arrival order", i)
			w.tk.Done(t.Context(), true)
		}
		wg.Wait()
	})
}

// TestQueueFullLIFOEvictsTheOldest checks that a standing queue that is
// full admits a newcomer and refuses its oldest waiting call instead.
func TestQueueFullLIFOEvictsTheOldest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := queued(t, 1, 2, nil)
		var wg sync.WaitGroup
		holder := arrive(t.Context(), g, &wg, time.Second)
		oldest := arrive(t.Context(), g, &wg, time.Second)
		time.Sleep(10 * time.Millisecond)
		middle := arrive(t.Context(), g, &wg, time.Second)
		time.Sleep(admission.LIFOAfter)
		newest := arrive(t.Context(), g, &wg, time.Second)
		assert.Equal(t, admission.RefusalQueueFull, oldest.a.Refusal)
		assert.Equal(t, admission.LIFOAfter+10*time.Millisecond, oldest.a.QueueWait)
		holder.tk.Done(t.Context(), true)
		synctest.Wait()
		assert.False(t, newest.a.Refused(), "the newest is served first")
		newest.tk.Done(t.Context(), true)
		wg.Wait()
		assert.False(t, middle.a.Refused())
		middle.tk.Done(t.Context(), true)
		running, waiting := g.Limiter().Len()
		assert.Zero(t, running+waiting)
	})
}

// TestQueueHandOffUnderLoad runs many calls through a small queue with
// real time and the race detector: every call is served or refused, no
// slot is lost, nobody is left waiting.
func TestQueueHandOffUnderLoad(t *testing.T) {
	g := queued(t, 3, 8, nil)
	var wg sync.WaitGroup
	var served, refused atomic.Int32
	for i := range 200 {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if i%7 == 0 {
				cancel()
			}
			a, tk := g.Admit(ctx, "r", budget(time.Duration(1+i%5)*time.Millisecond*20), deadline.Deadline{})
			if a.Refused() {
				refused.Add(1)
				return
			}
			served.Add(1)
			tk.Done(ctx, true)
		})
	}
	wg.Wait()
	assert.Equal(t, int32(200), served.Load()+refused.Load())
	assert.Positive(t, served.Load())
	running, waiting := g.Limiter().Len()
	assert.Zero(t, running, "every slot returned")
	assert.Zero(t, waiting)
}

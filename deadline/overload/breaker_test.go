package overload

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBreakerCountsASlidingWindow: failures are counted over the last
// window, a tenth of it leaving at a time: a burst that straddles what was
// a tumbling window's restart still opens it, and failures older than the
// window no longer count.
func TestBreakerCountsASlidingWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLimiter(t, WithBreaker(WithFailureRatio(0.5, 4), WithFailureWindow(10*time.Second)))
		b := l.Breaker()
		end := func(o Outcome) {
			p, ok := l.TryAcquire("r")
			require.True(t, ok)
			p.Done(o)
		}
		time.Sleep(8 * time.Second)
		end(OutcomeFailure)
		end(OutcomeFailure)
		time.Sleep(3 * time.Second) // 11 s: a tumbling window of 10 s would have restarted at 10 s
		end(OutcomeFailure)
		calls, failures := b.Counts()
		assert.Equal(t, 3, calls)
		assert.Equal(t, 3, failures)
		assert.Equal(t, Closed, b.State(), "3 calls: fewer than MinCalls")
		end(OutcomeFailure)
		assert.Equal(t, Open, b.State(), "4 failures within the last 10 s")

		// Failures leave the window a bucket at a time.
		l = newLimiter(t, WithBreaker(WithFailureRatio(0.5, 4), WithFailureWindow(10*time.Second)))
		b = l.Breaker()
		end(OutcomeFailure)
		end(OutcomeFailure)
		end(OutcomeFailure)
		time.Sleep(10 * time.Second)
		calls, failures = b.Counts()
		assert.Zero(t, calls+failures, "the window forgot them")
		end(OutcomeFailure)
		end(OutcomeSuccess)
		end(OutcomeSuccess)
		end(OutcomeAnswered)
		assert.Equal(t, Closed, b.State(), "1 failure of 4 in the window")
		end(OutcomeCut)
		end(OutcomeOverload)
		end(OutcomeIgnore)
		calls, _ = b.Counts()
		assert.Equal(t, 4, calls, "cuts, overload answers and ignored calls are not counted")
		end(OutcomeError)
		assert.Equal(t, Closed, b.State(), "2 of 5")
		end(OutcomeTimeout)
		assert.Equal(t, Open, b.State(), "3 of 6: a retryable error and a ceiling are failures")
	})
}

// TestThrottleDropsWhatTheDownstreamRefuses: the drop probability follows
// the window's requests and accepts, a dropped request counts, a charge
// counts n refused requests, and the zero Throttle drops nothing.
func TestThrottleDropsWhatTheDownstreamRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th, err := NewThrottle(WithThrottleK(2), WithThrottleWindow(time.Second))
		require.NoError(t, err)
		assert.Equal(t, time.Second, th.Window())
		assert.True(t, th.Allow(0))
		for range 4 {
			th.Record(OutcomeSuccess)
		}
		th.Record(OutcomeIgnore)
		assert.Zero(t, th.DropProbability())
		th.Charge(12)
		assert.InDelta(t, (16.0-8)/17, th.DropProbability(), 1e-9)
		assert.False(t, th.Allow(0.1))
		assert.InDelta(t, (17.0-8)/18, th.DropProbability(), 1e-9, "the dropped request counts")
		time.Sleep(time.Second)
		assert.Zero(t, th.DropProbability(), "the window forgot")

		for _, o := range []ThrottleOption{WithThrottleK(0.5), WithThrottleK(101), WithThrottleWindow(0)} {
			_, err := NewThrottle(o)
			var oe *OptionError
			require.ErrorAs(t, err, &oe)
		}
		var zero Throttle
		assert.Zero(t, zero.DropProbability())
		zero.Charge(1)
	})
}

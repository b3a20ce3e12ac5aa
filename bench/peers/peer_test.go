package peers_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/deadlinebudget/budget/bench/peers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// log records what each attempt saw, in virtual time.
type log struct {
	mu       sync.Mutex
	start    time.Time
	starts   []time.Duration // since the call started
	ends     []time.Duration
	deadline []bool // the attempt's ctx had a deadline
}

func (l *log) begin(ctx context.Context) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.starts = append(l.starts, time.Since(l.start))
	_, ok := ctx.Deadline()
	l.deadline = append(l.deadline, ok)
	return len(l.starts)
}

func (l *log) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ends = append(l.ends, time.Since(l.start))
}

func (l *log) attempts() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.starts)
}

// generous is a policy whose overall limit never binds in these tests.
func generous() peers.Call {
	c := peers.Scenario1()
	c.Budget = time.Hour
	return c
}

var errBoom = errors.New("boom")

// fastFailures fails retryably after 30ms, failuresBeforeSuccess times.
func fastFailures(l *log, failures int, ra time.Duration) peers.Op {
	return func(ctx context.Context) error {
		n := l.begin(ctx)
		defer l.end()
		select {
		case <-time.After(30 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		if n <= failures {
			return &peers.Failure{Status: 503, RetryAfter: ra}
		}
		return nil
	}
}

func eachRetrier(t *testing.T, f func(t *testing.T, r peers.Retrier)) {
	for _, r := range peers.All() {
		t.Run(r.Name(), func(t *testing.T) { f(t, r) })
	}
}

func TestRetriesUntilSuccess(t *testing.T) {
	eachRetrier(t, func(t *testing.T, r peers.Retrier) {
		synctest.Test(t, func(t *testing.T) {
			l := &log{start: time.Now()}
			err := r.Do(t.Context(), generous(), fastFailures(l, 3, 0))
			require.NoError(t, err)
			assert.Equal(t, 4, l.attempts(), "three failures then a success")
			// Every gap between attempts is a backoff sleep within the cap
			// (cenkalti randomises ±50% around it, failsafe ±25%).
			for i := 1; i < len(l.starts); i++ {
				gap := l.starts[i] - l.ends[i-1]
				assert.LessOrEqual(t, gap, 600*time.Millisecond, "gap before attempt %d", i+1)
			}
		})
	})
}

func TestHonoursMaxAttempts(t *testing.T) {
	eachRetrier(t, func(t *testing.T, r peers.Retrier) {
		synctest.Test(t, func(t *testing.T) {
			l := &log{start: time.Now()}
			err := r.Do(t.Context(), generous(), fastFailures(l, 1000, 0))
			require.Error(t, err)
			assert.Equal(t, 5, l.attempts())
			var f *peers.Failure
			assert.True(t, errors.As(err, &f), "the last failure is kept: %v", err)
		})
	})
}

func TestBacksOff(t *testing.T) {
	eachRetrier(t, func(t *testing.T, r peers.Retrier) {
		synctest.Test(t, func(t *testing.T) {
			l := &log{start: time.Now()}
			_ = r.Do(t.Context(), generous(), fastFailures(l, 1000, 0))
			require.Equal(t, 5, l.attempts())
			var slept time.Duration
			for i := 1; i < len(l.starts); i++ {
				slept += l.starts[i] - l.ends[i-1]
			}
			// Four sleeps with caps 100, 200, 400, 400ms: zero total sleep
			// would mean the backoff is not wired in.
			assert.Positive(t, slept)
			assert.LessOrEqual(t, slept, 4*600*time.Millisecond)
		})
	})
}

func TestNotRetryableStopsAtOnce(t *testing.T) {
	eachRetrier(t, func(t *testing.T, r peers.Retrier) {
		synctest.Test(t, func(t *testing.T) {
			l := &log{start: time.Now()}
			err := r.Do(t.Context(), generous(), func(ctx context.Context) error {
				l.begin(ctx)
				return errBoom
			})
			assert.ErrorIs(t, err, errBoom)
			assert.Equal(t, 1, l.attempts())
		})
	})
}

func TestHonoursAttemptTimeout(t *testing.T) {
	eachRetrier(t, func(t *testing.T, r peers.Retrier) {
		synctest.Test(t, func(t *testing.T) {
			l := &log{start: time.Now()}
			c := generous()
			c.MaxAttempts = 3
			err := r.Do(t.Context(), c, func(ctx context.Context) error {
				l.begin(ctx)
				defer l.end()
				<-ctx.Done()
				return ctx.Err()
			})
			require.Error(t, err)
			require.Equal(t, 3, l.attempts(), "an attempt that ran out of its timeout is retried")
			for i := range l.starts {
				assert.Equal(t, c.AttemptTimeout, l.ends[i]-l.starts[i], "attempt %d lasts its timeout", i+1)
			}
		})
	})
}

// TestHonoursOverallLimit checks each library's own overall limit, with no
// deadline on the context (mode B) and with one (mode A): a call of fast
// failures with attempts to spare ends within the budget plus one attempt.
func TestHonoursOverallLimit(t *testing.T) {
	for _, withCtx := range []bool{false, true} {
		eachRetrier(t, func(t *testing.T, r peers.Retrier) {
			synctest.Test(t, func(t *testing.T) {
				c := peers.Scenario1()
				c.MaxAttempts = 1000
				ctx := t.Context()
				if withCtx {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, c.Budget)
					defer cancel()
				}
				l := &log{start: time.Now()}
				_ = r.Do(ctx, c, fastFailures(l, 1<<30, 0))
				elapsed := time.Since(l.start)
				assert.LessOrEqual(t, elapsed, c.Budget+30*time.Millisecond)
				assert.GreaterOrEqual(t, l.attempts(), 2, "fast failures are retried")
				assert.Less(t, l.attempts(), c.MaxAttempts, "the budget, not the attempts, ended the call")
			})
		})
	}
}

// TestRetryAfter checks that each adapter hands a server's delay to its
// library where the library can take one. sethvargo/go-retry's Backoff never
// sees the error, so it cannot.
func TestRetryAfter(t *testing.T) {
	eachRetrier(t, func(t *testing.T, r peers.Retrier) {
		synctest.Test(t, func(t *testing.T) {
			l := &log{start: time.Now()}
			const ra = 350 * time.Millisecond
			err := r.Do(t.Context(), generous(), fastFailures(l, 1, ra))
			require.NoError(t, err)
			require.Equal(t, 2, l.attempts())
			gap := l.starts[1] - l.ends[0]
			if _, ok := r.(peers.Sethvargo); ok {
				assert.Less(t, gap, ra, "go-retry has no Retry-After: its first sleep is below the 100ms base")
				return
			}
			assert.GreaterOrEqual(t, gap, ra-ra/4, "Retry-After reached the library (failsafe jitters it ±25%%)")
		})
	})
}

func TestCallValidate(t *testing.T) {
	bad := []func(*peers.Call){
		func(c *peers.Call) { c.Budget = 0 },
		func(c *peers.Call) { c.AttemptTimeout = 0 },
		func(c *peers.Call) { c.BackoffMax = c.BackoffBase - 1 },
		func(c *peers.Call) { c.MaxAttempts = 0 },
		func(c *peers.Call) { c.Floor = -1 },
	}
	for i, f := range bad {
		c := peers.Scenario1()
		f(&c)
		for _, r := range peers.All() {
			assert.Error(t, r.Do(context.Background(), c, func(context.Context) error { return nil }), "case %d %s", i, r.Name())
		}
	}
	assert.NoError(t, peers.Scenario1().Validate())
}

package peers_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/bench/peers"
)

// TestDeadlineOverloadInput checks that bad input is refused at
// construction and a call with another Call than the one the adapter was
// built for is refused.
func TestDeadlineOverloadInput(t *testing.T) {
	_, err := peers.NewDeadlineOverload(peers.Scenario1(), -1)
	assert.ErrorContains(t, err, "overload charge is -1, want >= 0")
	_, err = peers.NewDeadlineOverload(peers.Call{}, 5)
	assert.ErrorContains(t, err, "Budget")

	o, err := peers.NewDeadlineOverload(peers.Scenario1(), 5)
	require.NoError(t, err)
	assert.Equal(t, peers.OverloadName+" 5", o.Name())
	assert.Contains(t, o.Config(), "WithOverloadCharge(5)")
	other := peers.Scenario1()
	other.MaxAttempts = 2
	assert.ErrorContains(t, o.Do(context.Background(), other, func(context.Context) error { return nil }), "built for")
}

// TestDeadlineOverloadRetries checks the adapter as a retrier, through the
// transport and its in-memory base: 503s are retried until success, the
// attempts are bounded by MaxAttempts and by the per-attempt timeout, a
// final 503 comes back as a Failure with its status, a server's Retry-After
// is honoured, and an error other than a Failure reaches the caller.
func TestDeadlineOverloadRetries(t *testing.T) {
	c := generous()
	synctest.Test(t, func(t *testing.T) {
		o, err := peers.NewDeadlineOverload(c, 0)
		require.NoError(t, err)

		l := &log{start: time.Now()}
		require.NoError(t, o.Do(t.Context(), c, fastFailures(l, 3, 0)))
		assert.Equal(t, 4, l.attempts(), "three 503s then a success")

		l = &log{start: time.Now()}
		err = o.Do(t.Context(), c, fastFailures(l, 1000, 0))
		f, ok := errors.AsType[*peers.Failure](err)
		require.True(t, ok, "the last answer is kept: %v", err)
		assert.Equal(t, 503, f.Status)
		assert.Equal(t, c.MaxAttempts, l.attempts())

		l = &log{start: time.Now()}
		require.NoError(t, o.Do(t.Context(), c, fastFailures(l, 1, time.Second)))
		require.Equal(t, 2, l.attempts())
		assert.GreaterOrEqual(t, l.starts[1]-l.ends[0], time.Second, "Retry-After reached the transport")

		l = &log{start: time.Now()}
		err = o.Do(t.Context(), c, func(ctx context.Context) error {
			l.begin(ctx)
			defer l.end()
			<-ctx.Done()
			return ctx.Err()
		})
		require.Error(t, err)
		require.Equal(t, c.MaxAttempts, l.attempts(), "an attempt that ran out of its timeout is retried")
		assert.Equal(t, c.AttemptTimeout, l.ends[0]-l.starts[0])

		boom := errors.New("boom")
		assert.ErrorIs(t, o.Do(t.Context(), c, func(context.Context) error { return boom }), boom)
	})
}

// TestDeadlineOverloadCharges checks that the charge reaches the shared
// budget: a charge larger than the budget's balance (its floor of 100
// retries in the window) overdraws it at the first 503 without
// Retry-After, so that call and the next one are not retried; without a
// charge, or when the 503 carries a Retry-After, they are.
func TestDeadlineOverloadCharges(t *testing.T) {
	c := generous()
	for _, tc := range []struct {
		name       string
		charge     int
		retryAfter time.Duration
		attempts   int // per call, each call failing once then succeeding
	}{
		{"no charge", 0, 0, 2},
		{"charged", 1000, 0, 1},
		{"Retry-After is not charged", 1000, time.Second, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o, err := peers.NewDeadlineOverload(c, tc.charge)
				require.NoError(t, err)
				for call := range 2 {
					l := &log{start: time.Now()}
					err := o.Do(t.Context(), c, fastFailures(l, 1, tc.retryAfter))
					assert.Equal(t, tc.attempts, l.attempts(), "call %d", call+1)
					if tc.attempts == 1 {
						assert.Error(t, err, "call %d: the retry was denied", call+1)
					} else {
						assert.NoError(t, err, "call %d", call+1)
					}
				}
			})
		})
	}
}

package peers_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/bench/peers"
)

// TestFailsafeReusesItsExecutor checks that the failsafe-go adapter builds
// its policies once per Call, as failsafe-go's docs recommend, and not on
// every call: a call that succeeds at once allocates markedly less than the
// same call with PerCall set.
func TestFailsafeReusesItsExecutor(t *testing.T) {
	ctx, c := context.Background(), peers.Scenario1()
	nop := func(context.Context) error { return nil }
	allocs := func(r peers.Retrier) float64 {
		return testing.AllocsPerRun(200, func() {
			if err := r.Do(ctx, c, nop); err != nil {
				t.Fatal(err)
			}
		})
	}
	reused, perCall := allocs(peers.Failsafe{}), allocs(peers.Failsafe{PerCall: true})
	t.Logf("allocs per call: reused %.0f, rebuilt per call %.0f", reused, perCall)
	assert.Less(t, reused, perCall-5, "the reused executor must save the building of the policies")
}

// TestFailsafeBudget checks the adapter with a shared retry budget: bad
// input is refused at construction, a call with another Call than the one
// it was built for is refused, and a failing op is still retried (the
// budget's minimum concurrency allows it).
func TestFailsafeBudget(t *testing.T) {
	_, err := peers.NewFailsafeBudget(peers.Scenario1(), 1.5, 3)
	assert.ErrorContains(t, err, "max rate is 1.5")
	_, err = peers.NewFailsafeBudget(peers.Call{}, 0.2, 3)
	assert.ErrorContains(t, err, "Budget")

	fb, err := peers.NewFailsafeBudget(peers.Scenario1(), 0.2, 3)
	require.NoError(t, err)
	other := peers.Scenario1()
	other.MaxAttempts = 2
	assert.ErrorContains(t, fb.Do(context.Background(), other, func(context.Context) error { return nil }), "built for")

	synctest.Test(t, func(t *testing.T) {
		n := 0
		err := fb.Do(context.Background(), peers.Scenario1(), func(context.Context) error {
			if n++; n < 3 {
				return &peers.Failure{Status: 503}
			}
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, 3, n)
	})
}

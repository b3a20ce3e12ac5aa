package peers_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

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

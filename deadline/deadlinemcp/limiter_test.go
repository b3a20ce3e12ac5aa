package deadlinemcp_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// TestClientLimiter: with WithLimiter, a tool call that finds the limit
// reached waits only while it can still finish, then leaves with
// ReasonLimited (queue_timeout), without being sent.
func TestClientLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		search := &tool{name: "search", annotations: readOnly(), behave: func(ctx context.Context, n int) (*mcp.CallToolResult, error) {
			if n == 1 {
				<-release
			}
			return text("ok"), nil
		}}
		l, err := overload.NewLimiter(overload.WithFixedLimit(1))
		require.NoError(t, err)
		mc, _, _ := newClient(t, deadlinemcp.WithLimiter(l))
		cs := connectInMemory(t, newServer(t, nil, search), mc)
		listTools(t, cs)

		var wg sync.WaitGroup
		wg.Go(func() {
			_, err := call(cs, 5*time.Second, deadline.Policy{MaxAttempts: 1, Floor: 20 * time.Millisecond}, "search")
			assert.NoError(t, err)
		})
		synctest.Wait()
		start := time.Now()
		_, err = call(cs, 300*time.Millisecond, deadline.Policy{MaxAttempts: 1, Floor: 20 * time.Millisecond}, "search")
		require.ErrorIs(t, err, deadline.ErrLimited)
		assert.NotErrorIs(t, err, context.DeadlineExceeded)
		var se *deadline.StopError
		require.ErrorAs(t, err, &se)
		require.NotNil(t, se.Refusal)
		assert.Equal(t, overload.CauseQueueTimeout, se.Refusal.Cause)
		assert.Equal(t, 280*time.Millisecond, time.Since(start), "it waited while it could still finish")
		assert.Len(t, search.arrivals(), 1, "the refused call was not sent")
		close(release)
		wg.Wait()
	})
}

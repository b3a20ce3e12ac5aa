package deadlinemcpgo_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/deadlinemcpgo"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
)

// The server's admission queue bounds the tool handlers running at once:
// a call that finds the one slot taken and no room to wait is refused as
// queue_full, before its handler runs, with the refusal's error shape.
func TestServerQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, err := admission.NewQueue(1, 0)
		require.NoError(t, err)
		rec := &admissions{}
		release := make(chan struct{})
		search := &tool{name: "search", behave: func(ctx context.Context, n int) (*mcp.CallToolResult, error) {
			if n == 1 {
				<-release
			}
			return mcp.NewToolResultText("ok"), nil
		}}
		mc := connectInProcess(t, newBudgetClient(t), newServer(t, newBudgetServer(t, rec, deadlinemcpgo.WithQueue(q)), search))
		first := make(chan error, 1)
		go func() {
			_, err := call(mc, time.Minute, deadline.Policy{MaxAttempts: 1}, "search")
			first <- err
		}()
		synctest.Wait() // the first call holds the slot
		_, err = call(mc, time.Minute, deadline.Policy{MaxAttempts: 1}, "search")
		refused, ok := errors.AsType[*mcpbudget.RefusedError](err)
		require.True(t, ok, "%v", err)
		assert.Equal(t, "queue_full", refused.Refusal)
		close(release)
		require.NoError(t, <-first)
		require.Len(t, rec.list(), 2)
		assert.Equal(t, admission.RefusalQueueFull, rec.list()[1].Refusal)
		assert.Len(t, search.arrivals(), 1)
	})
}

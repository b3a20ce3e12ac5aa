package deadlinegrpc_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// TestServerShedsFromAStandingQueue: an RPC that waited in a standing
// queue as long as it may is answered RESOURCE_EXHAUSTED with the refusal
// trailer "reason=standing_queue" (shed: come back); one that finds the
// backlog full gets no trailer (overload).
func TestServerShedsFromAStandingQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		e := &echo{handle: func(ctx context.Context, c call, in string) (string, error) {
			if c.n == 1 {
				<-release
			}
			return in, nil
		}}
		v := start(t, inMemory, e, newServer(t, deadlinegrpc.WithAdmissionQueue(1, 1), deadlinegrpc.WithFloor(10*time.Millisecond)), nil)
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = invoke(t, v, mGet, 5*time.Second) })
		synctest.Wait()
		type answer struct {
			tr  metadata.MD
			err error
		}
		shedc := make(chan answer, 1)
		wg.Go(func() {
			tr, err := invoke(t, v, mGet, time.Second)
			shedc <- answer{tr, err}
		})
		synctest.Wait()
		tr, err := invoke(t, v, mGet, time.Second)
		assert.Equal(t, codes.ResourceExhausted, status.Code(err), "the backlog is full: overload")
		assert.Empty(t, tr.Get(deadlinegrpc.RefusedTrailer))

		time.Sleep(500 * time.Millisecond) // the queue stands; the waiter is shed
		var shed answer
		select {
		case shed = <-shedc:
		default:
			require.FailNow(t, "still waiting after 500 ms of a standing queue")
		}
		assert.Equal(t, codes.ResourceExhausted, status.Code(shed.err))
		require.Len(t, shed.tr.Get(deadlinegrpc.RefusedTrailer), 1)
		assert.Contains(t, shed.tr.Get(deadlinegrpc.RefusedTrailer)[0], "reason=standing_queue")
		close(release)
		wg.Wait()
	})
}

// TestClientRetriesAShed: the Client retries a RESOURCE_EXHAUSTED whose
// refusal trailer says "reason=standing_queue", marked deadline.Shed
// (an overload answer that client-side throttling does not count); one
// with another refusal trailer is not retried.
func TestClientRetriesAShed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := &echo{handle: func(ctx context.Context, c call, in string) (string, error) {
			_ = grpc.SetTrailer(ctx, metadata.Pairs(deadlinegrpc.RefusedTrailer, "budget-ms=900, floor-ms=0, reason="+in))
			return "", status.Error(codes.ResourceExhausted, "busy")
		}}
		b, err := deadline.NewRetryBudget()
		require.NoError(t, err)
		th, err := overload.NewThrottle()
		require.NoError(t, err)
		p := deadline.DefaultPolicy()
		p.RetryBudget, p.Throttle = b, th
		v := start(t, inMemory, e, nil, newClient(t, deadlinegrpc.WithPolicy(p)))

		for range 20 {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			_, err = v.get(ctx, mGet, "standing_queue")
			cancel()
			require.Error(t, err)
			assert.ErrorIs(t, err, deadline.ErrOverloaded)
			assert.NotErrorIs(t, err, deadline.ErrThrottled)
		}
		assert.Equal(t, 60, e.count(mGet), "every shed RPC was retried, none throttled")
		assert.Zero(t, th.DropProbability())

		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err = v.get(ctx, mGet, "queue_full")
		require.Error(t, err)
		assert.Equal(t, 61, e.count(mGet), "another refusal is not retried")
	})
}

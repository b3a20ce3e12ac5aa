package deadlinegrpc_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// TestClientLimiter: with WithLimiter, an RPC that finds the limit reached
// and no room to wait is not sent and fails with ReasonLimited, not
// DEADLINE_EXCEEDED; RESOURCE_EXHAUSTED is an overload answer, which opens
// no breaker.
func TestClientLimiter(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 8)
	e := &echo{handle: func(ctx context.Context, c call, in string) (string, error) {
		arrived <- struct{}{}
		switch in {
		case "hold":
			<-release
		case "busy":
			return "", status.Error(codes.ResourceExhausted, "busy")
		}
		return in, nil
	}}
	l, err := overload.NewLimiter(overload.WithLimitRange(1, 1, 1), overload.WithBacklog(0), overload.WithBreaker(
		overload.WithFailureRatio(0.5, 2), overload.WithFailureWindow(overload.DefaultLimitWindow*100),
		overload.WithOpenFor(overload.DefaultLimitWindow*10), overload.WithProbes(1, 0)))
	require.NoError(t, err)
	p := deadline.DefaultPolicy()
	p.MaxAttempts = 1
	client := newClient(t, deadlinegrpc.WithLimiter(l), deadlinegrpc.WithPolicy(p))
	v := start(t, loopback, e, nil, client)

	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := v.get(context.Background(), mGet, "hold")
		assert.NoError(t, err)
	})
	<-arrived
	_, err = v.get(context.Background(), mGet, "x")
	require.ErrorIs(t, err, deadline.ErrLimited)
	assert.False(t, errors.Is(err, context.DeadlineExceeded))
	var se *deadline.StopError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, deadline.ReasonLimited, se.Reason)
	assert.Equal(t, 1, e.count(mGet), "the refused RPC was not sent")
	close(release)
	wg.Wait()

	for range 4 {
		_, err = v.get(context.Background(), mGet, "busy")
		require.Error(t, err)
		assert.ErrorIs(t, err, deadline.ErrOverloaded)
	}
	assert.Equal(t, "closed", l.Breaker().State().String(), "overload answers are no failures")
	out, err := v.get(context.Background(), mGet, "ok")
	require.NoError(t, err)
	assert.Equal(t, "ok", out)
}

// TestClientThrottle: with WithThrottle, once the server answers
// RESOURCE_EXHAUSTED to most RPCs, RPCs are dropped on the client with
// ReasonThrottled, without being sent.
func TestClientThrottle(t *testing.T) {
	e := &echo{handle: func(ctx context.Context, c call, in string) (string, error) {
		return "", status.Error(codes.ResourceExhausted, "busy")
	}}
	th, err := overload.NewThrottle(overload.WithThrottleK(1.1))
	require.NoError(t, err)
	p := deadline.DefaultPolicy()
	p.MaxAttempts = 1
	client := newClient(t, deadlinegrpc.WithThrottle(th), deadlinegrpc.WithPolicy(p))
	v := start(t, loopback, e, nil, client)
	throttled := 0
	for range 40 {
		_, err := v.get(context.Background(), mGet, "x")
		require.Error(t, err)
		if errors.Is(err, deadline.ErrThrottled) {
			throttled++
			var se *deadline.StopError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, deadline.ReasonThrottled, se.Reason)
		}
	}
	assert.Positive(t, throttled)
	assert.Equal(t, 40-throttled, e.count(mGet), "a throttled RPC is not sent")
	assert.Greater(t, th.DropProbability(), 0.5)
}

package deadlinegrpc_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
)

// Over bufconn grpc-go runs inside a synctest bubble: virtual time makes
// the leases on the wire exact.

func TestSynctestLeasesOnTheWireAreExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := &echo{handle: func(ctx context.Context, c call, in string) (string, error) {
			time.Sleep(100 * time.Millisecond)
			if c.n < 3 {
				return "", status.Error(codes.Unavailable, "down")
			}
			return in, nil
		}}
		v := start(t, inMemory, e, nil, newClient(t, deadlinegrpc.WithPolicy(fixedPolicy())))
		_, err := v.get(budgetCtx(t, time.Second), mGet, "x")
		require.NoError(t, err)
		var got []time.Duration
		for _, c := range e.seen(mGet) {
			got = append(got, c.remaining)
		}
		// 1s less the 20ms floor; then 100ms of work and 10ms of backoff
		// less per attempt.
		assert.Equal(t, []time.Duration{980 * time.Millisecond, 870 * time.Millisecond, 760 * time.Millisecond}, got)
	})
}

func TestSynctestPushbackIsWaitedExactly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := &echo{handle: pushbackThen("150")}
		v := start(t, inMemory, e, nil, newClient(t, deadlinegrpc.WithPolicy(fixedPolicy())))
		began := time.Now()
		_, err := v.get(budgetCtx(t, time.Second), mGet, "x")
		require.NoError(t, err)
		assert.Equal(t, 150*time.Millisecond, time.Since(began), "the pushback, not the 10ms backoff")
		seen := e.seen(mGet)
		require.Len(t, seen, 2)
		assert.Equal(t, 150*time.Millisecond, seen[0].remaining-seen[1].remaining)
	})
}

func TestSynctestCeilingEndsAnAttemptAndIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := &echo{handle: func(ctx context.Context, c call, in string) (string, error) {
			if c.n == 1 {
				<-ctx.Done() // hangs until its lease ends
				return "", ctx.Err()
			}
			return in, nil
		}}
		p := fixedPolicy()
		p.AttemptTimeout = 100 * time.Millisecond
		rec := &recorder{}
		v := start(t, inMemory, e, nil, newClient(t, deadlinegrpc.WithPolicy(p), deadlinegrpc.WithHooks(rec.hooks())))
		_, err := v.get(budgetCtx(t, time.Second), mGet, "x")
		require.NoError(t, err)
		require.Len(t, rec.ends, 1)
		assert.Equal(t, 1, rec.ends[0].CeilingTimeouts, "the first attempt ran out of its ceiling")
		assert.Equal(t, deadline.VerdictOK, deadline.VerdictOf(rec.ends[0]))
		for _, c := range e.seen(mGet) {
			assert.Equal(t, 100*time.Millisecond, c.remaining, "grpc-timeout carried the ceiling")
		}
	})
}

func TestSynctestDeadlineCutsTheLastAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := &echo{handle: func(ctx context.Context, c call, in string) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		}}
		v := start(t, inMemory, e, nil, newClient(t, deadlinegrpc.WithPolicy(fixedPolicy())))
		began := time.Now()
		_, err := v.get(budgetCtx(t, 300*time.Millisecond), mGet, "x")
		assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
		assert.Equal(t, deadline.ReasonDeadline, stopOf(t, err).Reason)
		assert.Equal(t, 280*time.Millisecond, time.Since(began), "the lease kept the 20ms floor back")
		assert.Equal(t, 1, e.count(mGet))
	})
}

package deadlinegrpc_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
)

func hedgePolicy() deadline.Policy {
	p := fixedPolicy()
	p.Hedge = &deadline.Hedge{Delay: 50 * time.Millisecond, MaxHedges: 1}
	return p
}

// hangFirst hangs the first call of each method until its context ends
// (reporting the cause on canceled), and answers every other at once with
// a header and a trailer naming the call.
func hangFirst(canceled chan<- error) func(ctx context.Context, c call, in string) (string, error) {
	return func(ctx context.Context, c call, in string) (string, error) {
		n := string(rune('0' + c.n))
		if c.n == 1 {
			<-ctx.Done()
			canceled <- ctx.Err()
			return "", status.FromContextError(ctx.Err()).Err()
		}
		_ = grpc.SetHeader(ctx, metadata.Pairs("call", n))
		_ = grpc.SetTrailer(ctx, metadata.Pairs("call", n))
		return in + n, nil
	}
}

// An idempotent unary method whose first attempt hangs succeeds through
// the hedge, sent after the hedge delay: the server runs it exactly twice,
// the loser is canceled, and the caller gets the winner's reply, headers
// and trailer. A hedging policy given per request does the same.
func TestSynctestHedgeWinsOverAHangingAttempt(t *testing.T) {
	for _, where := range []string{"client policy", "request policy"} {
		t.Run(where, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				canceled := make(chan error, 1)
				e := &echo{handle: hangFirst(canceled)}
				rec := &recorder{}
				opts := []deadlinegrpc.ClientOption{deadlinegrpc.WithHooks(rec.hooks())}
				ctx := budgetCtx(t, time.Second)
				if where == "client policy" {
					opts = append(opts, deadlinegrpc.WithPolicy(hedgePolicy()))
				} else {
					ctx = deadlinegrpc.WithRequestPolicy(ctx, hedgePolicy())
				}
				v := start(t, inMemory, e, nil, newClient(t, opts...))
				began := time.Now()
				var header, trailer metadata.MD
				out := new(wrapperspb.StringValue)
				err := v.cc.Invoke(ctx, mGet, wrapperspb.String("x"), out, grpc.Header(&header), grpc.Trailer(&trailer))
				require.NoError(t, err)
				assert.Equal(t, "x2", out.GetValue(), "the hedge's reply")
				assert.Equal(t, []string{"2"}, header.Get("call"))
				assert.Equal(t, []string{"2"}, trailer.Get("call"))
				assert.Equal(t, 50*time.Millisecond, time.Since(began), "the hedge started after its delay and won at once")
				assert.ErrorIs(t, <-canceled, context.Canceled, "the losing attempt was canceled")
				assert.Equal(t, 2, e.count(mGet), "exactly two executions")
				require.Len(t, rec.ends, 1)
				assert.Equal(t, 2, rec.ends[0].Attempts)
			})
		})
	}
}

// A method that is not safe to repeat is never hedged, however slow.
func TestSynctestSlowNonIdempotentMethodRunsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := &echo{handle: func(ctx context.Context, c call, in string) (string, error) {
			time.Sleep(300 * time.Millisecond)
			return in, nil
		}}
		v := start(t, inMemory, e, nil, newClient(t, deadlinegrpc.WithPolicy(hedgePolicy())))
		got, err := v.get(budgetCtx(t, time.Second), mPut, "x")
		require.NoError(t, err)
		assert.Equal(t, "x", got)
		assert.Equal(t, 1, e.count(mPut))
	})
}

// Hedged attempts that all fail retryably stop as unhedged ones do: the
// last status unchanged, the reason from StopOf.
func TestSynctestHedgedCallStopsWithTheLastStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := &echo{handle: func(ctx context.Context, c call, in string) (string, error) {
			time.Sleep(80 * time.Millisecond)
			return "", status.Error(codes.Unavailable, "down")
		}}
		v := start(t, inMemory, e, nil, newClient(t, deadlinegrpc.WithPolicy(hedgePolicy())))
		_, err := v.get(budgetCtx(t, time.Second), mGet, "x")
		assert.Equal(t, status.Error(codes.Unavailable, "down").Error(), err.Error())
		stop, ok := deadlinegrpc.StopOf(err)
		require.True(t, ok)
		assert.Equal(t, deadline.ReasonExhausted, stop.Reason)
		assert.Equal(t, 3, e.count(mGet))
	})
}

// An invalid hedge is refused where it is given: by NewClient, or, per
// request, by the call with a PolicyError, before anything is sent.
func TestInvalidHedgeIsRefused(t *testing.T) {
	bad := fixedPolicy()
	bad.Hedge = &deadline.Hedge{MaxHedges: 1}
	c, err := deadlinegrpc.NewClient(deadlinegrpc.WithPolicy(bad))
	assert.Nil(t, c)
	pe, ok := errors.AsType[*deadline.PolicyError](err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, "Policy.Hedge.Delay", pe.Field)

	e := &echo{}
	v := start(t, inMemory, e, nil, newClient(t))
	_, err = v.get(deadlinegrpc.WithRequestPolicy(budgetCtx(t, time.Second), bad), mGet, "x")
	assert.Equal(t, codes.Internal, status.Code(err))
	pe, ok = errors.AsType[*deadline.PolicyError](err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, "Policy.Hedge.Delay", pe.Field)
	assert.Zero(t, e.count(mGet))

	// The same for a method that would not be hedged anyway.
	_, err = v.get(deadlinegrpc.WithRequestPolicy(budgetCtx(t, time.Second), bad), mPut, "x")
	assert.Equal(t, codes.Internal, status.Code(err))
	_, ok = errors.AsType[*deadline.PolicyError](err)
	assert.True(t, ok, "%v", err)
	assert.Zero(t, e.count(mPut))
}

// Over loopback TCP, in real time: the hedge wins over a hanging first
// attempt, which is canceled, and nothing outlives the call (TestMain's
// goleak).
func TestHedgeOverLoopback(t *testing.T) {
	canceled := make(chan error, 1)
	e := &echo{handle: hangFirst(canceled)}
	p := hedgePolicy()
	p.Hedge.Delay = 10 * time.Millisecond
	v := start(t, loopback, e, nil, newClient(t, deadlinegrpc.WithPolicy(p)))
	got, err := v.get(budgetCtx(t, time.Minute), mGet, "x")
	require.NoError(t, err)
	assert.Equal(t, "x2", got)
	assert.ErrorIs(t, <-canceled, context.Canceled, "the losing attempt was canceled")
	assert.Equal(t, 2, e.count(mGet))
}

// A server stream of an idempotent method is hedged before its first
// message: the first stream hangs, the hedge's first message wins, the
// hanging stream is canceled, and the caller reads the rest of the
// winner's stream.
func TestSynctestServerStreamHedgedBeforeFirstMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		canceled := make(chan error, 1)
		e := &echo{stream: func(ctx context.Context, c call, send func(string) error) error {
			if c.n == 1 {
				<-ctx.Done()
				canceled <- ctx.Err()
				return status.FromContextError(ctx.Err()).Err()
			}
			for _, s := range []string{"a", "b"} {
				if err := send(s); err != nil {
					return err
				}
			}
			return nil
		}}
		v := start(t, inMemory, e, nil, newClient(t, deadlinegrpc.WithPolicy(hedgePolicy())))
		began := time.Now()
		stream, err := v.cc.NewStream(budgetCtx(t, time.Second), watchDesc, mWatch)
		require.NoError(t, err)
		require.NoError(t, stream.SendMsg(wrapperspb.String("x")))
		require.NoError(t, stream.CloseSend())
		var got []string
		for {
			out := new(wrapperspb.StringValue)
			if err := stream.RecvMsg(out); err != nil {
				require.ErrorIs(t, err, io.EOF)
				break
			}
			got = append(got, out.GetValue())
		}
		assert.Equal(t, []string{"a", "b"}, got)
		assert.Equal(t, 50*time.Millisecond, time.Since(began), "the hedge started after its delay")
		assert.ErrorIs(t, <-canceled, context.Canceled, "the hanging stream was canceled")
		assert.Equal(t, 2, e.count(mWatch))
	})
}

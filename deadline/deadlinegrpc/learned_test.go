package deadlinegrpc_test

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
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
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// liveAdmission returns a learn.Recorder in live mode (20 samples, every
// 10) and the admission.Learned on it.
func liveAdmission(t *testing.T) (*learn.Recorder, admission.Learned) {
	t.Helper()
	rec := &learn.Recorder{}
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: 10 * time.Second, MinSamples: 20}, Every: 10})
	require.NoError(t, err)
	return rec, admission.Learned{Recorder: rec, Estimator: live, Threshold: 0.05}
}

// invoke calls method with a plain grpc-go context deadline of d and
// returns the trailer and the error.
func invoke(t *testing.T, v *env, method string, d time.Duration) (metadata.MD, error) {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	var tr metadata.MD
	err := v.cc.Invoke(ctx, method, wrapperspb.String("x"), new(wrapperspb.StringValue), grpc.Trailer(&tr))
	return tr, err
}

func TestServerLearnedAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, l := liveAdmission(t)
		e := &echo{handle: func(ctx context.Context, c call, in string) (string, error) {
			select {
			case <-time.After(100 * time.Millisecond):
				return in, nil
			case <-ctx.Done():
				return "", status.FromContextError(ctx.Err()).Err()
			}
		}}
		adm := &admissions{}
		v := start(t, inMemory, e, newServer(t, deadlinegrpc.WithLearnedAdmission(l), adm.option()), nil)

		_, err := invoke(t, v, mGet, 50*time.Millisecond)
		assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "no samples yet: admitted, and cut by its budget")
		assert.Equal(t, 1, e.count(mGet))
		assert.False(t, adm.last(t).Learned)

		for range 29 {
			_, err := invoke(t, v, mGet, time.Second)
			require.NoError(t, err)
		}
		assert.Equal(t, []string{mGet}, rec.Steps(), "recorded under the full method name")

		tr, err := invoke(t, v, mGet, 50*time.Millisecond)
		assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
		assert.Equal(t, "deadline budget too small: budget-ms=50, floor-ms=0, reason=learned", status.Convert(err).Message())
		assert.Equal(t, []string{"budget-ms=50, floor-ms=0, reason=learned"}, tr.Get(deadlinegrpc.RefusedTrailer))
		assert.Equal(t, 30, e.count(mGet), "the handler is not called")
		a := adm.last(t)
		assert.Equal(t, deadlinegrpc.RefusalLearned, a.Refusal)
		assert.True(t, a.Learned)
		assert.Zero(t, a.Estimate.P)

		_, err = invoke(t, v, mGet, 150*time.Millisecond)
		require.NoError(t, err)
		assert.InDelta(t, 1, adm.last(t).Estimate.P, 1e-9)
	})
}

// TestServerStreamsAreNotLearned checks that a stream is admitted by the
// fixed rule only: not recorded, not refused by what unary RPCs taught.
func TestServerStreamsAreNotLearned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, l := liveAdmission(t)
		v := start(t, inMemory, &echo{}, newServer(t, deadlinegrpc.WithLearnedAdmission(l), deadlinegrpc.WithAdmissionQueue(1, 0)), nil)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		st, err := v.cc.NewStream(ctx, watchDesc, mWatch)
		require.NoError(t, err)
		require.NoError(t, st.SendMsg(wrapperspb.String("x")))
		require.NoError(t, st.CloseSend())
		require.NoError(t, st.RecvMsg(new(wrapperspb.StringValue)))
		assert.Empty(t, rec.Steps())
	})
}

func TestServerAdmissionQueue(t *testing.T) {
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
		var holderErr error
		wg.Go(func() { _, holderErr = invoke(t, v, mGet, time.Second) })
		synctest.Wait()
		var waiterErr error
		var waiterTrailer metadata.MD
		var waited time.Duration
		var wgWaiter sync.WaitGroup
		start := time.Now()
		wgWaiter.Go(func() {
			// It leaves before the queue has stood for LIFOAfter, after
			// which it would wait at most 2 × the floor.
			waiterTrailer, waiterErr = invoke(t, v, mGet, 105*time.Millisecond)
			waited = time.Since(start)
		})
		synctest.Wait()

		tr, err := invoke(t, v, mGet, time.Second)
		assert.Equal(t, codes.ResourceExhausted, status.Code(err), "the backlog is full: overload")
		assert.Empty(t, tr.Get(deadlinegrpc.RefusedTrailer))

		wgWaiter.Wait()
		assert.Equal(t, codes.DeadlineExceeded, status.Code(waiterErr))
		assert.Equal(t, []string{"budget-ms=105, floor-ms=10, reason=queue_timeout"}, waiterTrailer.Get(deadlinegrpc.RefusedTrailer))
		assert.Equal(t, 95*time.Millisecond, waited, "it left when only the floor was left")
		assert.Equal(t, 1, e.count(mGet))

		close(release)
		wg.Wait()
		require.NoError(t, holderErr)
		_, err = invoke(t, v, mGet, time.Second)
		require.NoError(t, err, "the slot was freed")
	})
}

func TestServerAdmissionErrors(t *testing.T) {
	_, l := liveAdmission(t)
	bad := l
	bad.Threshold = math.NaN()
	for _, tt := range []struct {
		opt   deadlinegrpc.ServerOption
		field string
	}{
		{deadlinegrpc.WithAdmissionQueue(0, 10), "deadlinegrpc.WithAdmissionQueue limit"},
		{deadlinegrpc.WithAdmissionQueue(1, -1), "deadlinegrpc.WithAdmissionQueue backlog"},
		{deadlinegrpc.WithLearnedAdmission(bad), "admission.Learned.Threshold"},
		{deadlinegrpc.WithLearnedAdmission(admission.Learned{Recorder: l.Recorder, Estimator: l.Estimator, Threshold: 0}), "admission.Learned.Threshold"},
	} {
		s, err := deadlinegrpc.NewServer(tt.opt)
		assert.Nil(t, s)
		var pe *deadline.PolicyError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, tt.field, pe.Field)
	}
}

// TestServerPanicFreesQueueSlot: a panic in a WithAdmission function or in
// the handler, recovered outside the interceptor (a recovery interceptor),
// gives the RPC's queue slot back; with one slot, every later RPC would be
// RESOURCE_EXHAUSTED for good otherwise.
func TestServerPanicFreesQueueSlot(t *testing.T) {
	var observed atomic.Int32
	s, err := deadlinegrpc.NewServer(deadlinegrpc.WithAdmissionQueue(1, 0),
		deadlinegrpc.WithAdmission(func(context.Context, string, deadlinegrpc.Admission) {
			if observed.Add(1) == 1 {
				panic("telemetry bug")
			}
		}))
	require.NoError(t, err)
	interceptor := s.UnaryInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: mGet}
	ok := func(_ context.Context, req any) (any, error) { return req, nil }
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()

	require.PanicsWithValue(t, "telemetry bug", func() { _, _ = interceptor(ctx, "x", info, ok) })
	for i := range 3 {
		_, err := interceptor(ctx, "x", info, ok)
		require.NoError(t, err, "RPC %d after the WithAdmission panic: its slot was freed", i)
	}

	require.PanicsWithValue(t, "handler bug", func() {
		_, _ = interceptor(ctx, "x", info, func(context.Context, any) (any, error) { panic("handler bug") })
	})
	_, err = interceptor(ctx, "x", info, ok)
	require.NoError(t, err, "after the handler's panic: its slot was freed")
}

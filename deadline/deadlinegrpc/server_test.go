package deadlinegrpc_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
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

// admissions keeps what WithAdmission reports.
type admissions struct {
	mu  sync.Mutex
	all []deadlinegrpc.Admission
}

func (a *admissions) option() deadlinegrpc.ServerOption {
	return deadlinegrpc.WithAdmission(func(_ context.Context, _ string, ad deadlinegrpc.Admission) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.all = append(a.all, ad)
	})
}

func (a *admissions) last(t *testing.T) deadlinegrpc.Admission {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	require.NotEmpty(t, a.all)
	return a.all[len(a.all)-1]
}

func newServer(t *testing.T, opts ...deadlinegrpc.ServerOption) []grpc.ServerOption {
	t.Helper()
	s, err := deadlinegrpc.NewServer(opts...)
	require.NoError(t, err)
	return s.ServerOptions()
}

func TestServerClampsTheInboundDeadline(t *testing.T) {
	var got deadline.Deadline
	var stored bool
	e := &echo{handle: func(ctx context.Context, c call, in string) (string, error) {
		got, stored = deadline.FromContext(ctx)
		return in, nil
	}}
	adm := &admissions{}
	v := start(t, inMemory, e, newServer(t, deadlinegrpc.WithMaxBudget(500*time.Millisecond), adm.option()), nil)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := v.get(ctx, mGet, "x")
	require.NoError(t, err)
	seen := e.seen(mGet)
	require.Len(t, seen, 1)
	assert.LessOrEqual(t, seen[0].remaining, 500*time.Millisecond, "the handler's context ends at the server's maximum")
	require.True(t, stored)
	assert.Equal(t, 500*time.Millisecond, got.Budget(), "the handler's Deadline has the clamped budget")
	a := adm.last(t)
	assert.True(t, a.HasDeadline)
	assert.True(t, a.Clamped())
	assert.Equal(t, deadlinegrpc.LimitMax, a.Limit)
	assert.Greater(t, a.Inbound, 500*time.Millisecond)
	assert.Equal(t, 500*time.Millisecond, a.Budget)
}

func TestServerKeepsASmallerInboundDeadline(t *testing.T) {
	adm := &admissions{}
	e := &echo{}
	v := start(t, inMemory, e, newServer(t, adm.option()), nil)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, err := v.get(ctx, mGet, "x")
	require.NoError(t, err)
	a := adm.last(t)
	assert.Equal(t, deadlinegrpc.LimitInbound, a.Limit)
	assert.False(t, a.Clamped())
	assert.LessOrEqual(t, a.Budget, 2*time.Second)
	assert.Equal(t, a.Inbound, a.Budget)
}

func TestServerWithoutInboundDeadlineGetsTheMaximum(t *testing.T) {
	adm := &admissions{}
	e := &echo{}
	v := start(t, inMemory, e, newServer(t, deadlinegrpc.WithMaxBudget(time.Second), adm.option()), nil)
	_, err := v.get(t.Context(), mGet, "x")
	require.NoError(t, err)
	a := adm.last(t)
	assert.False(t, a.HasDeadline)
	assert.Equal(t, time.Second, a.Budget)
	assert.True(t, e.seen(mGet)[0].hasDeadline, "the handler runs under the maximum")
}

func TestServerRefusesBelowTheFloor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream bool
	}{{"unary", false}, {"stream", true}} {
		t.Run(tc.name, func(t *testing.T) {
			adm := &admissions{}
			e := &echo{}
			v := start(t, inMemory, e, newServer(t, deadlinegrpc.WithFloor(time.Second), adm.option()), nil)
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			var trailer metadata.MD
			var err error
			if tc.stream {
				var s grpc.ClientStream
				s, err = v.open(t, ctx, watchDesc, mWatch, "x")
				require.NoError(t, err)
				_, err = drain(s)
				trailer = s.Trailer()
			} else {
				err = v.cc.Invoke(ctx, mGet, wrapperspb.String("x"), new(wrapperspb.StringValue), grpc.Trailer(&trailer))
			}
			assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
			assert.Contains(t, status.Convert(err).Message(), "deadline budget too small: budget-ms=")
			assert.Contains(t, trailer.Get(deadlinegrpc.RefusedTrailer)[0], ", floor-ms=1000")
			assert.Equal(t, 0, e.count(mGet)+e.count(mWatch), "the handler was not called")
			assert.Equal(t, deadlinegrpc.RefusalFloor, adm.last(t).Refusal)
		})
	}
}

func TestClientNeverRetriesARefusal(t *testing.T) {
	e := &echo{}
	c := newClient(t, deadlinegrpc.WithPolicy(fixedPolicy()), deadlinegrpc.WithRetryCodes(codes.DeadlineExceeded, codes.Unavailable))
	v := start(t, inMemory, e, newServer(t, deadlinegrpc.WithFloor(time.Second)), c)
	_, err := v.get(budgetCtx(t, 500*time.Millisecond), mGet, "x")
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
	stop := stopOf(t, err)
	assert.Equal(t, deadline.ReasonNotRetryable, stop.Reason, "DEADLINE_EXCEEDED is a retry code here, but not with the refusal trailer")
	assert.Equal(t, 1, stop.Attempts)
}

func TestServerSaturatedInboundDeadline(t *testing.T) {
	// The largest timeout a client can send: grpc-go writes it as hours and
	// the server's parser saturates what does not fit a time.Duration.
	adm := &admissions{}
	e := &echo{}
	v := start(t, inMemory, e, newServer(t, deadlinegrpc.WithMaxBudget(time.Second), adm.option()), nil)
	ctx, cancel := context.WithTimeout(t.Context(), math.MaxInt64)
	defer cancel()
	_, err := v.get(ctx, mGet, "x")
	require.NoError(t, err)
	a := adm.last(t)
	assert.True(t, a.Clamped())
	assert.Equal(t, time.Second, a.Budget)
}

func TestServerInterceptorWithOverflowingDeadline(t *testing.T) {
	// A context deadline past what a time.Duration can measure (time.Until
	// saturates): clamped to the maximum, no panic.
	srv, err := deadlinegrpc.NewServer(deadlinegrpc.WithMaxBudget(time.Second))
	require.NoError(t, err)
	ctx, cancel := context.WithDeadline(t.Context(), time.Unix(1<<62, 0))
	defer cancel()
	var remaining time.Duration
	_, err = srv.UnaryInterceptor()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: mGet}, func(ctx context.Context, _ any) (any, error) {
		d, _ := deadline.FromContext(ctx)
		remaining = d.Remaining()
		return nil, nil
	})
	require.NoError(t, err)
	assert.LessOrEqual(t, remaining, time.Second)
	assert.Greater(t, remaining, time.Duration(0))
}

func TestServerRefusesASpentDeadline(t *testing.T) {
	srv, err := deadlinegrpc.NewServer()
	require.NoError(t, err)
	ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	called := false
	_, err = srv.UnaryInterceptor()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: mGet}, func(context.Context, any) (any, error) {
		called = true
		return nil, nil
	})
	assert.False(t, called)
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
	assert.Contains(t, err.Error(), "budget-ms=0, floor-ms=0")
}

func TestNewServerRejectsInvalidOptions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []deadlinegrpc.ServerOption
		field string
	}{
		{"max", []deadlinegrpc.ServerOption{deadlinegrpc.WithMaxBudget(0)}, "WithMaxBudget"},
		{"floor", []deadlinegrpc.ServerOption{deadlinegrpc.WithFloor(-1)}, "WithFloor"},
		{"floor at max", []deadlinegrpc.ServerOption{deadlinegrpc.WithMaxBudget(time.Second), deadlinegrpc.WithFloor(time.Second)}, "WithFloor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := deadlinegrpc.NewServer(append(tc.opts, nil)...)
			assert.Nil(t, s)
			pe, ok := errors.AsType[*deadline.PolicyError](err)
			require.True(t, ok, "%v", err)
			assert.Equal(t, tc.field, pe.Field)
			assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
		})
	}
}

func TestTwoHopsSpendOneBudget(t *testing.T) {
	// client -> A -> B: A's handler calls B with a Client; B's budget is what
	// A had left less A's client floor.
	b := &echo{}
	vb := start(t, loopback, b, newServer(t), nil)
	clientA := newClient(t, deadlinegrpc.WithPolicy(fixedPolicy()))
	ccA, err := grpc.NewClient(vb.cc.Target(), append(clientA.DialOptions(), grpcInsecure())...)
	require.NoError(t, err)
	defer ccA.Close()
	var aRemaining time.Duration
	a := &echo{handle: func(ctx context.Context, c call, in string) (string, error) {
		d, ok := deadline.FromContext(ctx)
		if !ok {
			return "", errors.New("no deadline in A")
		}
		aRemaining = d.Remaining()
		out := new(wrapperspb.StringValue)
		err := ccA.Invoke(ctx, mGet, wrapperspb.String(in), out)
		return out.GetValue(), err
	}}
	va := start(t, loopback, a, newServer(t, deadlinegrpc.WithMaxBudget(3*time.Second)), newClient(t, deadlinegrpc.WithPolicy(fixedPolicy())))
	_, err = va.get(budgetCtx(t, 2*time.Second), mGet, "x")
	require.NoError(t, err)
	seenA, seenB := a.seen(mGet), b.seen(mGet)
	require.Len(t, seenA, 1)
	require.Len(t, seenB, 1)
	assert.LessOrEqual(t, seenA[0].remaining, 2*time.Second-fixedPolicy().Floor)
	assert.Less(t, seenB[0].remaining, aRemaining, "B's budget is below A's")
	assert.LessOrEqual(t, seenB[0].remaining, aRemaining-fixedPolicy().Floor, "A's client kept its floor back")
}

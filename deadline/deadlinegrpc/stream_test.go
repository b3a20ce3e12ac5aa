package deadlinegrpc_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
)

// open opens a server stream, sends in and closes the send side, as
// generated code does.
func (v *env) open(t *testing.T, ctx context.Context, desc *grpc.StreamDesc, method, in string) (grpc.ClientStream, error) {
	t.Helper()
	s, err := v.cc.NewStream(ctx, desc, method)
	if err != nil {
		return nil, err
	}
	require.NoError(t, s.SendMsg(wrapperspb.String(in)))
	require.NoError(t, s.CloseSend())
	return s, nil
}

// drain reads every message of s and returns them with the final error
// (nil for io.EOF).
func drain(s grpc.ClientStream) ([]string, error) {
	var got []string
	for {
		m := new(wrapperspb.StringValue)
		err := s.RecvMsg(m)
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got = append(got, m.GetValue())
	}
}

func TestServerStreamRetriedBeforeItsFirstMessage(t *testing.T) {
	for _, where := range []string{loopback, inMemory} {
		t.Run(where, func(t *testing.T) {
			e := &echo{stream: func(ctx context.Context, c call, send func(string) error) error {
				if c.n < 3 {
					return status.Error(codes.Unavailable, "down")
				}
				for _, s := range []string{"a", "b"} {
					if err := send(s); err != nil {
						return err
					}
				}
				return nil
			}}
			v := start(t, where, e, nil, newClient(t, deadlinegrpc.WithPolicy(fixedPolicy())))
			s, err := v.open(t, budgetCtx(t, 5*time.Second), watchDesc, mWatch, "x")
			require.NoError(t, err)
			got, err := drain(s)
			require.NoError(t, err)
			assert.Equal(t, []string{"a", "b"}, got)
			seen := e.seen(mWatch)
			require.Len(t, seen, 3, "the request was sent again on each attempt")
			assert.Less(t, seen[2].remaining, seen[0].remaining, "the lease on the wire shrinks")
		})
	}
}

func TestServerStreamNotRetriedAfterItsFirstMessage(t *testing.T) {
	e := &echo{stream: func(ctx context.Context, c call, send func(string) error) error {
		if err := send("first"); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "gone")
	}}
	v := start(t, inMemory, e, nil, newClient(t, deadlinegrpc.WithPolicy(fixedPolicy())))
	s, err := v.open(t, budgetCtx(t, 5*time.Second), watchDesc, mWatch, "x")
	require.NoError(t, err)
	got, err := drain(s)
	assert.Equal(t, []string{"first"}, got)
	assert.Equal(t, codes.Unavailable, status.Code(err), "the stream's own error")
	assert.Equal(t, 1, e.count(mWatch), "never retried after a response message")
}

func TestServerStreamStopErrorWhenRetriesRunOut(t *testing.T) {
	e := &echo{stream: func(context.Context, call, func(string) error) error {
		return status.Error(codes.Unavailable, "down")
	}}
	v := start(t, inMemory, e, nil, newClient(t, deadlinegrpc.WithPolicy(fixedPolicy())))
	s, err := v.open(t, budgetCtx(t, 5*time.Second), watchDesc, mWatch, "x")
	require.NoError(t, err)
	_, err = drain(s)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Equal(t, deadline.ReasonExhausted, stopOf(t, err).Reason)
	assert.Equal(t, 3, e.count(mWatch))
	// Every later call answers the same.
	assert.Equal(t, err, s.RecvMsg(new(wrapperspb.StringValue)))
	_, herr := s.Header()
	assert.Equal(t, err, herr)
}

func TestServerStreamOfUnsafeMethodIsSentOnce(t *testing.T) {
	e := &echo{stream: func(context.Context, call, func(string) error) error {
		return status.Error(codes.Unavailable, "down")
	}}
	v := start(t, inMemory, e, nil, newClient(t, deadlinegrpc.WithPolicy(fixedPolicy())))
	s, err := v.open(t, budgetCtx(t, 5*time.Second), appendDesc, mAppend, "x")
	require.NoError(t, err)
	_, err = drain(s)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Equal(t, 1, e.count(mAppend))
}

func TestServerStreamHeaderFirst(t *testing.T) {
	e := &echo{stream: func(ctx context.Context, c call, send func(string) error) error {
		if c.n == 1 {
			return status.Error(codes.Unavailable, "down")
		}
		return send("ok")
	}}
	v := start(t, inMemory, e, nil, newClient(t, deadlinegrpc.WithPolicy(fixedPolicy())))
	s, err := v.open(t, budgetCtx(t, 5*time.Second), watchDesc, mWatch, "x")
	require.NoError(t, err)
	_, err = s.Header()
	require.NoError(t, err)
	got, err := drain(s)
	require.NoError(t, err)
	assert.Equal(t, []string{"ok"}, got)
	assert.Equal(t, 2, e.count(mWatch))
	assert.NotNil(t, s.Trailer())
}

func TestEmptyServerStream(t *testing.T) {
	e := &echo{stream: func(context.Context, call, func(string) error) error { return nil }}
	v := start(t, inMemory, e, nil, newClient(t))
	s, err := v.open(t, t.Context(), watchDesc, mWatch, "x")
	require.NoError(t, err)
	got, err := drain(s)
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.Equal(t, io.EOF, s.RecvMsg(new(wrapperspb.StringValue)))
}

func TestClientStreamOpensUnderTheLease(t *testing.T) {
	e := &echo{}
	p := fixedPolicy()
	p.AttemptTimeout = 2 * time.Second
	v := start(t, inMemory, e, nil, newClient(t, deadlinegrpc.WithPolicy(p)))
	s, err := v.cc.NewStream(budgetCtx(t, 10*time.Second), uploadDesc, mUpload)
	require.NoError(t, err)
	require.NoError(t, s.SendMsg(wrapperspb.String("one")))
	require.NoError(t, s.CloseSend())
	got, err := drain(s)
	require.NoError(t, err)
	assert.Equal(t, []string{"one"}, got)
	seen := e.seen(mUpload)
	require.Len(t, seen, 1)
	assert.LessOrEqual(t, seen[0].remaining, 2*time.Second, "the stream runs in its attempt's lease")
}

func TestCanceledStreamsLeakNothing(t *testing.T) {
	// goleak (TestMain) checks that nothing outlives the test.
	e := &echo{stream: func(ctx context.Context, c call, send func(string) error) error {
		if err := send("first"); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	}}
	v := start(t, inMemory, e, nil, newClient(t, deadlinegrpc.WithPolicy(fixedPolicy())))
	for _, desc := range []*grpc.StreamDesc{watchDesc, appendDesc} {
		ctx, cancel := context.WithCancel(budgetCtx(t, 5*time.Second))
		method := "/" + service + "/" + desc.StreamName
		s, err := v.open(t, ctx, desc, method, "x")
		require.NoError(t, err)
		m := new(wrapperspb.StringValue)
		require.NoError(t, s.RecvMsg(m))
		cancel()
		err = s.RecvMsg(m)
		assert.Equal(t, codes.Canceled, status.Code(err))
	}
	// A stream abandoned before its first RecvMsg and canceled.
	ctx, cancel := context.WithCancel(budgetCtx(t, 5*time.Second))
	_, err := v.open(t, ctx, watchDesc, mWatch, "x")
	require.NoError(t, err)
	cancel()
}

package interoptest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/interop"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
)

// newClient builds a Client whose registry declares no method safe to
// repeat: none of grpc.testing.TestService's methods is, as in the
// deadlinegrpc package's tests, whose registry holds only their own test
// service.
func newClient(t *testing.T, opts ...deadlinegrpc.ClientOption) *deadlinegrpc.Client {
	t.Helper()
	c, err := deadlinegrpc.NewClient(append([]deadlinegrpc.ClientOption{deadlinegrpc.WithProtoFiles(new(protoregistry.Files))}, opts...)...)
	require.NoError(t, err)
	return c
}

// serveInterop serves interop.NewTestServer on loopback and returns a
// connection to it through client; both are closed at the end of the test.
func serveInterop(t *testing.T, client *deadlinegrpc.Client) *grpc.ClientConn {
	t.Helper()
	s := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(s, interop.NewTestServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go s.Serve(lis)
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, client.DialOptions()...)
	cc, err := grpc.NewClient(lis.Addr().String(), opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		cc.Close()
		s.Stop()
	})
	return cc
}

func budgetCtx(t *testing.T, budget time.Duration) context.Context {
	t.Helper()
	return deadline.NewContext(t.Context(), deadline.New(budget))
}

// A caller that cancels a stream finds the stream's context ended as soon
// as cancel returns, as without the interceptors: the lease is a child of
// the caller's context, and grpc-go's stream context a child of the lease,
// not one a goroutine cancels later. (grpc-go's interop case cancel_after_begin, which then expects
// CANCELLED from CloseAndRecv, failed far more often through the
// interceptors than without them.)
func TestStreamCanceledBeforeCloseIsCanceled(t *testing.T) {
	tc := testgrpc.NewTestServiceClient(serveInterop(t, newClient(t)))
	for range 100 {
		ctx, cancel := context.WithCancel(budgetCtx(t, time.Minute))
		stream, err := tc.StreamingInputCall(ctx)
		require.NoError(t, err)
		cancel()
		require.ErrorIs(t, stream.Context().Err(), context.Canceled, "the stream's context ended within cancel")
		require.NoError(t, stream.CloseSend())
		_, _ = stream.CloseAndRecv() // CANCELLED, but for grpc-go's own race with a server that answers at once
	}
}

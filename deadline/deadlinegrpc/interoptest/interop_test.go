package interoptest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
)

// grpc-go's interop client cases (google.golang.org/grpc/interop), the
// cases every gRPC implementation passes, run against interop.NewTestServer
// behind the server interceptors, through a client with the client
// interceptors: with and without a budget in the context, installed by
// DialOptions and by hand, with no TestService method declared safe to
// repeat, with all of them (the lazy server-stream path), and with all of
// them hedged after 5ms. The cases
// report a failure through grpclog's Fatal, which TestMain's logger turns
// into a panic that fails the case (see Logger).

func TestInterop(t *testing.T) {
	t.Run("plain grpc-go", func(t *testing.T) {
		t.Parallel() // the control: the same cases without the interceptors
		RunInterop(t, t.Context(), nil, nil, false)
	})
	for _, install := range []string{"DialOptions", "by hand"} {
		for _, methods := range []string{"none", "idempotent", "hedged"} {
			for _, budget := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/budget=%v", install, methods, budget)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					server, err := deadlinegrpc.NewServer()
					require.NoError(t, err)
					p := fixedPolicy()
					if methods == "hedged" {
						// Short enough that the larger cases are hedged.
						p.Hedge = &deadline.Hedge{Delay: 5 * time.Millisecond, MaxHedges: 1}
					}
					opts := []deadlinegrpc.ClientOption{deadlinegrpc.WithPolicy(p)}
					if methods != "none" {
						opts = append(opts, deadlinegrpc.WithIdempotentMethods(TestServiceMethods...))
					}
					client, err := deadlinegrpc.NewClient(opts...)
					require.NoError(t, err)
					dial := client.DialOptions()
					if install == "by hand" {
						dial = []grpc.DialOption{grpc.WithChainUnaryInterceptor(client.UnaryInterceptor()), grpc.WithChainStreamInterceptor(client.StreamInterceptor())}
					}
					ctx := t.Context()
					if budget {
						ctx = deadline.NewContext(ctx, deadline.New(time.Minute))
					}
					RunInterop(t, ctx, server.ServerOptions(), dial, methods == "hedged")
				})
			}
		}
	}
}

package deadlinegrpc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
)

// A client retries an idempotent method on UNAVAILABLE inside one budget,
// and a server gives each RPC at most its own maximum.
func ExampleNewClient() {
	server, err := deadlinegrpc.NewServer(deadlinegrpc.WithMaxBudget(2 * time.Second))
	if err != nil {
		panic(err)
	}
	e := &echo{handle: func(ctx context.Context, c call, in string) (string, error) {
		if c.n < 2 {
			return "", status.Error(codes.Unavailable, "warming up")
		}
		return "hello " + in, nil
	}}
	s := grpc.NewServer(server.ServerOptions()...)
	s.RegisterService(&echoDesc, e)
	lis := bufconn.Listen(1 << 16)
	go s.Serve(lis)
	defer s.Stop()

	client, err := deadlinegrpc.NewClient(
		deadlinegrpc.WithPolicy(deadline.DefaultPolicy()),
		deadlinegrpc.WithIdempotentMethods("/deadlinegrpc.test.Echo/Get"),
	)
	if err != nil {
		panic(err)
	}
	cc, err := grpc.NewClient("passthrough:///example", append(client.DialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))...)
	if err != nil {
		panic(err)
	}
	defer cc.Close()

	ctx := deadline.NewContext(context.Background(), deadline.New(time.Second))
	out := new(wrapperspb.StringValue)
	err = cc.Invoke(ctx, "/deadlinegrpc.test.Echo/Get", wrapperspb.String("budget"), out)
	fmt.Println(out.GetValue(), err, "after", e.count(mGet), "attempts")

	// A method nobody declared safe to repeat is sent once.
	err = cc.Invoke(ctx, "/deadlinegrpc.test.Echo/Put", wrapperspb.String("x"), out)
	var stop *deadline.StopError
	fmt.Println(status.Code(err), errors.As(err, &stop) && stop.Reason == deadline.ReasonNotRetryable, e.count(mPut))
	// Output:
	// hello budget <nil> after 2 attempts
	// Unavailable true 1
}

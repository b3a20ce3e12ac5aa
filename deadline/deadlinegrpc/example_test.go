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

// exampleConn serves e behind server and dials it through client.
func exampleConn(server *deadlinegrpc.Server, client *deadlinegrpc.Client, e *echo) (*grpc.ClientConn, func()) {
	s := grpc.NewServer(server.ServerOptions()...)
	s.RegisterService(&echoDesc, e)
	lis := bufconn.Listen(1 << 16)
	go s.Serve(lis)
	cc, err := grpc.NewClient("passthrough:///example", append(client.DialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))...)
	if err != nil {
		panic(err)
	}
	return cc, func() { cc.Close(); s.Stop() }
}

// The caller gets the server's status exactly as it was sent; StopOf says
// why the client did not try again.
func ExampleStopOf() {
	server, err := deadlinegrpc.NewServer()
	if err != nil {
		panic(err)
	}
	client, err := deadlinegrpc.NewClient(
		deadlinegrpc.WithPolicy(deadline.Policy{MaxAttempts: 3, Backoff: deadline.Backoff{Base: time.Millisecond, Max: time.Millisecond}}),
		deadlinegrpc.WithIdempotentMethods("/deadlinegrpc.test.Echo/Get"),
	)
	if err != nil {
		panic(err)
	}
	e := &echo{handle: func(context.Context, call, string) (string, error) {
		return "", status.Error(codes.Unavailable, "maintenance until 03:00")
	}}
	cc, done := exampleConn(server, client, e)
	defer done()

	ctx := deadline.NewContext(context.Background(), deadline.New(time.Second))
	err = cc.Invoke(ctx, "/deadlinegrpc.test.Echo/Get", wrapperspb.String("x"), new(wrapperspb.StringValue))
	fmt.Println(err)
	if stop, ok := deadlinegrpc.StopOf(err); ok {
		fmt.Println(stop.Reason, "after", stop.Attempts, "attempts")
	}
	// Output:
	// rpc error: code = Unavailable desc = maintenance until 03:00
	// attempts_exhausted after 3 attempts
}

// A subscription stream lasts as long as its caller wants: declared
// exempt, an RPC that arrives without a deadline gets none, where any other
// method gets the server's maximum.
func ExampleWithExemptMethods() {
	server, err := deadlinegrpc.NewServer(
		deadlinegrpc.WithMaxBudget(2*time.Second),
		deadlinegrpc.WithExemptMethods("/deadlinegrpc.test.Echo/Append"),
	)
	if err != nil {
		panic(err)
	}
	client, err := deadlinegrpc.NewClient(deadlinegrpc.WithExemptMethods("/deadlinegrpc.test.Echo/Append"))
	if err != nil {
		panic(err)
	}
	e := &echo{stream: func(ctx context.Context, c call, send func(string) error) error {
		_, bounded := ctx.Deadline()
		return send(fmt.Sprintf("%s: deadline %v", c.method, bounded))
	}}
	cc, done := exampleConn(server, client, e)
	defer done()

	for _, desc := range []*grpc.StreamDesc{appendDesc, watchDesc} {
		method := "/deadlinegrpc.test.Echo/" + desc.StreamName
		stream, err := cc.NewStream(context.Background(), desc, method)
		if err != nil {
			panic(err)
		}
		out := new(wrapperspb.StringValue)
		if err := errors.Join(stream.SendMsg(wrapperspb.String("x")), stream.CloseSend(), stream.RecvMsg(out)); err != nil {
			panic(err)
		}
		fmt.Println(out.GetValue())
	}
	// Output:
	// /deadlinegrpc.test.Echo/Append: deadline false
	// /deadlinegrpc.test.Echo/Watch: deadline true
}

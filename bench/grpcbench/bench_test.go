package grpcbench

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafegrpc"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
)

const method = "/grpcbench.Echo/Get"

var desc = grpc.ServiceDesc{
	ServiceName: "grpcbench.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Get", Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.StringValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		return in, nil
	}}},
}

// dial serves the echo service on bufconn and dials it with opts.
func dial(tb testing.TB, opts ...grpc.DialOption) *grpc.ClientConn {
	tb.Helper()
	s := grpc.NewServer()
	s.RegisterService(&desc, struct{}{})
	lis := bufconn.Listen(1 << 20)
	go s.Serve(lis)
	cc, err := grpc.NewClient("passthrough:///bench", append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
	}, opts...)...)
	require.NoError(tb, err)
	tb.Cleanup(func() {
		cc.Close()
		s.Stop()
	})
	return cc
}

func deadlineOpts(tb testing.TB) []grpc.DialOption {
	c, err := deadlinegrpc.NewClient(deadlinegrpc.WithIdempotentMethods(method))
	require.NoError(tb, err)
	return c.DialOptions()
}

func failsafeOpts() []grpc.DialOption {
	rp := retrypolicy.NewBuilder[any]().WithMaxAttempts(3).WithBackoff(50*time.Millisecond, 400*time.Millisecond).Build()
	return []grpc.DialOption{grpc.WithUnaryInterceptor(failsafegrpc.NewUnaryClientInterceptor[any](rp)), grpc.WithDisableRetry()}
}

func run(b *testing.B, cc *grpc.ClientConn) {
	ctx := deadline.NewContext(context.Background(), deadline.New(time.Hour))
	in, out := wrapperspb.String("x"), new(wrapperspb.StringValue)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := cc.Invoke(ctx, method, in, out); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnary(b *testing.B) {
	b.Run("grpc", func(b *testing.B) { run(b, dial(b, grpc.WithDisableRetry())) })
	b.Run("deadlinegrpc", func(b *testing.B) { run(b, dial(b, deadlineOpts(b)...)) })
	b.Run("failsafegrpc", func(b *testing.B) { run(b, dial(b, failsafeOpts()...)) })
}

func TestAllThreeAnswer(t *testing.T) {
	defer goleak.VerifyNone(t)
	for name, opts := range map[string][]grpc.DialOption{
		"grpc": nil, "deadlinegrpc": deadlineOpts(t), "failsafegrpc": failsafeOpts(),
	} {
		t.Run(name, func(t *testing.T) {
			cc := dial(t, opts...)
			out := new(wrapperspb.StringValue)
			require.NoError(t, cc.Invoke(t.Context(), method, wrapperspb.String("x"), out))
			require.Equal(t, "x", out.GetValue())
		})
	}
}

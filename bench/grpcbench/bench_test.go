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
	return dialOn(tb, "bufconn", opts...)
}

// dialOn serves the echo service over network ("bufconn", or "tcp" for a
// real loopback connection) and dials it with opts.
func dialOn(tb testing.TB, network string, opts ...grpc.DialOption) *grpc.ClientConn {
	tb.Helper()
	s := grpc.NewServer()
	s.RegisterService(&desc, struct{}{})
	base := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	target := "passthrough:///bench"
	var lis net.Listener
	switch network {
	case "bufconn":
		bl := bufconn.Listen(1 << 20)
		base = append(base, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return bl.DialContext(ctx) }))
		lis = bl
	case "tcp":
		tl, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(tb, err)
		target = "passthrough:///" + tl.Addr().String()
		lis = tl
	default:
		tb.Fatalf("unknown network %q", network)
	}
	go s.Serve(lis)
	cc, err := grpc.NewClient(target, append(base, opts...)...)
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

func run(b *testing.B, cc *grpc.ClientConn) { runTimeout(b, cc, false) }

// runTimeout runs unary RPCs on cc, each with a context deadline of its own
// when timeout is set (as a caller without this library would set one).
func runTimeout(b *testing.B, cc *grpc.ClientConn, timeout bool) {
	ctx := deadline.NewContext(context.Background(), deadline.New(time.Hour))
	in, out := wrapperspb.String("x"), new(wrapperspb.StringValue)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if timeout {
			rctx, cancel = context.WithTimeout(ctx, time.Minute)
		}
		err := cc.Invoke(rctx, method, in, out)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnary reports ns/op and allocs/op of one unary RPC, with no
// interceptor (without and with a context deadline), with deadlinegrpc and
// with failsafegrpc, over bufconn and
// over a loopback TCP connection. Run it with -count and compare ranges:
// on a shared machine one run says little. BenchmarkOverhead is the
// measure of the overhead itself.
func BenchmarkUnary(b *testing.B) {
	for _, network := range []string{"bufconn", "tcp"} {
		b.Run(network, func(b *testing.B) {
			b.Run("grpc", func(b *testing.B) { run(b, dialOn(b, network, grpc.WithDisableRetry())) })
			b.Run("grpc+timeout", func(b *testing.B) { runTimeout(b, dialOn(b, network, grpc.WithDisableRetry()), true) })
			b.Run("deadlinegrpc", func(b *testing.B) { run(b, dialOn(b, network, deadlineOpts(b)...)) })
			b.Run("failsafegrpc", func(b *testing.B) { run(b, dialOn(b, network, failsafeOpts()...)) })
		})
	}
}

// BenchmarkOverhead measures what each interceptor adds to a unary RPC, as
// the goal states it (deadlinegrpc <= 3 % of the RPC's own time,
// below failsafegrpc). It runs the clients (no interceptor, deadlinegrpc,
// failsafegrpc, each on its own connection to its own server)
// in blocks of 64 RPCs, one block of each per iteration in a rotating
// order, so that all see the same conditions, and measures each block
// on the process's CPU clock (client and server both run in this process),
// so that time other processes hold the CPU counts for none of them.
//
// A fourth client, no interceptor with a context.WithTimeout per RPC, shows
// how much of deadlinegrpc's cost is that of sending a deadline at all
// (grpc-timeout, and the server's deadline timer), which the lease must.
//
// It reports, per network:
//   - deadline/grpc and failsafe/grpc: CPU time per RPC relative to no
//     interceptor (1.03 is the 3 % goal); deadline/grpc+timeout: relative to
//     no interceptor with a deadline;
//   - grpc-cpu-us, grpc+timeout-cpu-us, deadline-cpu-us, failsafe-cpu-us:
//     CPU microseconds per RPC;
//   - grpc-wall-us, deadline-wall-us, failsafe-wall-us: wall microseconds per
//     RPC inside the same blocks.
//
// Its own ns/op is the wall time of one round of blocks.
func BenchmarkOverhead(b *testing.B) {
	for _, network := range []string{"bufconn", "tcp"} {
		b.Run(network, func(b *testing.B) {
			plain := dialOn(b, network, grpc.WithDisableRetry())
			ccs := [n]*grpc.ClientConn{plain, plain, dialOn(b, network, deadlineOpts(b)...), dialOn(b, network, failsafeOpts()...)}
			ctx := deadline.NewContext(context.Background(), deadline.New(time.Hour))
			in, out := wrapperspb.String("x"), new(wrapperspb.StringValue)
			block := func(i int) (cpu, wall time.Duration) {
				c0, w0 := processCPU(), time.Now()
				for range overheadBlock {
					rctx, cancel := ctx, context.CancelFunc(func() {})
					if i == withTimeout {
						rctx, cancel = context.WithTimeout(ctx, time.Minute)
					}
					err := ccs[i].Invoke(rctx, method, in, out)
					cancel()
					if err != nil {
						b.Fatal(err)
					}
				}
				return processCPU() - c0, time.Since(w0)
			}
			for i := range n { // warm up: connect, fill caches
				block(i)
			}
			var cpu, wall [n]time.Duration
			rounds := 0
			for b.Loop() {
				for k := range n {
					i := (rounds + k) % n
					c, w := block(i)
					cpu[i] += c
					wall[i] += w
				}
				rounds++
			}
			calls := float64(rounds * overheadBlock)
			us := func(d time.Duration) float64 { return float64(d) / calls / 1e3 }
			b.ReportMetric(float64(cpu[2])/float64(cpu[0]), "deadline/grpc")
			b.ReportMetric(float64(cpu[3])/float64(cpu[0]), "failsafe/grpc")
			b.ReportMetric(float64(cpu[2])/float64(cpu[1]), "deadline/grpc+timeout")
			b.ReportMetric(us(cpu[0]), "grpc-cpu-us")
			b.ReportMetric(us(cpu[1]), "grpc+timeout-cpu-us")
			b.ReportMetric(us(cpu[2]), "deadline-cpu-us")
			b.ReportMetric(us(cpu[3]), "failsafe-cpu-us")
			b.ReportMetric(us(wall[0]), "grpc-wall-us")
			b.ReportMetric(us(wall[2]), "deadline-wall-us")
			b.ReportMetric(us(wall[3]), "failsafe-wall-us")
		})
	}
}

// overheadBlock is how many RPCs BenchmarkOverhead runs per block.
const overheadBlock = 64

// BenchmarkOverhead's clients, by index: no interceptor, the same with a
// context deadline per RPC (as a caller without this library would set
// one), deadlinegrpc, failsafegrpc.
const (
	withTimeout = 1
	n           = 4
)

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

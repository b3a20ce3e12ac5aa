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
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
)

const (
	method    = "/grpcbench.Echo/Get" // google.protobuf.StringValue in and out
	methodBig = "/grpcbench.Echo/Big" // google.protobuf.BytesValue: 1 KiB in, 4 KiB out
)

// bigReply is Big's answer, shared read-only by every RPC.
var bigReply = wrapperspb.Bytes(make([]byte, 4<<10))

var desc = grpc.ServiceDesc{
	ServiceName: "grpcbench.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Get", Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return intercept(ctx, in, method, ic, func(context.Context, any) (any, error) { return in, nil })
		}},
		{MethodName: "Big", Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.BytesValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return intercept(ctx, in, methodBig, ic, func(context.Context, any) (any, error) { return bigReply, nil })
		}},
	},
}

// intercept runs h through the server's interceptor, if it has one.
func intercept(ctx context.Context, in any, method string, ic grpc.UnaryServerInterceptor, h grpc.UnaryHandler) (any, error) {
	if ic == nil {
		return h(ctx, in)
	}
	return ic(ctx, in, &grpc.UnaryServerInfo{FullMethod: method}, h)
}

// payload is what one benchmarked RPC carries.
type payload struct {
	name    string
	method  string
	in, out func() any
}

var payloads = []payload{
	{"empty", method, func() any { return wrapperspb.String("x") }, func() any { return new(wrapperspb.StringValue) }},
	{"1k-4k", methodBig, func() any { return wrapperspb.Bytes(make([]byte, 1<<10)) }, func() any { return new(wrapperspb.BytesValue) }},
}

// dialOn serves the echo service over network ("bufconn", or "tcp" for a
// real loopback connection) on a server built with sopts, and dials it with
// opts.
func dialOn(tb testing.TB, network string, sopts []grpc.ServerOption, opts ...grpc.DialOption) *grpc.ClientConn {
	tb.Helper()
	s := grpc.NewServer(sopts...)
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

// deadlineServerOpts installs deadlinegrpc's server interceptors with a
// maximum above the benchmark's budget, so that the inbound deadline (the
// client's lease) sets each RPC's budget, as it does when a caller's budget
// is within what the server allows.
func deadlineServerOpts(tb testing.TB) []grpc.ServerOption {
	s, err := deadlinegrpc.NewServer(deadlinegrpc.WithMaxBudget(2 * time.Hour))
	require.NoError(tb, err)
	return s.ServerOptions()
}

func deadlineOpts(tb testing.TB) []grpc.DialOption {
	c, err := deadlinegrpc.NewClient(deadlinegrpc.WithIdempotentMethods(method, methodBig))
	require.NoError(tb, err)
	return c.DialOptions()
}

func failsafeOpts() []grpc.DialOption {
	rp := retrypolicy.NewBuilder[any]().WithMaxAttempts(3).WithBackoff(50*time.Millisecond, 400*time.Millisecond).Build()
	return []grpc.DialOption{grpc.WithUnaryInterceptor(failsafegrpc.NewUnaryClientInterceptor[any](rp)), grpc.WithDisableRetry()}
}

// client is one of the benchmarked ways to make an RPC: a connection, and
// whether each RPC gets a context deadline of its own (as a caller without
// this library would set one).
type client struct {
	name    string
	cc      *grpc.ClientConn
	timeout bool
	trailer bool // captures each RPC's trailer, as deadlinegrpc does
}

// clients builds, over network, one connection (and server) per client of
// [clientNames], in that order. Each has its own, the clients with a
// deadline too: sharing its twin's connection, a client would run right
// after it on warm caches in 5 of BenchmarkOverhead's 6 rotations, and
// every other client after a different connection (an identical plain
// client with a deadline on a connection of its own measured +0.7 % (bufconn)
// to +2 % (TCP) against the shared one, medians).
func clients(tb testing.TB, network string) [nClients]client {
	return [nClients]client{
		cGRPC:            {name: clientNames[cGRPC], cc: dialOn(tb, network, nil, grpc.WithDisableRetry())},
		cGRPCTimeout:     {name: clientNames[cGRPCTimeout], cc: dialOn(tb, network, nil, grpc.WithDisableRetry()), timeout: true},
		cDeadline:        {name: clientNames[cDeadline], cc: dialOn(tb, network, nil, deadlineOpts(tb)...)},
		cFailsafe:        {name: clientNames[cFailsafe], cc: dialOn(tb, network, nil, failsafeOpts()...)},
		cFailsafeTimeout: {name: clientNames[cFailsafeTimeout], cc: dialOn(tb, network, nil, failsafeOpts()...), timeout: true},
		cDeadlineServer:  {name: clientNames[cDeadlineServer], cc: dialOn(tb, network, deadlineServerOpts(tb), deadlineOpts(tb)...)},
	}
}

// The benchmarked clients, by index.
const (
	cGRPC            = iota // no interceptor, no deadline
	cGRPCTimeout            // no interceptor, context.WithTimeout per RPC
	cDeadline               // deadlinegrpc client, plain server
	cFailsafe               // failsafegrpc with a retry policy, no deadline
	cFailsafeTimeout        // the same with context.WithTimeout per RPC
	cDeadlineServer         // deadlinegrpc client and deadlinegrpc server
	nClients
)

var clientNames = [nClients]string{"grpc", "grpc+timeout", "deadlinegrpc", "failsafegrpc", "failsafegrpc+timeout", "deadlinegrpc+server"}

// invoke makes one RPC of c carrying p's messages, under ctx.
func (c client) invoke(ctx context.Context, p payload, in, out any) error {
	if c.timeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Minute)
		defer cancel()
	}
	if c.trailer {
		capture := new(struct {
			md   metadata.MD
			opts [1]grpc.CallOption
		})
		capture.opts[0] = grpc.Trailer(&capture.md)
		return c.cc.Invoke(ctx, p.method, in, out, capture.opts[:]...)
	}
	return c.cc.Invoke(ctx, p.method, in, out)
}

// BenchmarkUnary reports ns/op and allocs/op of one unary RPC with the empty
// message, for each client of [clientNames], over bufconn and over a
// loopback TCP connection. Run it with -count and compare ranges: on a
// shared machine one run says little. BenchmarkOverhead is the measure of
// the overhead itself.
func BenchmarkUnary(b *testing.B) {
	for _, network := range []string{"bufconn", "tcp"} {
		b.Run(network, func(b *testing.B) {
			cs := clients(b, network)
			for _, c := range cs {
				b.Run(c.name, func(b *testing.B) {
					ctx := deadline.NewContext(context.Background(), deadline.New(time.Hour))
					p := payloads[0]
					in, out := p.in(), p.out()
					b.ReportAllocs()
					for b.Loop() {
						if err := c.invoke(ctx, p, in, out); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// BenchmarkOverhead measures what each interceptor adds to a unary RPC, as
// the goal states it (deadlinegrpc <= 3 % of the RPC's own time,
// below failsafegrpc). It runs the clients of [clientNames] (each
// interceptor on its own connection to its own server) in blocks of 64
// RPCs, one block of each per iteration in a rotating order, so that all
// see the same conditions, and measures each block on the process's CPU
// clock (client and server both run in this process), so that time other
// processes hold the CPU counts for none of them. It does so over bufconn
// and loopback TCP, with the empty message and with 1 KiB in / 4 KiB out.
//
// The cost is decomposed into what gRPC charges for carrying any deadline
// (grpc-timeout on the wire, a timer context on each side) and what each
// interceptor adds of its own, compared with the plain client in the same
// deadline situation. It reports, per network and payload, CPU time per RPC
// relative to another client (1.03 is the 3 % goal):
//   - deadline/grpc: deadlinegrpc against no interceptor without a deadline
//     (the goal's literal baseline);
//   - timeout/grpc: gRPC's own cost of a deadline (plain with a
//     context.WithTimeout against plain without);
//   - deadline/timeout: deadlinegrpc's own cost (against plain with a
//     deadline: both send one);
//   - failsafe/grpc: failsafegrpc's own cost (neither sends a deadline);
//   - failsafe+timeout/timeout: failsafegrpc's own cost when the caller
//     sets a deadline;
//   - deadline+server/timeout: deadlinegrpc on both sides against plain with
//     a deadline;
//
// and CPU and wall microseconds per RPC of each client (<name>-cpu-us,
// <name>-wall-us). Its own ns/op is the wall time of one round of blocks.
func BenchmarkOverhead(b *testing.B) {
	for _, network := range []string{"bufconn", "tcp"} {
		for _, p := range payloads {
			b.Run(network+"/"+p.name, func(b *testing.B) {
				cs := clients(b, network)
				cpu, wall, calls := rotate(b, cs[:], p)
				ratio := func(x, y int) float64 { return float64(cpu[x]) / float64(cpu[y]) }
				b.ReportMetric(ratio(cDeadline, cGRPC), "deadline/grpc")
				b.ReportMetric(ratio(cGRPCTimeout, cGRPC), "timeout/grpc")
				b.ReportMetric(ratio(cDeadline, cGRPCTimeout), "deadline/timeout")
				b.ReportMetric(ratio(cFailsafe, cGRPC), "failsafe/grpc")
				b.ReportMetric(ratio(cFailsafeTimeout, cGRPCTimeout), "failsafe+timeout/timeout")
				b.ReportMetric(ratio(cDeadlineServer, cGRPCTimeout), "deadline+server/timeout")
				for i, c := range cs {
					b.ReportMetric(float64(cpu[i])/calls/1e3, c.name+"-cpu-us")
					b.ReportMetric(float64(wall[i])/calls/1e3, c.name+"-wall-us")
				}
			})
		}
	}
}

// rotate runs cs in blocks of overheadBlock RPCs carrying p's messages, one
// block of each per iteration of b, in an order that rotates by one each
// iteration, after a warm-up block of each. It returns each client's
// process CPU time and wall time over the measured blocks, and how many
// RPCs each made.
func rotate(b *testing.B, cs []client, p payload) (cpu, wall []time.Duration, calls float64) {
	ctx := deadline.NewContext(context.Background(), deadline.New(time.Hour))
	in, out := p.in(), p.out()
	block := func(c client) (cpu, wall time.Duration) {
		c0, w0 := processCPU(), time.Now()
		for range overheadBlock {
			if err := c.invoke(ctx, p, in, out); err != nil {
				b.Fatal(err)
			}
		}
		return processCPU() - c0, time.Since(w0)
	}
	for _, c := range cs { // warm up: connect, fill caches
		block(c)
	}
	cpu, wall = make([]time.Duration, len(cs)), make([]time.Duration, len(cs))
	rounds := 0
	for b.Loop() {
		for k := range cs {
			i := (rounds + k) % len(cs)
			c, w := block(cs[i])
			cpu[i] += c
			wall[i] += w
		}
		rounds++
	}
	return cpu, wall, float64(rounds * overheadBlock)
}

// BenchmarkOverheadSteps locates deadlinegrpc's own cost, (b) of
// BenchmarkOverhead, by building it up one step at a time from the plain
// call with a context deadline. Each client has its own connection and
// server, and they run as BenchmarkOverhead's do (rotating blocks, process
// CPU clock), over bufconn and TCP with the empty message:
//
//   - grpc+timeout: the plain call with a context.WithTimeout per RPC;
//   - grpc+timeout-again: the same client once more, an A/A control: how
//     far two identical clients differ is what the measure resolves;
//   - withdeadline: an interceptor that runs the call under
//     context.WithDeadline at the instant deadline.Do's lease ends (the
//     budget's end less the default floor), what any interceptor that sends
//     a lease pays;
//   - do: an interceptor that runs the call as the op of deadline.Do, with
//     the default policy and nothing else;
//   - do+trailer: the same, with a per-call trailer capture allocated as
//     deadlinegrpc's is (grpc-go copies the trailer and the option list for
//     it);
//   - deadlinegrpc: the client interceptor.
//
// It reports each step's CPU time per RPC relative to the one before it
// (again/timeout, withdeadline/timeout, do/withdeadline, trailer/do,
// deadline/trailer) and deadline/timeout, the whole of (b).
func BenchmarkOverheadSteps(b *testing.B) {
	for _, network := range []string{"bufconn", "tcp"} {
		b.Run(network, func(b *testing.B) {
			cs := stepClients(b, network)
			cpu, _, calls := rotate(b, cs, payloads[0])
			ratio := func(x, y int) float64 { return float64(cpu[x]) / float64(cpu[y]) }
			b.ReportMetric(ratio(1, 0), "again/timeout")
			b.ReportMetric(ratio(2, 0), "withdeadline/timeout")
			b.ReportMetric(ratio(3, 2), "do/withdeadline")
			b.ReportMetric(ratio(4, 3), "trailer/do")
			b.ReportMetric(ratio(5, 4), "deadline/trailer")
			b.ReportMetric(ratio(5, 0), "deadline/timeout")
			for i, c := range cs {
				b.ReportMetric(float64(cpu[i])/calls/1e3, c.name+"-cpu-us")
			}
		})
	}
}

// stepClients are BenchmarkOverheadSteps' clients, in its order, each on a
// connection of its own.
func stepClients(tb testing.TB, network string) []client {
	lease := func(ctx context.Context) (context.Context, context.CancelFunc) {
		d, _ := deadline.FromContext(ctx)
		return context.WithDeadline(ctx, d.End().Add(-deadline.DefaultPolicy().Floor))
	}
	withDeadline := func(ctx context.Context, m string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		actx, cancel := lease(ctx)
		defer cancel()
		return invoke(actx, m, req, reply, cc, opts...)
	}
	policy := deadline.DefaultPolicy()
	do := func(ctx context.Context, m string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		d, _ := deadline.FromContext(ctx)
		_, err := deadline.Do(ctx, d, policy, func(actx context.Context, _ deadline.AttemptInfo) (struct{}, error) {
			return struct{}{}, invoke(actx, m, req, reply, cc, opts...)
		})
		return err
	}
	intercepted := func(f grpc.UnaryClientInterceptor) *grpc.ClientConn {
		return dialOn(tb, network, nil, grpc.WithChainUnaryInterceptor(f), grpc.WithDisableRetry())
	}
	return []client{
		{name: "grpc+timeout", cc: dialOn(tb, network, nil, grpc.WithDisableRetry()), timeout: true},
		{name: "grpc+timeout-again", cc: dialOn(tb, network, nil, grpc.WithDisableRetry()), timeout: true},
		{name: "withdeadline", cc: intercepted(withDeadline)},
		{name: "do", cc: intercepted(do)},
		{name: "do+trailer", cc: intercepted(do), trailer: true},
		{name: "deadlinegrpc", cc: dialOn(tb, network, nil, deadlineOpts(tb)...)},
	}
}

// overheadBlock is how many RPCs BenchmarkOverhead runs per block.
const overheadBlock = 64

// TestEveryClientAnswers: every benchmarked client (BenchmarkOverheadSteps'
// too) gets the right answer
// to both payloads over both networks, and leaves no goroutine behind.
func TestEveryClientAnswers(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, network := range []string{"bufconn", "tcp"} {
		t.Run(network, func(t *testing.T) {
			ctx := deadline.NewContext(t.Context(), deadline.New(time.Minute))
			cs := clients(t, network)
			for _, c := range append(cs[:], stepClients(t, network)...) {
				out := new(wrapperspb.StringValue)
				require.NoError(t, c.invoke(ctx, payloads[0], wrapperspb.String("x"), out), c.name)
				require.Equal(t, "x", out.GetValue(), c.name)
				big := new(wrapperspb.BytesValue)
				require.NoError(t, c.invoke(ctx, payloads[1], payloads[1].in(), big), c.name)
				require.Len(t, big.GetValue(), 4<<10, c.name)
			}
		})
	}
}

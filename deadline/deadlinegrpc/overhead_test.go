package deadlinegrpc_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
)

// okInvoker stands for grpc-go's invoker without a network: it records the
// call options of the last attempt and succeeds.
type okInvoker struct{ opts []grpc.CallOption }

func (i *okInvoker) invoke(_ context.Context, _ string, _, _ any, _ *grpc.ClientConn, opts ...grpc.CallOption) error {
	i.opts = opts
	return nil
}

// The interceptor hands the invoker the caller's call options, in order,
// followed by one trailer capture, however many options there are (within
// and beyond those it holds without a second allocation), and leaves the
// caller's slice alone.
func TestUnaryPassesTheCallersOptions(t *testing.T) {
	c, err := deadlinegrpc.NewClient(deadlinegrpc.WithIdempotentMethods(mGet))
	require.NoError(t, err)
	for _, n := range []int{0, 1, 3, 4, 9} {
		opts := make([]grpc.CallOption, n, n+8) // room to append in place
		for k := range opts {
			opts[k] = grpc.MaxCallRecvMsgSize(k + 1)
		}
		var inv okInvoker
		require.NoError(t, c.UnaryInterceptor()(t.Context(), mGet, nil, nil, nil, inv.invoke, opts...))
		require.Len(t, inv.opts, n+1, "%d options", n)
		for k := range opts {
			assert.Equal(t, opts[k], inv.opts[k], "%d options: option %d", n, k)
		}
		assert.IsType(t, grpc.TrailerCallOption{}, inv.opts[n], "%d options: the last is the trailer capture", n)
		assert.Len(t, opts[:cap(opts)][n:n+1], 1)
		assert.Nil(t, opts[:cap(opts)][n], "%d options: the caller's backing array is not written", n)
	}
}

// Each attempt gets a trailer capture of its own: an invoker that kept the
// first attempt's options (an interceptor further down that returned before
// its call ended) cannot write that attempt's trailer into the next one's.
func TestUnaryRetryGetsItsOwnTrailerCapture(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := deadlinegrpc.NewClient(deadlinegrpc.WithIdempotentMethods(mGet), deadlinegrpc.WithPolicy(fixedPolicy()))
		require.NoError(t, err)
		var captures []*metadata.MD
		invoke := func(_ context.Context, _ string, _, _ any, _ *grpc.ClientConn, opts ...grpc.CallOption) error {
			captures = append(captures, opts[len(opts)-1].(grpc.TrailerCallOption).TrailerAddr)
			if len(captures) == 1 {
				return status.Error(codes.Unavailable, "down")
			}
			return nil
		}
		require.NoError(t, c.UnaryInterceptor()(budgetCtx(t, 5*time.Second), mGet, nil, nil, nil, invoke))
		require.Len(t, captures, 2)
		assert.NotSame(t, captures[0], captures[1])
	})
}

// A successful unary RPC of a method safe to repeat, without options, costs
// the interceptor one allocation of its own (the trailer capture and the
// option slice, together) on top of deadline.Do's. The bound is the count
// measured when it was set; deadline.Do's share is measured here too, so
// that a change in the engine does not fail this test.
func TestUnaryAllocations(t *testing.T) {
	c, err := deadlinegrpc.NewClient(deadlinegrpc.WithIdempotentMethods(mGet))
	require.NoError(t, err)
	ctx := deadline.NewContext(context.Background(), deadline.New(time.Hour))
	var inv okInvoker
	unary, invoke := c.UnaryInterceptor(), grpc.UnaryInvoker(inv.invoke)
	got := testing.AllocsPerRun(200, func() {
		_ = unary(ctx, mGet, nil, nil, nil, invoke)
	})
	d, _ := deadline.FromContext(ctx)
	p := deadline.DefaultPolicy()
	p.Name = mGet[1:]
	p.Retryable = func(error) bool { return false }
	engine := testing.AllocsPerRun(200, func() {
		_, _ = deadline.Do(ctx, d, p, func(context.Context, deadline.AttemptInfo) (struct{}, error) { return struct{}{}, nil })
	})
	assert.LessOrEqual(t, got-engine, 1.0, "interceptor %v allocs/op, deadline.Do %v", got, engine)
}

// A method that is not safe to repeat costs no more allocations than one
// that is: the debug message saying it is sent once is built only when
// the logger records debug messages (before, its argument escaped on
// every call: one allocation more).
func TestUnsafeMethodAllocations(t *testing.T) {
	ctx := deadline.NewContext(context.Background(), deadline.New(time.Hour))
	var inv okInvoker
	invoke := grpc.UnaryInvoker(inv.invoke)
	allocs := func(c *deadlinegrpc.Client) float64 {
		unary := c.UnaryInterceptor()
		return testing.AllocsPerRun(200, func() { _ = unary(ctx, mPut, nil, nil, nil, invoke) })
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	unsafe, err := deadlinegrpc.NewClient(deadlinegrpc.WithLogger(quiet))
	require.NoError(t, err)
	safe, err := deadlinegrpc.NewClient(deadlinegrpc.WithLogger(quiet), deadlinegrpc.WithIdempotentMethods(mPut))
	require.NoError(t, err)
	assert.Equal(t, allocs(safe), allocs(unsafe), "not safe to repeat, debug off")

	logs := &logBuffer{}
	verbose, err := deadlinegrpc.NewClient(deadlinegrpc.WithLogger(logs.logger()))
	require.NoError(t, err)
	require.NoError(t, verbose.UnaryInterceptor()(ctx, mPut, nil, nil, nil, invoke))
	assert.Contains(t, logs.String(), "not declared safe to repeat", "debug on: still said")
}

// BenchmarkUnaryInterceptor measures the interceptor alone (no network):
// what it adds to an RPC on the caller's goroutine.
func BenchmarkUnaryInterceptor(b *testing.B) {
	c, err := deadlinegrpc.NewClient(deadlinegrpc.WithIdempotentMethods(mGet))
	require.NoError(b, err)
	ctx := deadline.NewContext(context.Background(), deadline.New(time.Hour))
	var inv okInvoker
	unary, invoke := c.UnaryInterceptor(), grpc.UnaryInvoker(inv.invoke)
	b.ReportAllocs()
	for b.Loop() {
		_ = unary(ctx, mGet, nil, nil, nil, invoke)
	}
}

// BenchmarkUnaryInterceptorConn is BenchmarkUnaryInterceptor with a real
// connection whose service config (a methodConfig for the service, without
// a retryPolicy) has been applied, as in production: the interceptor's own
// per-RPC work on the connection (the double-retry check), serially and
// from every core at once. The invoker is still a stub: nothing is sent.
func BenchmarkUnaryInterceptorConn(b *testing.B) {
	const config = `{"methodConfig":[{"name":[{"service":"` + service + `"}],"timeout":"60s"}]}`
	cc, err := grpc.NewClient("passthrough:///unused", grpcInsecure(), grpc.WithDefaultServiceConfig(config),
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) {
			return nil, errors.New("no network in this benchmark")
		}))
	require.NoError(b, err)
	defer cc.Close()
	cc.Connect() // leaves idle: the resolver's update applies the service config
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for cc.GetMethodConfig(mGet).Timeout == nil && cc.WaitForStateChange(ctx, cc.GetState()) {
	}
	require.NotNil(b, cc.GetMethodConfig(mGet).Timeout, "the service config is applied")

	c, err := deadlinegrpc.NewClient(deadlinegrpc.WithIdempotentMethods(mGet))
	require.NoError(b, err)
	unary := c.UnaryInterceptor()
	invoke := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	dctx := deadline.NewContext(context.Background(), deadline.New(time.Hour))
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = unary(dctx, mGet, nil, nil, cc, invoke)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = unary(dctx, mGet, nil, nil, cc, invoke)
			}
		})
	})
}

// An RPC whose inbound deadline is within the server's maximum already has
// a context that ends at its budget (grpc-go made it from grpc-timeout):
// the server interceptors hand the handler that context with the Deadline
// in it, and allocate nothing else: no second timer context (6 allocations
// per RPC before, 2 after). The clamped case still gets a context of its
// own that ends at the maximum.
func TestServerInboundDeadlineAllocations(t *testing.T) {
	s, err := deadlinegrpc.NewServer(deadlinegrpc.WithMaxBudget(time.Minute))
	require.NoError(t, err)
	unary := s.UnaryInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: mGet}
	inbound, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	end, _ := inbound.Deadline()

	var hctx context.Context
	handler := func(ctx context.Context, _ any) (any, error) { hctx = ctx; return nil, nil }
	_, err = unary(inbound, nil, info, handler)
	require.NoError(t, err)
	got, _ := hctx.Deadline()
	assert.Equal(t, end, got, "the handler's context ends at the inbound deadline")
	d, ok := deadline.FromContext(hctx)
	require.True(t, ok)
	assert.Equal(t, end, d.End())
	cancel()
	<-hctx.Done()
	assert.ErrorIs(t, hctx.Err(), context.Canceled, "the handler's context is the RPC's: it ends with it")

	inbound, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	allocs := testing.AllocsPerRun(200, func() {
		_, _ = unary(inbound, nil, info, func(context.Context, any) (any, error) { return nil, nil })
	})
	assert.LessOrEqual(t, allocs, 2.0, "only the context that carries the Deadline (and the Deadline in it)")

	clamped, cancel2 := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel2()
	_, err = unary(clamped, nil, info, handler)
	require.NoError(t, err)
	got, _ = hctx.Deadline()
	assert.Less(t, time.Until(got), time.Minute+time.Second, "clamped: a context of its own ends at the maximum")
	assert.ErrorIs(t, hctx.Err(), context.Canceled, "and is released when the handler returns")
}

package test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/grpclog"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc/interoptest"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetgrpc"
)

func TestMain(m *testing.M) {
	grpclog.SetLoggerV2(interoptest.Logger())
	goleak.VerifyTestMain(m)
}

const method = "/deadlinegrpc.test.Echo/Get"

// flaky fails the first two calls with UNAVAILABLE.
type flaky struct{ n int }

var desc = grpc.ServiceDesc{
	ServiceName: "deadlinegrpc.test.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Get", Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.StringValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, req any) (any, error) {
			f := srv.(*flaky)
			f.n++
			if f.n < 3 {
				return nil, status.Error(codes.Unavailable, "down")
			}
			return req, nil
		}
		return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: method}, h)
	}}},
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value)
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestOneClientSpanPerAttemptUnderTheCallSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp))
	prop := otelgrpc.WithPropagators(propagation.TraceContext{})

	sopts, err := otelbudgetgrpc.ServerOptions(obs, []deadlinegrpc.ServerOption{deadlinegrpc.WithMaxBudget(time.Second)}, prop)
	require.NoError(t, err)
	// WaitForHandlers: Stop returns once every handler, and the SERVER span
	// its stats handler ends after the response, is done.
	srv := grpc.NewServer(append(sopts, grpc.WaitForHandlers(true))...)
	srv.RegisterService(&desc, &flaky{})
	lis := bufconn.Listen(1 << 20)
	go srv.Serve(lis)
	defer srv.Stop()

	p := deadline.Policy{MaxAttempts: 3, Floor: 20 * time.Millisecond,
		Backoff: deadline.Backoff{Base: time.Millisecond, Max: time.Millisecond, Jitter: deadline.JitterNone}}
	dopts, err := otelbudgetgrpc.DialOptions(obs, []deadlinegrpc.ClientOption{
		deadlinegrpc.WithPolicy(p), deadlinegrpc.WithIdempotentMethods(method)}, prop)
	require.NoError(t, err)
	cc, err := grpc.NewClient("passthrough:///buf", append(dopts,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))...)
	require.NoError(t, err)
	defer cc.Close()

	ctx := deadline.NewContext(t.Context(), deadline.New(5*time.Second))
	require.NoError(t, cc.Invoke(ctx, method, wrapperspb.String("x"), new(wrapperspb.StringValue)))
	cc.Close()
	srv.Stop()

	var call sdktrace.ReadOnlySpan
	var clients, servers []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.SpanKind() {
		case trace.SpanKindInternal:
			call = s
		case trace.SpanKindClient:
			clients = append(clients, s)
		case trace.SpanKindServer:
			servers = append(servers, s)
		}
	}
	require.NotNil(t, call, "one call span")
	assert.Equal(t, "deadlinegrpc.test.Echo/Get", call.Name())
	ca := attrs(call)
	assert.Equal(t, "ok", ca[otelbudget.AttrVerdict].AsString())
	assert.Equal(t, int64(3), ca[otelbudget.AttrAttempts].AsInt64())

	require.Len(t, clients, 3, "one CLIENT span per physical attempt")
	for i, s := range clients {
		a := attrs(s)
		assert.Equal(t, call.SpanContext().SpanID(), s.Parent().SpanID(), "a child of the call span")
		assert.Equal(t, int64(i+1), a[otelbudget.AttrAttemptNumber].AsInt64())
		assert.Contains(t, a, otelbudget.AttrAttemptGrantedMs)
		assert.NotContains(t, a, attribute.Key("http.request.resend_count"), "no HTTP attribute on an RPC span")
	}
	assert.Equal(t, "error", attrs(clients[0])[otelbudget.AttrAttemptEndedBy].AsString())
	assert.Equal(t, "completed", attrs(clients[2])[otelbudget.AttrAttemptEndedBy].AsString())
	for _, s := range clients[:2] {
		assert.Equal(t, "UNAVAILABLE", attrs(s)[semconv.ErrorTypeKey].AsString(), "the status code's name, as the semantic conventions write it")
	}
	assert.NotContains(t, attrs(clients[2]), semconv.ErrorTypeKey)

	require.Len(t, servers, 3)
	for _, s := range servers {
		a := attrs(s)
		assert.Equal(t, int64(1000), a[otelbudget.AttrServerMaxBudgetMs].AsInt64())
		assert.Greater(t, a[otelbudget.AttrServerInboundBudgetMs].AsInt64(), int64(1000), "5s inbound clamped to 1s")
		assert.Equal(t, int64(1000), a[otelbudget.AttrServerBudgetMs].AsInt64())
		assert.Equal(t, "max", a[otelbudget.AttrServerLimitedBy].AsString())
		assert.Equal(t, int64(0), a[otelbudget.AttrServerFloorMs].AsInt64())
		_, refused := a[otelbudget.AttrServerRefusal]
		assert.False(t, refused, "no refusal attribute on an admitted RPC")
		assert.Equal(t, call.SpanContext().TraceID(), s.SpanContext().TraceID(), "one trace across the wire")
	}
}

func TestInvalidOptions(t *testing.T) {
	_, err := otelbudgetgrpc.DialOptions(nil, []deadlinegrpc.ClientOption{deadlinegrpc.WithDefaultBudget(0)})
	assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
	_, err = otelbudgetgrpc.ServerOptions(nil, []deadlinegrpc.ServerOption{deadlinegrpc.WithFloor(-1)})
	assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
}

// policy retries the flaky handler twice, 1 ms apart.
var policy = deadline.Policy{MaxAttempts: 3, Floor: 20 * time.Millisecond,
	Backoff: deadline.Backoff{Base: time.Millisecond, Max: time.Millisecond, Jitter: deadline.JitterNone}}

// dial serves desc with a fresh flaky handler over network ("bufconn" or
// "tcp" on 127.0.0.1) and returns a connection dialled with dopts and a
// function that closes it and stops the server, waiting for its handlers
// (also called at cleanup; a second call does nothing).
func dial(t *testing.T, network string, sopts []grpc.ServerOption, dopts []grpc.DialOption) (*grpc.ClientConn, func()) {
	t.Helper()
	return dialService(t, network, &desc, &flaky{}, sopts, dopts)
}

// dialService is dial for the service sd implemented by impl.
func dialService(t *testing.T, network string, sd *grpc.ServiceDesc, impl any, sopts []grpc.ServerOption, dopts []grpc.DialOption) (*grpc.ClientConn, func()) {
	t.Helper()
	srv := grpc.NewServer(append(sopts, grpc.WaitForHandlers(true))...)
	srv.RegisterService(sd, impl)
	target := "passthrough:///buf"
	var lis net.Listener
	switch network {
	case "bufconn":
		bl := bufconn.Listen(1 << 20)
		lis = bl
		dopts = append(dopts, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return bl.DialContext(ctx) }))
	default:
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lis, target = l, l.Addr().String()
	}
	go srv.Serve(lis)
	cc, err := grpc.NewClient(target, append(dopts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	stop := func() {
		cc.Close()
		srv.Stop()
	}
	t.Cleanup(stop)
	return cc, stop
}

// TestObserverAttachedAgainRecordsOnce: DialOptions observes the calls with
// obs itself, so obs's hooks attached again by the user (on the caller's
// context, on the call's policy, on the client) change nothing: one call
// span, one otelgrpc CLIENT span per attempt and no INTERNAL attempt span,
// one backoff event per retry, metrics counted once, every span ended.
func TestObserverAttachedAgainRecordsOnce(t *testing.T) {
	type again struct {
		name   string
		ctx    func(context.Context, *otelbudget.Observer) context.Context
		client func(*otelbudget.Observer) []deadlinegrpc.ClientOption
	}
	cases := []again{
		{name: "nothing"},
		{name: "Hooks on the context", ctx: func(ctx context.Context, obs *otelbudget.Observer) context.Context {
			return deadline.WithHooks(ctx, obs.Hooks())
		}},
		{name: "ClientHooks on the context", ctx: func(ctx context.Context, obs *otelbudget.Observer) context.Context {
			return deadline.WithHooks(ctx, obs.ClientHooks())
		}},
		{name: "Hooks on the request policy", ctx: func(ctx context.Context, obs *otelbudget.Observer) context.Context {
			p := policy
			p.Hooks = obs.Hooks()
			return deadlinegrpc.WithRequestPolicy(ctx, p)
		}},
		{name: "Hooks on the client", client: func(obs *otelbudget.Observer) []deadlinegrpc.ClientOption {
			return []deadlinegrpc.ClientOption{deadlinegrpc.WithHooks(obs.Hooks())}
		}},
		{name: "Hooks and ClientHooks everywhere", ctx: func(ctx context.Context, obs *otelbudget.Observer) context.Context {
			p := policy
			p.Hooks = deadline.Compose(obs.ClientHooks(), obs.Hooks())
			return deadlinegrpc.WithRequestPolicy(deadline.WithHooks(ctx, deadline.Compose(obs.Hooks(), obs.ClientHooks())), p)
		}, client: func(obs *otelbudget.Observer) []deadlinegrpc.ClientOption {
			return []deadlinegrpc.ClientOption{deadlinegrpc.WithHooks(obs.Hooks()), deadlinegrpc.WithHooks(obs.ClientHooks())}
		}},
	}
	for _, network := range []string{"bufconn", "tcp"} {
		for _, c := range cases {
			t.Run(network+"/"+c.name, func(t *testing.T) {
				rec := tracetest.NewSpanRecorder()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
				reader := sdkmetric.NewManualReader()
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
				obs := otelbudget.New(otelbudget.WithTracerProvider(tp), otelbudget.WithMeterProvider(mp))

				copts := []deadlinegrpc.ClientOption{deadlinegrpc.WithPolicy(policy), deadlinegrpc.WithIdempotentMethods(method)}
				if c.client != nil {
					copts = append(copts, c.client(obs)...)
				}
				dopts, err := otelbudgetgrpc.DialOptions(obs, copts)
				require.NoError(t, err)
				sopts, err := otelbudgetgrpc.ServerOptions(obs, nil)
				require.NoError(t, err)
				cc, stop := dial(t, network, sopts, dopts)

				ctx := deadline.NewContext(t.Context(), deadline.New(5*time.Second))
				if c.ctx != nil {
					ctx = c.ctx(ctx, obs)
				}
				require.NoError(t, cc.Invoke(ctx, method, wrapperspb.String("x"), new(wrapperspb.StringValue)))
				// The SERVER spans end after the response: stop the server
				// (waiting for its handlers) before counting.
				stop()

				started, ended := rec.Started(), rec.Ended()
				require.Len(t, ended, len(started), "every span started is ended")
				var calls, internal, clients []sdktrace.ReadOnlySpan
				for _, s := range ended {
					switch {
					case s.SpanKind() == trace.SpanKindServer:
					case s.SpanKind() == trace.SpanKindClient:
						clients = append(clients, s)
					case s.Name() == "deadlinegrpc.test.Echo/Get":
						calls = append(calls, s)
					default:
						internal = append(internal, s)
					}
				}
				require.Len(t, calls, 1, "one call span")
				assert.Empty(t, internal, "no INTERNAL attempt span")
				require.Len(t, clients, 3, "one CLIENT span per physical attempt")
				for i, s := range clients {
					a := attrs(s)
					assert.Equal(t, int64(i+1), a[otelbudget.AttrAttemptNumber].AsInt64())
					assert.Equal(t, calls[0].SpanContext().SpanID(), s.Parent().SpanID())
					assert.NotContains(t, a, attribute.Key("http.request.resend_count"))
				}
				assert.Len(t, calls[0].Events(), 2, "one backoff event per retry")
				assert.Equal(t, int64(3), attrs(calls[0])[otelbudget.AttrAttempts].AsInt64())

				var rm metricdata.ResourceMetrics
				require.NoError(t, reader.Collect(context.Background(), &rm))
				counts := map[string]uint64{}
				for _, sm := range rm.ScopeMetrics {
					if sm.Scope.Name != otelbudget.ScopeName {
						continue
					}
					for _, m := range sm.Metrics {
						if h, ok := m.Data.(metricdata.Histogram[float64]); ok {
							for _, dp := range h.DataPoints {
								counts[m.Name] += dp.Count
							}
						}
					}
				}
				assert.Equal(t, uint64(1), counts[otelbudget.MetricCallDuration], "the call is counted once")
				assert.Equal(t, uint64(3), counts[otelbudget.MetricAttemptDuration], "each attempt is counted once")
			})
		}
	}
}

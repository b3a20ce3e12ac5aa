package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetgrpc"
)

// The transports the demo speaks to its providers (-transport).
const (
	transportHTTP = "http"
	transportGRPC = "grpc"
)

// grpcService is the providers' gRPC service: one unary method per step
// (Search, Fetch, Extract), a google.protobuf.StringValue in and out, built
// by hand (grpcDesc) rather than generated: the demo has no .proto file.
const grpcService = "tracedemo.Provider"

// idempotencyKeyMD is the metadata key that carries extract's idempotency
// key over gRPC, as the Idempotency-Key header does over HTTP.
const idempotencyKeyMD = "idempotency-key"

// grpcMethod returns the full gRPC method name of step: "/tracedemo.Provider/Fetch".
func grpcMethod(step string) string {
	return "/" + grpcService + "/" + strings.ToUpper(step[:1]) + step[1:]
}

// providerServer is the handler type of grpcDesc: a *provider.
type providerServer interface {
	serveGRPC(ctx context.Context) (string, error)
}

// grpcDesc describes the providers' service. Every provider registers all
// three methods; each is only ever called on its own step's provider.
var grpcDesc = func() grpc.ServiceDesc {
	desc := grpc.ServiceDesc{ServiceName: grpcService, HandlerType: (*providerServer)(nil)}
	for _, s := range agentPlan() {
		method := grpcMethod(s.name)
		desc.Methods = append(desc.Methods, grpc.MethodDesc{
			MethodName: method[strings.LastIndexByte(method, '/')+1:],
			Handler:    grpcHandler(method),
		})
	}
	return desc
}()

// grpcHandler returns the unary handler of method: it decodes the request
// and, through the server's interceptors, plays the provider's reply.
func grpcHandler(method string) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.StringValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, _ any) (any, error) {
			out, err := srv.(providerServer).serveGRPC(ctx)
			if err != nil {
				return nil, err
			}
			return wrapperspb.String(out), nil
		}
		if interceptor == nil {
			return h(ctx, in)
		}
		return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: method}, h)
	}
}

// serveGRPC plays the provider's reply to one RPC, as ServeHTTP does for a
// request. It runs inside the deadlinegrpc server interceptor, so ctx ends
// when the lease the client sent as grpc-timeout runs out (a hanging reply
// waits exactly that long, then fails with DEADLINE_EXCEEDED). The
// scenario's HTTP statuses map to gRPC codes (grpcCode), and a Retry-After
// of whole seconds to the grpc-retry-pushback-ms trailer.
func (p *provider) serveGRPC(ctx context.Context) (string, error) {
	var budget time.Duration
	if end, ok := ctx.Deadline(); ok {
		budget = time.Until(end)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	rep, n, err := p.play(ctx, seenRequest{
		Budget: budget, IdempotencyKey: first(md.Get(idempotencyKeyMD)),
		TraceParent: first(md.Get("traceparent")),
	})
	if err != nil {
		return "", status.FromContextError(err).Err()
	}
	if rep.failed() {
		if rep.retryAfter != "" {
			secs, err := strconv.Atoi(rep.retryAfter)
			if err != nil {
				return "", status.Errorf(codes.Internal, "the %s provider's script: Retry-After %q is not whole seconds", p.name, rep.retryAfter)
			}
			ms := strconv.FormatInt((time.Duration(secs) * time.Second).Milliseconds(), 10)
			_ = grpc.SetTrailer(ctx, metadata.Pairs(deadlinegrpc.PushbackTrailer, ms))
		}
		return "", status.Error(grpcCode(rep.status), http.StatusText(rep.status))
	}
	return p.answer(ctx, n), nil
}

// grpcCode maps a scenario's HTTP status to the gRPC code a gRPC provider
// answers with (the mapping of gRPC's own HTTP-to-gRPC table, for the
// statuses the scenarios use): 429 is RESOURCE_EXHAUSTED, 502, 503 and 504
// are UNAVAILABLE, anything else UNKNOWN.
func grpcCode(httpStatus int) codes.Code {
	switch httpStatus {
	case http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return codes.Unavailable
	}
	return codes.Unknown
}

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// grpcServerOptions returns the options a gRPC provider is served with, by
// otelbudgetgrpc's server composition: otelgrpc's server stats handler (its
// SERVER span joins the client's trace, by the W3C propagator, and carries
// the deadline.server.* attributes) and the budget interceptor, which clamps
// the inbound grpc-timeout to serverMaxBudget and puts the deadline in the
// handler's context. The providers' metrics are a no-op, as over HTTP.
func grpcServerOptions(name string, tp trace.TracerProvider) ([]grpc.ServerOption, error) {
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp), otelbudget.WithMeterProvider(metricnoop.NewMeterProvider()))
	opts, err := otelbudgetgrpc.ServerOptions(obs,
		[]deadlinegrpc.ServerOption{deadlinegrpc.WithMaxBudget(serverMaxBudget)},
		otelgrpc.WithPropagators(propagation.TraceContext{}))
	if err != nil {
		return nil, fmt.Errorf("the %s provider's budget interceptor: %w", name, err)
	}
	return opts, nil
}

// grpcTarget is how the client reaches one gRPC provider: the target of
// grpc.NewClient and the dial options it needs (an in-memory dialer in
// tests).
type grpcTarget struct {
	target string
	opts   []grpc.DialOption
}

// grpcProviders serves the providers of ps over gRPC, one grpc.Server per
// provider, each on the listener that listen returns for it.
type grpcProviders struct {
	servers []*grpc.Server
	wg      sync.WaitGroup // the Serve goroutines

	mu       sync.Mutex
	serveErr []error
}

// serveGRPC starts one gRPC server per provider of ps on the listener that
// listen opens for its step. Call the returned stop to stop them.
func (ps *providers) serveGRPC(tp trace.TracerProvider, listen func(step string) (net.Listener, error)) (*grpcProviders, error) {
	gs := &grpcProviders{}
	for _, s := range agentPlan() {
		opts, err := grpcServerOptions(s.name, tp)
		if err != nil {
			return gs, err
		}
		ln, err := listen(s.name)
		if err != nil {
			return gs, fmt.Errorf("listen for the %s provider: %w", s.name, err)
		}
		// Stop waits for the handlers still running (a hanging reply ends
		// with its lease), as http.Server.Shutdown does: their SERVER spans
		// have ended when the run reports.
		srv := grpc.NewServer(append(opts, grpc.WaitForHandlers(true))...)
		srv.RegisterService(&grpcDesc, ps.byStep[s.name])
		gs.servers = append(gs.servers, srv)
		gs.wg.Go(func() {
			if err := srv.Serve(ln); err != nil {
				gs.mu.Lock()
				gs.serveErr = append(gs.serveErr, fmt.Errorf("the %s provider stopped serving: %w", s.name, err))
				gs.mu.Unlock()
			}
		})
	}
	return gs, nil
}

// stop stops every server, waits for the handlers still running (Stop
// cancels them) and for Serve to return.
func (gs *grpcProviders) stop() error {
	for _, srv := range gs.servers {
		srv.Stop()
	}
	gs.wg.Wait()
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return errors.Join(gs.serveErr...)
}

// executeGRPC is execute over gRPC: it starts the providers of sc as gRPC
// servers on 127.0.0.1, plays the plan against them, and stops them.
func executeGRPC(ctx context.Context, sc scenario, seed uint64, budget time.Duration, tp trace.TracerProvider, mp metric.MeterProvider) (outcome, error) {
	ps := newProviders(sc)
	targets := map[string]grpcTarget{}
	gs, err := ps.serveGRPC(tp, func(step string) (net.Listener, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			targets[step] = grpcTarget{target: ln.Addr().String()}
		}
		return ln, err
	})
	if err != nil {
		return outcome{}, errors.Join(err, gs.stop())
	}
	rec, stepErr := playGRPC(ctx, sc, seed, budget, tp, mp, targets)
	out := outcome{rec: rec, ps: ps, stepErr: stepErr}
	if err := gs.stop(); err != nil {
		return out, fmt.Errorf("stopping the providers: %w", err)
	}
	return out, nil
}

// playGRPC is play over gRPC: each step is an RPC on the connection to its
// provider's target.
func playGRPC(ctx context.Context, sc scenario, seed uint64, budget time.Duration, tp trace.TracerProvider, mp metric.MeterProvider, targets map[string]grpcTarget) (runRecord, error) {
	return playOver(ctx, sc, seed, budget, tp, mp, playOptions{}, func(obs *otelbudget.Observer) (stepCaller, error) {
		return newGRPCCaller(obs, targets)
	})
}

// grpcCaller sends each step as a unary RPC on the connection to its
// provider. Every connection is built by otelbudgetgrpc.DialOptions with the
// run's observer: the budget interceptor runs each RPC under the policy its
// context carries (deadlinegrpc.WithRequestPolicy, set per step), and
// otelgrpc's CLIENT span per physical attempt is the attempt's span.
type grpcCaller struct {
	conns map[string]*grpc.ClientConn
}

// newGRPCCaller dials every target (grpc.NewClient connects lazily, on the
// first RPC). The three methods are declared safe to repeat: search and
// fetch only read, and extract carries an idempotency key in its metadata,
// as its HTTP POST carries an Idempotency-Key.
func newGRPCCaller(obs *otelbudget.Observer, targets map[string]grpcTarget) (*grpcCaller, error) {
	var methods []string
	for _, s := range agentPlan() {
		methods = append(methods, grpcMethod(s.name))
	}
	g := &grpcCaller{conns: map[string]*grpc.ClientConn{}}
	for _, s := range agentPlan() {
		t, ok := targets[s.name]
		if !ok {
			return nil, errors.Join(fmt.Errorf("no gRPC target for the %s provider", s.name), g.close())
		}
		opts, err := otelbudgetgrpc.DialOptions(obs,
			[]deadlinegrpc.ClientOption{deadlinegrpc.WithIdempotentMethods(methods...)},
			otelgrpc.WithPropagators(propagation.TraceContext{}))
		if err != nil {
			return nil, errors.Join(err, g.close())
		}
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
		cc, err := grpc.NewClient(t.target, append(opts, t.opts...)...)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("the %s provider's connection: %w", s.name, err), g.close())
		}
		g.conns[s.name] = cc
	}
	return g, nil
}

func (g *grpcCaller) withPolicy(ctx context.Context, p deadline.Policy) context.Context {
	return deadlinegrpc.WithRequestPolicy(ctx, p)
}

// call sends step s. extract's metadata carries the run's idempotency key.
// A failed RPC's error is the budget interceptor's: its status, and the
// *deadline.StopError through errors.As.
func (g *grpcCaller) call(ctx context.Context, s step, key string) error {
	if s.body != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, idempotencyKeyMD, key)
	}
	out := new(wrapperspb.StringValue)
	if err := g.conns[s.name].Invoke(ctx, grpcMethod(s.name), wrapperspb.String(s.body), out); err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	return nil
}

func (g *grpcCaller) close() error {
	var errs []error
	for _, cc := range g.conns {
		errs = append(errs, cc.Close())
	}
	return errors.Join(errs...)
}

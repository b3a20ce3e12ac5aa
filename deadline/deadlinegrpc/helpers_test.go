package deadlinegrpc_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
)

// The test service, built by hand: no protoc. Its descriptor lives in a
// registry of its own (testFiles), with idempotency levels on its methods.
const (
	service   = "deadlinegrpc.test.Echo"
	mGet      = "/" + service + "/Get"      // NO_SIDE_EFFECTS
	mPut      = "/" + service + "/Put"      // no idempotency_level
	mSet      = "/" + service + "/Set"      // IDEMPOTENT
	mWatch    = "/" + service + "/Watch"    // server streaming, NO_SIDE_EFFECTS
	mAppend   = "/" + service + "/Append"   // server streaming, no level
	mUpload   = "/" + service + "/Upload"   // client streaming, NO_SIDE_EFFECTS
	mUnlisted = "/" + service + "/Unlisted" // not in the descriptor
)

var testFiles = func() *protoregistry.Files {
	level := func(l descriptorpb.MethodOptions_IdempotencyLevel) *descriptorpb.MethodOptions {
		return &descriptorpb.MethodOptions{IdempotencyLevel: l.Enum()}
	}
	sv := ".google.protobuf.StringValue"
	m := func(name string, opts *descriptorpb.MethodOptions, client, server bool) *descriptorpb.MethodDescriptorProto {
		return &descriptorpb.MethodDescriptorProto{
			Name: proto.String(name), InputType: proto.String(sv), OutputType: proto.String(sv), Options: opts,
			ClientStreaming: proto.Bool(client), ServerStreaming: proto.Bool(server),
		}
	}
	fd := &descriptorpb.FileDescriptorProto{
		Name:       proto.String("deadlinegrpc/test/echo.proto"),
		Package:    proto.String("deadlinegrpc.test"),
		Dependency: []string{"google/protobuf/wrappers.proto"},
		Syntax:     proto.String("proto3"),
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Echo"),
			Method: []*descriptorpb.MethodDescriptorProto{
				m("Get", level(descriptorpb.MethodOptions_NO_SIDE_EFFECTS), false, false),
				m("Put", nil, false, false),
				m("Set", level(descriptorpb.MethodOptions_IDEMPOTENT), false, false),
				m("Watch", level(descriptorpb.MethodOptions_NO_SIDE_EFFECTS), false, true),
				m("Append", nil, false, true),
				m("Upload", level(descriptorpb.MethodOptions_NO_SIDE_EFFECTS), true, false),
			},
		}},
	}
	f, err := protodesc.NewFile(fd, protoregistry.GlobalFiles)
	if err != nil {
		panic(err)
	}
	files := new(protoregistry.Files)
	if err := files.RegisterFile(f); err != nil {
		panic(err)
	}
	return files
}()

// call is what the server saw of one RPC.
type call struct {
	method      string
	n           int           // 1 for the first call of the method
	hasDeadline bool          // the handler's context had a deadline
	remaining   time.Duration // what it had left when the handler started
}

// echo is the test server. handle answers unary calls and the first part
// of a stream; stream, when set, answers streams.
type echo struct {
	mu     sync.Mutex
	calls  []call
	counts map[string]int
	handle func(ctx context.Context, c call, in string) (string, error)
	stream func(ctx context.Context, c call, send func(string) error) error
}

func (e *echo) record(ctx context.Context, method string) call {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.counts == nil {
		e.counts = make(map[string]int)
	}
	e.counts[method]++
	c := call{method: method, n: e.counts[method]}
	if end, ok := ctx.Deadline(); ok {
		c.hasDeadline, c.remaining = true, time.Until(end)
	}
	e.calls = append(e.calls, c)
	return c
}

func (e *echo) count(method string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.counts[method]
}

func (e *echo) seen(method string) []call {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []call
	for _, c := range e.calls {
		if c.method == method {
			out = append(out, c)
		}
	}
	return out
}

func unaryHandler(method string) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.StringValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, req any) (any, error) {
			e := srv.(*echo)
			c := e.record(ctx, method)
			out := req.(*wrapperspb.StringValue).GetValue()
			if e.handle != nil {
				var err error
				if out, err = e.handle(ctx, c, out); err != nil {
					return nil, err
				}
			}
			return wrapperspb.String(out), nil
		}
		if interceptor == nil {
			return h(ctx, in)
		}
		return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: method}, h)
	}
}

func streamHandler(method string) grpc.StreamHandler {
	return func(srv any, ss grpc.ServerStream) error {
		e := srv.(*echo)
		in := new(wrapperspb.StringValue)
		if err := ss.RecvMsg(in); err != nil {
			return err
		}
		c := e.record(ss.Context(), method)
		if e.stream == nil {
			return ss.SendMsg(wrapperspb.String(in.GetValue()))
		}
		return e.stream(ss.Context(), c, func(s string) error { return ss.SendMsg(wrapperspb.String(s)) })
	}
}

type echoServer interface{}

var echoDesc = grpc.ServiceDesc{
	ServiceName: service,
	HandlerType: (*echoServer)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Get", Handler: unaryHandler(mGet)},
		{MethodName: "Put", Handler: unaryHandler(mPut)},
		{MethodName: "Set", Handler: unaryHandler(mSet)},
		{MethodName: "Unlisted", Handler: unaryHandler(mUnlisted)},
	},
	Streams: []grpc.StreamDesc{
		{StreamName: "Watch", Handler: streamHandler(mWatch), ServerStreams: true},
		{StreamName: "Append", Handler: streamHandler(mAppend), ServerStreams: true},
		{StreamName: "Upload", Handler: streamHandler(mUpload), ClientStreams: true},
	},
}

var (
	watchDesc  = &echoDesc.Streams[0]
	appendDesc = &echoDesc.Streams[1]
	uploadDesc = &echoDesc.Streams[2]
)

// env is a server and a connection to it.
type env struct {
	srv *echo
	cc  *grpc.ClientConn
}

// loopback and inMemory say where the server listens.
const (
	loopback = "loopback"
	inMemory = "bufconn"
)

// start serves e on the given transport with serverOpts and dials it with
// the client's dial options plus dialOpts. Everything is closed at the
// end of the test.
func start(t *testing.T, where string, e *echo, serverOpts []grpc.ServerOption, client *deadlinegrpc.Client, dialOpts ...grpc.DialOption) *env {
	t.Helper()
	v := startWith(t, where, func(s *grpc.Server) { s.RegisterService(&echoDesc, e) }, serverOpts, client, dialOpts...)
	v.srv = e
	return v
}

// startWith is start with the services register adds; the env's srv is nil.
func startWith(t *testing.T, where string, register func(*grpc.Server), serverOpts []grpc.ServerOption, client *deadlinegrpc.Client, dialOpts ...grpc.DialOption) *env {
	t.Helper()
	s := grpc.NewServer(serverOpts...)
	register(s)
	var lis net.Listener
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	target := "passthrough:///bufnet"
	switch where {
	case inMemory:
		bl := bufconn.Listen(1 << 20)
		lis = bl
		opts = append(opts, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return bl.DialContext(ctx)
		}))
	default:
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		lis, target = l, l.Addr().String()
	}
	go s.Serve(lis)
	if client != nil {
		opts = append(opts, client.DialOptions()...)
	}
	opts = append(opts, dialOpts...)
	cc, err := grpc.NewClient(target, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		cc.Close()
		s.Stop()
	})
	return &env{cc: cc}
}

func (v *env) get(ctx context.Context, method, in string) (string, error) {
	out := new(wrapperspb.StringValue)
	err := v.cc.Invoke(ctx, method, wrapperspb.String(in), out)
	return out.GetValue(), err
}

// newClient builds a Client for the test service's registry.
func newClient(t *testing.T, opts ...deadlinegrpc.ClientOption) *deadlinegrpc.Client {
	t.Helper()
	c, err := deadlinegrpc.NewClient(append([]deadlinegrpc.ClientOption{deadlinegrpc.WithProtoFiles(testFiles)}, opts...)...)
	require.NoError(t, err)
	return c
}

// logBuffer is a slog logger that records every level into a buffer.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func grpcInsecure() grpc.DialOption {
	return grpc.WithTransportCredentials(insecure.NewCredentials())
}

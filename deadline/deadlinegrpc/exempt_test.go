package deadlinegrpc_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
)

// A health Watch stream whose client set no deadline stays open past the
// server's maximum budget (and the client's default budget), through both
// sides' interceptors, and still delivers the next status; a user stream
// that is not exempt is still ended at the server's maximum, and so is one
// declared exempt when its caller set a deadline. A method the server
// declares exempt stays open too.
func TestSynctestLongLivedStreamsOutliveMaxBudget(t *testing.T) {
	for _, install := range []string{"DialOptions", "by hand"} {
		t.Run(install, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const max = 200 * time.Millisecond
				server, err := deadlinegrpc.NewServer(deadlinegrpc.WithMaxBudget(max), deadlinegrpc.WithExemptMethods(mAppend))
				require.NoError(t, err)
				hs := health.NewServer()
				e := &echo{stream: func(ctx context.Context, c call, send func(string) error) error {
					if err := send("first"); err != nil {
						return err
					}
					<-ctx.Done()
					return status.FromContextError(ctx.Err()).Err()
				}}
				c := newClient(t, deadlinegrpc.WithDefaultBudget(time.Second), deadlinegrpc.WithExemptMethods(mAppend))
				var clientOpts []grpc.DialOption
				if install == "by hand" {
					clientOpts = []grpc.DialOption{grpc.WithChainUnaryInterceptor(c.UnaryInterceptor()), grpc.WithChainStreamInterceptor(c.StreamInterceptor())}
					c = nil
				}
				v := startWith(t, inMemory, func(s *grpc.Server) {
					s.RegisterService(&echoDesc, e)
					healthpb.RegisterHealthServer(s, hs)
				}, server.ServerOptions(), c, clientOpts...)
				defer hs.Shutdown()

				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				watch, err := healthpb.NewHealthClient(v.cc).Watch(ctx, &healthpb.HealthCheckRequest{})
				require.NoError(t, err)
				got, err := watch.Recv()
				require.NoError(t, err)
				assert.Equal(t, healthpb.HealthCheckResponse_SERVING, got.GetStatus())

				// A user method that is not exempt, with no deadline either.
				watchCtx, cancelWatch := context.WithCancel(t.Context())
				defer cancelWatch()
				user, err := v.cc.NewStream(watchCtx, watchDesc, mWatch)
				require.NoError(t, err)
				require.NoError(t, user.SendMsg(wrapperspb.String("x")))
				require.NoError(t, user.CloseSend())
				// The server's own exempt method, with and without a deadline.
				open := func(ctx context.Context) grpc.ClientStream {
					s, err := v.cc.NewStream(ctx, appendDesc, mAppend)
					require.NoError(t, err)
					require.NoError(t, s.SendMsg(wrapperspb.String("x")))
					require.NoError(t, s.CloseSend())
					require.NoError(t, s.RecvMsg(new(wrapperspb.StringValue)))
					return s
				}
				sub := open(ctx)
				bounded := open(deadline.NewContext(ctx, deadline.New(10*max)))
				began := time.Now()

				time.Sleep(10 * max)
				synctest.Wait()

				err = user.RecvMsg(new(wrapperspb.StringValue))
				require.NoError(t, err, "the user stream's first message")
				err = user.RecvMsg(new(wrapperspb.StringValue))
				assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "a method that is not exempt is still clamped: %v", err)
				err = bounded.RecvMsg(new(wrapperspb.StringValue))
				assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "an exempt method called with a deadline is clamped too: %v", err)

				hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
				got, err = watch.Recv()
				require.NoError(t, err, "the Watch stream is still open after %v, past the %v maximum", time.Since(began), max)
				assert.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, got.GetStatus())

				cancel()
				_, err = watch.Recv()
				assert.Equal(t, codes.Canceled, status.Code(err))
				err = sub.RecvMsg(new(wrapperspb.StringValue))
				assert.Equal(t, codes.Canceled, status.Code(err), "the server's exempt method ran until its caller canceled: %v", err)
				assert.False(t, errors.Is(err, context.DeadlineExceeded))
			})
		})
	}
}

func TestNewServerRejectsInvalidExemptMethod(t *testing.T) {
	s, err := deadlinegrpc.NewServer(deadlinegrpc.WithExemptMethods("pkg.Svc/Watch"))
	assert.Nil(t, s)
	pe, ok := errors.AsType[*deadline.PolicyError](err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, "deadlinegrpc.WithExemptMethods", pe.Field)

	c, err := deadlinegrpc.NewClient(deadlinegrpc.WithExemptMethods("/pkg.Svc/"))
	assert.Nil(t, c)
	pe, ok = errors.AsType[*deadline.PolicyError](err)
	require.True(t, ok, "%v", err)
	assert.Equal(t, "deadlinegrpc.WithExemptMethods", pe.Field)
}

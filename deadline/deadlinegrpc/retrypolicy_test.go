package deadlinegrpc_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
)

// grpcRetryConfig gives Get (NO_SIDE_EFFECTS) and Put (no level) grpc-go's
// own retryPolicy of 3 attempts on UNAVAILABLE.
const grpcRetryConfig = `{"methodConfig":[{"name":[{"service":"` + service + `","method":"Get"},{"service":"` + service + `","method":"Put"}],
	"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.001s","maxBackoff":"0.002s","backoffMultiplier":1,"retryableStatusCodes":["UNAVAILABLE"]}}]}`

// With grpc-go's retryPolicy in the service config and the interceptors
// chained by hand (grpc-go's retry left on), the very first call of a
// method that is not safe to repeat reaches the server once, and one that
// is, at most the policy's MaxAttempts times: grpc-go never multiplies the
// client's attempts. Each method's retryPolicy is reported once.
func TestGRPCRetryPolicyNeverRepeats(t *testing.T) {
	for _, where := range []string{loopback, inMemory} {
		t.Run(where, func(t *testing.T) {
			logs := &logBuffer{}
			e := &echo{handle: unavailableUntil(1000)}
			c := newClient(t, deadlinegrpc.WithPolicy(fixedPolicy()), deadlinegrpc.WithLogger(logs.logger()))
			v := start(t, where, e, nil, nil,
				grpc.WithChainUnaryInterceptor(c.UnaryInterceptor()),
				grpc.WithChainStreamInterceptor(c.StreamInterceptor()),
				grpc.WithDefaultServiceConfig(grpcRetryConfig))

			_, err := v.get(budgetCtx(t, 5*time.Second), mPut, "x")
			assert.Equal(t, codes.Unavailable, status.Code(err))
			assert.Equal(t, 1, e.count(mPut), "a method not safe to repeat reaches the server once, on the first call")

			_, err = v.get(budgetCtx(t, 5*time.Second), mGet, "x")
			assert.Equal(t, codes.Unavailable, status.Code(err))
			assert.Equal(t, fixedPolicy().MaxAttempts, e.count(mGet), "the client's attempts only, not multiplied by grpc-go's")

			for range 3 {
				_, err = v.get(budgetCtx(t, 5*time.Second), mPut, "x")
				assert.Equal(t, codes.Unavailable, status.Code(err))
			}
			assert.Equal(t, 4, e.count(mPut), "and every later call once")

			stream, err := v.cc.NewStream(budgetCtx(t, 5*time.Second), appendDesc, mAppend)
			require.NoError(t, err)
			require.NoError(t, stream.SendMsg(wrapperspb.String("x")))
			require.NoError(t, stream.CloseSend())
			require.NoError(t, stream.RecvMsg(wrapperspb.String("")))

			out := logs.String()
			assert.Equal(t, 2, strings.Count(out, "level=WARN"), "one warning per method: %s", out)
			assert.Contains(t, out, "method="+mPut)
			assert.Contains(t, out, "method="+mGet)
		})
	}
}

// Installed by Client.DialOptions (grpc-go's retry disabled), the client
// neither reads the service config nor warns, and the methods are sent as
// the client decides.
func TestGRPCRetryPolicyWithDialOptions(t *testing.T) {
	logs := &logBuffer{}
	e := &echo{handle: unavailableUntil(1000)}
	c := newClient(t, deadlinegrpc.WithPolicy(fixedPolicy()), deadlinegrpc.WithLogger(logs.logger()))
	v := start(t, inMemory, e, nil, c, grpc.WithDefaultServiceConfig(grpcRetryConfig))
	_, err := v.get(budgetCtx(t, 5*time.Second), mPut, "x")
	assert.Equal(t, codes.Unavailable, status.Code(err))
	_, err = v.get(budgetCtx(t, 5*time.Second), mGet, "x")
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Equal(t, 1, e.count(mPut))
	assert.Equal(t, fixedPolicy().MaxAttempts, e.count(mGet))
	assert.NotContains(t, logs.String(), "level=WARN")
}

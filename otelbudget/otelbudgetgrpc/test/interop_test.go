package test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc/interoptest"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetgrpc"
)

// grpc-go's interop client cases run against interop.NewTestServer behind
// the otel server composition (ServerOptions), through a connection built
// by DialOptions: with and without a budget in the context, with no
// TestService method declared safe to repeat and with all of them. The
// same cases without the composition run in deadlinegrpc's interop tests,
// whose runner (interoptest.RunInterop) this test shares. A case reports a
// failure through grpclog's Fatal, which TestMain's logger
// (interoptest.Logger) turns into a panic.
func TestInteropWithOtel(t *testing.T) {
	for _, idempotent := range []bool{false, true} {
		for _, budget := range []bool{false, true} {
			t.Run(fmt.Sprintf("idempotent=%v/budget=%v", idempotent, budget), func(t *testing.T) {
				t.Parallel()
				rec := tracetest.NewSpanRecorder()
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
				defer tp.Shutdown(context.Background())
				obs := otelbudget.New(otelbudget.WithTracerProvider(tp))
				sopts, err := otelbudgetgrpc.ServerOptions(obs, nil)
				require.NoError(t, err)
				opts := []deadlinegrpc.ClientOption{deadlinegrpc.WithPolicy(deadline.DefaultPolicy())}
				if idempotent {
					opts = append(opts, deadlinegrpc.WithIdempotentMethods(interoptest.TestServiceMethods...))
				}
				dial, err := otelbudgetgrpc.DialOptions(obs, opts)
				require.NoError(t, err)
				ctx := t.Context()
				if budget {
					ctx = deadline.NewContext(ctx, deadline.New(time.Minute))
				}
				interoptest.RunInterop(t, ctx, sopts, dial, false)
				require.NotEmpty(t, rec.Ended(), "the calls were traced")
			})
		}
	}
}

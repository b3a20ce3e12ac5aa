package test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
)

// rpcSend stands for an RPC client instrumentation (otelgrpc's client
// stats handler): one CLIENT span per physical RPC, ended before the
// invoker returns.
func rpcSend(ctx context.Context, tracer trace.Tracer, took time.Duration, fail error) error {
	_, span := tracer.Start(ctx, "pkg.Svc/Get", trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	time.Sleep(took)
	if fail != nil {
		span.SetStatus(codes.Error, fail.Error())
	}
	return fail
}

// TestRPCClientSpanIsTheAttemptSpan: under ClientHooks, a span of
// RPCClientTracerProvider claims its attempt like an HTTP client's span,
// with every attempt attribute but http.request.resend_count.
func TestRPCClientSpanIsTheAttemptSpan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		tracer := h.obs.RPCClientTracerProvider().Tracer("rpc")
		p := deadline.Policy{Name: "get", MaxAttempts: 3, AttemptTimeout: 100 * time.Millisecond,
			Backoff: fixed(10 * time.Millisecond), Hooks: h.obs.ClientHooks()}
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
			if a.Number < 3 {
				return 0, rpcSend(ctx, tracer, 5*time.Millisecond, deadline.Retryable(errFlaky))
			}
			return 1, rpcSend(ctx, tracer, 5*time.Millisecond, nil)
		})
		require.NoError(t, err)
		h.requireAllEnded(t)

		call := h.spans("get")
		require.Len(t, call, 1)
		assert.Empty(t, h.spans("get attempt"), "no separate attempt span")
		rpcs := h.spans("pkg.Svc/Get")
		require.Len(t, rpcs, 3, "one span per physical RPC")
		for i, s := range rpcs {
			assert.Equal(t, call[0].SpanContext().SpanID(), s.Parent().SpanID(), "a child of the call span")
			assert.Equal(t, "rpc", s.InstrumentationScope().Name)
			assert.Equal(t, int64(i+1), intAttr(t, s, otelbudget.AttrAttemptNumber))
			assert.Equal(t, int64(100), intAttr(t, s, otelbudget.AttrAttemptGrantedMs))
			assert.False(t, hasAttr(s, semconv.HTTPRequestResendCountKey), "attempt %d: no HTTP attribute on an RPC span", i+1)
		}
		assert.Equal(t, "error", strAttr(t, rpcs[0], otelbudget.AttrAttemptEndedBy))
		assert.Equal(t, int64(10), intAttr(t, rpcs[0], otelbudget.AttrBackoffDelayMs))
		assert.Equal(t, codes.Error, rpcs[0].Status().Code)
		assert.Equal(t, "completed", strAttr(t, rpcs[2], otelbudget.AttrAttemptEndedBy))
	})
}

// TestRPCAndHTTPClientsShareOneObserver: both providers of one observer,
// each claiming the attempts of its own calls, and within one call the
// provider whose span claims an attempt decides.
func TestRPCAndHTTPClientsShareOneObserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		httpTracer := h.obs.ClientTracerProvider().Tracer("http")
		rpcTracer := h.obs.RPCClientTracerProvider().Tracer("rpc")
		p := deadline.Policy{Name: "mixed", MaxAttempts: 4, Backoff: fixed(time.Millisecond), Hooks: h.obs.ClientHooks()}
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
			tracer := rpcTracer
			if a.Number%2 == 0 {
				tracer = httpTracer
			}
			if a.Number < 4 {
				return 0, rpcSend(ctx, tracer, time.Millisecond, deadline.Retryable(errFlaky))
			}
			return 1, rpcSend(ctx, tracer, time.Millisecond, nil)
		})
		require.NoError(t, err)
		h.requireAllEnded(t)
		spans := h.spans("pkg.Svc/Get")
		require.Len(t, spans, 4)
		for i, s := range spans {
			n := int64(i + 1)
			require.Equal(t, n, intAttr(t, s, otelbudget.AttrAttemptNumber))
			if n%2 == 0 {
				assert.Equal(t, "http", s.InstrumentationScope().Name)
				assert.Equal(t, n-1, intAttr(t, s, semconv.HTTPRequestResendCountKey))
			} else {
				assert.Equal(t, "rpc", s.InstrumentationScope().Name)
				assert.False(t, hasAttr(s, semconv.HTTPRequestResendCountKey))
			}
		}
	})
}

// TestRPCClientAttachedTwiceIsHarmless: an RPC client composition attaches
// ClientHooks and gives the RPC instrumentation RPCClientTracerProvider;
// the same observer's Hooks or ClientHooks attached again on the policy or
// the context record the call once: one call span, the RPC spans as the
// attempt spans (no INTERNAL attempt span), one backoff event, metrics
// counted once.
func TestRPCClientAttachedTwiceIsHarmless(t *testing.T) {
	again := []attachment{noHooks, ownHooks, clientHooks, twiceHooks, mixedHooks}
	for _, onPolicy := range again {
		for _, onContext := range again {
			t.Run(fmt.Sprintf("policy=%s/context=%s", onPolicy.name, onContext.name), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					h := newHarness(t)
					tracer := h.obs.RPCClientTracerProvider().Tracer("rpc")
					// What the client composition attaches, after the user's own.
					hooks := deadline.Compose(onPolicy.hooks(h.obs), h.obs.ClientHooks())
					p := deadline.Policy{Name: "get", MaxAttempts: 3, Backoff: fixed(10 * time.Millisecond), Hooks: hooks}
					ctx := deadline.WithHooks(context.Background(), onContext.hooks(h.obs))
					_, err := deadline.Do(ctx, deadline.New(time.Second), p, func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
						if a.Number == 1 {
							return 0, rpcSend(ctx, tracer, time.Millisecond, deadline.Retryable(errFlaky))
						}
						return 1, rpcSend(ctx, tracer, time.Millisecond, nil)
					})
					require.NoError(t, err)
					h.requireAllEnded(t)

					calls := h.spans("get")
					require.Len(t, calls, 1, "one call span")
					assert.Empty(t, h.spans("get attempt"), "no INTERNAL attempt span")
					rpcs := h.spans("pkg.Svc/Get")
					require.Len(t, rpcs, 2, "one span per physical RPC")
					for i, s := range rpcs {
						assert.Equal(t, int64(i+1), intAttr(t, s, otelbudget.AttrAttemptNumber))
						assert.Equal(t, calls[0].SpanContext().SpanID(), s.Parent().SpanID())
						assert.False(t, hasAttr(s, semconv.HTTPRequestResendCountKey))
					}
					require.Len(t, calls[0].Events(), 1, "one backoff event")
					assert.Equal(t, int64(2), intAttr(t, calls[0], otelbudget.AttrAttempts))

					h.assertCountedOnce(t, 2)
				})
			})
		}
	}
}

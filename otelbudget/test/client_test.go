package test

import (
	"context"
	"errors"
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

// fakeClient stands for a client instrumentation (otelhttp): it starts a
// CLIENT span per physical request with a tracer of the given provider and
// ends it either before returning (an error) or later, when the caller is
// done with the result (a response body being closed).
type fakeClient struct {
	tracer trace.Tracer
	later  []trace.Span // spans to end when the "body" is closed
}

func (c *fakeClient) send(ctx context.Context, took time.Duration, fail error) error {
	_, span := c.tracer.Start(ctx, "HTTP GET", trace.WithSpanKind(trace.SpanKindClient))
	if _, err := sleepOp(took, "")(ctx, deadline.AttemptInfo{}); err != nil {
		span.SetStatus(codes.Error, err.Error())
		span.End()
		return err
	}
	if fail != nil {
		span.SetStatus(codes.Error, "503")
		span.End() // the drained response: ended before the engine's AttemptEnd
		return fail
	}
	c.later = append(c.later, span)
	return nil
}

func (c *fakeClient) closeBodies() {
	for _, s := range c.later {
		s.End()
	}
	c.later = nil
}

func TestClientSpanIsTheAttemptSpan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		c := &fakeClient{tracer: h.obs.ClientTracerProvider().Tracer("client")}
		p := deadline.Policy{Name: "fetch", MaxAttempts: 3, AttemptTimeout: 100 * time.Millisecond, Floor: 20 * time.Millisecond,
			Backoff: fixed(30 * time.Millisecond), Hooks: h.obs.ClientHooks()}
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
			if a.Number == 1 {
				return 0, c.send(ctx, 5*time.Millisecond, deadline.Retryable(errFlaky))
			}
			return 1, c.send(ctx, 7*time.Millisecond, nil)
		})
		require.NoError(t, err)
		// The call is over but the "response body" is open: the second
		// span waits for it, with its outcome already set.
		require.Len(t, h.rec.Ended(), 2, "call span and the first client span")
		time.Sleep(40 * time.Millisecond)
		c.closeBodies()
		h.requireAllEnded(t)

		require.Len(t, h.rec.Ended(), 3, "one span per physical request plus the call span")
		call := h.spans("fetch")[0]
		reqs := h.spans("HTTP GET")
		require.Len(t, reqs, 2)
		assert.Empty(t, h.spans("fetch attempt"), "no separate attempt span")
		for i, s := range reqs {
			n := int64(i + 1)
			assert.Equal(t, trace.SpanKindClient, s.SpanKind())
			assert.Equal(t, call.SpanContext().SpanID(), s.Parent().SpanID(), "a child of the call span")
			assert.Equal(t, "client", s.InstrumentationScope().Name, "the client's own span")
			assert.Equal(t, n, intAttr(t, s, otelbudget.AttrAttemptNumber))
			assert.Equal(t, int64(100), intAttr(t, s, otelbudget.AttrAttemptGrantedMs))
			assert.Equal(t, "ceiling", strAttr(t, s, otelbudget.AttrAttemptLimitedBy))
			assert.Equal(t, "fetch", strAttr(t, s, otelbudget.AttrStep))
		}
		assert.False(t, hasAttr(reqs[0], semconv.HTTPRequestResendCountKey))
		assert.Equal(t, int64(1), intAttr(t, reqs[1], semconv.HTTPRequestResendCountKey))
		assert.Equal(t, "error", strAttr(t, reqs[0], otelbudget.AttrAttemptEndedBy))
		assert.Equal(t, "policy", strAttr(t, reqs[0], otelbudget.AttrBackoffSource), "the backoff lands on the failed request")
		assert.Equal(t, codes.Error, reqs[0].Status().Code)
		assert.Equal(t, "completed", strAttr(t, reqs[1], otelbudget.AttrAttemptEndedBy))
		assert.Equal(t, codes.Unset, reqs[1].Status().Code)
		// End timestamps are the client's: 5ms, and 7ms + 40ms reading the body.
		assert.Equal(t, 5*time.Millisecond, reqs[0].EndTime().Sub(reqs[0].StartTime()))
		assert.Equal(t, 47*time.Millisecond, reqs[1].EndTime().Sub(reqs[1].StartTime()))
	})
}

func TestClientCanceledIsNotAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		c := &fakeClient{tracer: h.obs.ClientTracerProvider().Tracer("client")}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(10*time.Millisecond, cancel)
		p := deadline.Policy{Name: "fetch", MaxAttempts: 3, Hooks: h.obs.ClientHooks()}
		_, err := deadline.Do(ctx, deadline.New(time.Second), p, func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
			return 0, c.send(ctx, time.Second, nil)
		})
		require.ErrorIs(t, err, context.Canceled)
		h.requireAllEnded(t)
		req := h.spans("HTTP GET")
		require.Len(t, req, 1)
		assert.Equal(t, "canceled", strAttr(t, req[0], otelbudget.AttrAttemptEndedBy))
		assert.Equal(t, codes.Unset, req[0].Status().Code, "the client's Error is dropped for a caller's cancellation")
		assert.Equal(t, codes.Unset, h.spans("fetch")[0].Status().Code)
	})
}

// TestClientUnclaimedAttempt: an attempt that sends nothing still gets a
// span, and spans outside attempts pass through.
func TestClientUnclaimedAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		tracer := h.obs.ClientTracerProvider().Tracer("client")
		_, outside := tracer.Start(context.Background(), "outside")
		outside.End()
		p := deadline.Policy{Name: "fetch", MaxAttempts: 2, Hooks: h.obs.ClientHooks()}
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
			if a.Number == 1 {
				time.Sleep(3 * time.Millisecond)
				return 0, deadline.Retryable(errors.New("GetBody failed"))
			}
			// Two spans in one attempt: only the first is the attempt.
			_, s1 := tracer.Start(ctx, "first")
			_, s2 := tracer.Start(ctx, "second")
			s2.End()
			s1.End()
			return 1, nil
		})
		require.NoError(t, err)
		h.requireAllEnded(t)
		fallback := h.spans("fetch attempt")
		require.Len(t, fallback, 1)
		assert.Equal(t, trace.SpanKindInternal, fallback[0].SpanKind())
		assert.Equal(t, otelbudget.ScopeName, fallback[0].InstrumentationScope().Name)
		assert.Equal(t, 3*time.Millisecond, fallback[0].EndTime().Sub(fallback[0].StartTime()))
		assert.Equal(t, "error", strAttr(t, fallback[0], otelbudget.AttrAttemptEndedBy))
		assert.Equal(t, codes.Error, fallback[0].Status().Code)
		assert.Equal(t, int64(2), intAttr(t, h.spans("first")[0], otelbudget.AttrAttemptNumber))
		assert.False(t, hasAttr(h.spans("second")[0], otelbudget.AttrAttemptNumber))
		assert.False(t, hasAttr(h.spans("outside")[0], otelbudget.AttrAttemptNumber))
	})
}

// TestClientPanic: a panic inside the client's request ends its span.
func TestClientPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		tracer := h.obs.ClientTracerProvider().Tracer("client")
		p := deadline.Policy{Name: "fetch", MaxAttempts: 2, Hooks: h.obs.ClientHooks()}
		require.Panics(t, func() {
			_, _ = deadline.Do(context.Background(), deadline.New(time.Second), p, func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
				_, span := tracer.Start(ctx, "HTTP GET")
				_ = span // never ended by the client: the panic skips it
				panic("in the transport")
			})
		})
		h.requireAllEnded(t)
		req := h.spans("HTTP GET")
		require.Len(t, req, 1)
		assert.Equal(t, "panic", strAttr(t, req[0], otelbudget.AttrAttemptEndedBy))
	})
}

func TestClientSpanDelegates(t *testing.T) {
	h := newHarness(t)
	tp := h.obs.ClientTracerProvider()
	p := deadline.Policy{Name: "fetch", MaxAttempts: 1, Hooks: h.obs.ClientHooks()}
	_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
		ctx, span := tp.Tracer("client").Start(ctx, "HTTP GET")
		assert.Same(t, span, trace.SpanFromContext(ctx), "the context carries the wrapped span")
		assert.True(t, span.IsRecording())
		assert.True(t, span.SpanContext().IsValid())
		assert.Same(t, h.tp, span.TracerProvider(), "every method but End and SetStatus is the real span's")
		span.SetName("HTTP GET renamed")
		span.SetAttributes(semconv.HTTPResponseStatusCode(200))
		span.AddEvent("e")
		span.AddLink(trace.Link{})
		span.RecordError(errors.New("noted"))
		span.SetStatus(codes.Ok, "")
		span.End()
		span.End() // a second End is harmless
		return 1, nil
	})
	require.NoError(t, err)
	h.requireAllEnded(t)
	s := h.spans("HTTP GET renamed")
	require.Len(t, s, 1)
	assert.Equal(t, int64(200), intAttr(t, s[0], semconv.HTTPResponseStatusCodeKey))
	assert.Len(t, s[0].Events(), 2)
	assert.Equal(t, codes.Ok, s[0].Status().Code)
	assert.Same(t, h.tp, h.obs.TracerProvider())
	assert.NotNil(t, h.obs.MeterProvider())
}

package test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
)

// attachment is one way to hand the observer's hooks to a call.
type attachment struct {
	name  string
	hooks func(*otelbudget.Observer) *deadline.Hooks
}

var (
	noHooks     = attachment{"-", func(*otelbudget.Observer) *deadline.Hooks { return nil }}
	ownHooks    = attachment{"Hooks", (*otelbudget.Observer).Hooks}
	clientHooks = attachment{"ClientHooks", (*otelbudget.Observer).ClientHooks}
	twiceHooks  = attachment{"Hooks+Hooks", func(o *otelbudget.Observer) *deadline.Hooks { return deadline.Compose(o.Hooks(), o.Hooks()) }}
	mixedHooks  = attachment{"Hooks+ClientHooks", func(o *otelbudget.Observer) *deadline.Hooks {
		return deadline.Compose(o.Hooks(), o.ClientHooks())
	}}
)

// TestAttachedTwiceIsHarmless attaches the same observer to one call
// through the policy and the context, in every combination of Hooks and
// ClientHooks, and checks that the call is recorded once: one call span,
// one span per attempt, one backoff event, and metrics counted once.
func TestAttachedTwiceIsHarmless(t *testing.T) {
	all := []attachment{noHooks, ownHooks, clientHooks, twiceHooks, mixedHooks}
	for _, onPolicy := range all {
		for _, onContext := range all {
			if onPolicy.name == noHooks.name && onContext.name == noHooks.name {
				continue
			}
			t.Run(fmt.Sprintf("policy=%s/context=%s", onPolicy.name, onContext.name), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					h := newHarness(t)
					p := deadline.Policy{Name: "twice", MaxAttempts: 3, Backoff: fixed(10 * time.Millisecond), Hooks: onPolicy.hooks(h.obs)}
					ctx := deadline.WithHooks(context.Background(), onContext.hooks(h.obs))
					tracer := h.tp.Tracer("op")
					_, err := deadline.Do(ctx, deadline.New(time.Second), p, func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
						_, span := tracer.Start(ctx, "op")
						span.End()
						time.Sleep(time.Millisecond)
						if a.Number == 1 {
							return 0, deadline.Retryable(errFlaky)
						}
						return 1, nil
					})
					require.NoError(t, err)
					h.requireAllEnded(t)

					calls := h.spans("twice")
					require.Len(t, calls, 1, "one call span")
					attempts := h.spans("twice attempt")
					require.Len(t, attempts, 2, "one span per attempt")
					for i, a := range attempts {
						assert.Equal(t, int64(i+1), intAttr(t, a, otelbudget.AttrAttemptNumber))
						assert.Equal(t, calls[0].SpanContext().SpanID(), a.Parent().SpanID())
					}
					assert.Equal(t, "error", strAttr(t, attempts[0], otelbudget.AttrAttemptEndedBy))
					assert.Equal(t, "policy", strAttr(t, attempts[0], otelbudget.AttrBackoffSource))
					require.Len(t, calls[0].Events(), 1, "one backoff event")
					assert.Equal(t, int64(2), intAttr(t, calls[0], otelbudget.AttrAttempts))
					assert.Len(t, h.spans("op"), 2)

					h.assertCountedOnce(t, 2)
				})
			})
		}
	}
}

// TestAttachedTwiceParentsTheOperation: with Hooks attached twice the
// operation still runs in its attempt's span.
func TestAttachedTwiceParentsTheOperation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		p := deadline.Policy{Name: "twice", MaxAttempts: 1, Hooks: h.obs.Hooks()}
		ctx := deadline.WithHooks(context.Background(), h.obs.Hooks())
		var parent trace.SpanContext
		_, err := deadline.Do(ctx, deadline.New(time.Second), p, func(ctx context.Context, _ deadline.AttemptInfo) (int, error) {
			parent = trace.SpanContextFromContext(ctx)
			return 1, nil
		})
		require.NoError(t, err)
		attempts := h.spans("twice attempt")
		require.Len(t, attempts, 1)
		assert.Equal(t, attempts[0].SpanContext(), parent)
	})
}

// TestNestedCallKeepsItsSpans: a Do inside another Do's operation, with
// the same observer attached (once or twice) at both levels, gets its own
// call and attempt spans, children of the outer attempt, although in a
// synctest bubble both calls start at the same instant.
func TestNestedCallKeepsItsSpans(t *testing.T) {
	for _, at := range []attachment{ownHooks, twiceHooks, clientHooks, mixedHooks} {
		t.Run(at.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t)
				ctx := deadline.WithHooks(context.Background(), at.hooks(h.obs))
				d := deadline.New(time.Second)
				outer := deadline.Policy{Name: "outer", MaxAttempts: 1, Hooks: at.hooks(h.obs)}
				inner := deadline.Policy{Name: "outer", MaxAttempts: 2, Hooks: at.hooks(h.obs)} // the same name on purpose
				_, err := deadline.Do(ctx, d, outer, func(ctx context.Context, _ deadline.AttemptInfo) (int, error) {
					return deadline.Do(ctx, d, inner, func(_ context.Context, a deadline.AttemptInfo) (int, error) {
						if a.Number == 1 {
							return 0, deadline.Retryable(errors.New("flaky"))
						}
						return 1, nil
					})
				})
				require.NoError(t, err)
				h.requireAllEnded(t)

				calls := h.spans("outer")
				require.Len(t, calls, 2, "the inner call and the outer call")
				innerCall, outerCall := calls[0], calls[1]
				assert.Equal(t, int64(2), intAttr(t, innerCall, otelbudget.AttrAttempts))
				assert.Equal(t, int64(1), intAttr(t, outerCall, otelbudget.AttrAttempts))
				attempts := h.spans("outer attempt")
				require.Len(t, attempts, 3, "two inner attempts, one outer")
				byParent := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
				for _, a := range attempts {
					byParent[a.Parent().SpanID()] = append(byParent[a.Parent().SpanID()], a)
				}
				assert.Len(t, byParent[innerCall.SpanContext().SpanID()], 2)
				require.Len(t, byParent[outerCall.SpanContext().SpanID()], 1)
				if at.name == ownHooks.name || at.name == twiceHooks.name {
					outerAttempt := byParent[outerCall.SpanContext().SpanID()][0]
					assert.Equal(t, outerAttempt.SpanContext().SpanID(), innerCall.Parent().SpanID(), "the inner call is a child of the outer attempt")
				}
			})
		})
	}
}

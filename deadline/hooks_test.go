package deadline_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type ctxKey string

func TestHooksOrderAndContexts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events []string
		seen := func(ctx context.Context, what string) {
			call, _ := ctx.Value(ctxKey("call")).(string)
			att, _ := ctx.Value(ctxKey("attempt")).(string)
			events = append(events, what+" ["+call+","+att+"]")
		}
		h := &deadline.Hooks{
			CallStart: func(ctx context.Context, c deadline.CallInfo) context.Context {
				seen(ctx, "CallStart")
				return context.WithValue(ctx, ctxKey("call"), "c")
			},
			AttemptStart: func(ctx context.Context, a deadline.AttemptInfo) context.Context {
				seen(ctx, "AttemptStart "+itoa(a.Number))
				return context.WithValue(ctx, ctxKey("attempt"), itoa(a.Number))
			},
			AttemptEnd: func(ctx context.Context, a deadline.AttemptInfo, r deadline.AttemptResult) {
				seen(ctx, "AttemptEnd "+itoa(a.Number)+" "+r.EndedBy.String())
			},
			Backoff: func(ctx context.Context, b deadline.BackoffInfo) { seen(ctx, "Backoff "+itoa(b.Attempt)) },
			CallEnd: func(ctx context.Context, r deadline.CallResult) { seen(ctx, "CallEnd "+r.Reason.String()) },
		}
		p := policy(3, 0, 0)
		p.Hooks = h
		v, err := deadline.Do(context.Background(), deadline.New(time.Second), p,
			func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
				seen(ctx, "op "+itoa(a.Number))
				if a.Number == 1 {
					return 0, deadline.Retryable(errFlaky)
				}
				return 5, nil
			})
		require.NoError(t, err)
		assert.Equal(t, 5, v)
		assert.Equal(t, []string{
			"CallStart [,]",
			"AttemptStart 1 [c,]",
			"op 1 [c,1]",
			"AttemptEnd 1 error [c,1]",
			"Backoff 1 [c,]",
			"AttemptStart 2 [c,]",
			"op 2 [c,2]",
			"AttemptEnd 2 completed [c,2]",
			"CallEnd success [c,]",
		}, events)
	})
}

func TestHooksCallInfoAndResults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Ceiling 400ms, 1s budget, 20ms floor: two attempts run their full
		// ceiling, the third is cut to 180ms by the deadline.
		var rec recorder
		p := policy(3, 400*time.Millisecond, 20*time.Millisecond)
		p.Name = "fetch"
		p.Hooks = rec.hooks("")
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, hang)
		require.Error(t, err)
		require.Len(t, rec.starts, 1)
		assert.Equal(t, deadline.CallInfo{
			Name: "fetch", Start: rec.starts[0].Start, Budget: time.Second, Remaining: time.Second,
			MaxAttempts: 3, Ceiling: 400 * time.Millisecond, Floor: 20 * time.Millisecond,
		}, rec.starts[0])
		require.Len(t, rec.calls, 1)
		c := rec.calls[0]
		assert.Equal(t, "fetch", c.Name)
		assert.Equal(t, deadline.ReasonDeadline, c.Reason)
		assert.Equal(t, 3, c.Attempts)
		assert.Equal(t, 2, c.CeilingTimeouts)
		assert.Equal(t, 1, c.DeadlineCuts)
		assert.Equal(t, 20*time.Millisecond, c.Remaining)
		assert.Equal(t, 980*time.Millisecond, c.Duration)
		assert.Same(t, err, c.Err, "CallEnd sees what Do returns")

		require.Len(t, rec.ends, 3)
		for i, want := range []deadline.EndedBy{deadline.EndedAttemptTimeout, deadline.EndedAttemptTimeout, deadline.EndedDeadline} {
			assert.Equal(t, want, rec.ends[i].EndedBy, "attempt %d", i+1)
		}
		assert.Equal(t, 400*time.Millisecond, rec.ends[0].Duration)
		assert.True(t, rec.ends[0].Retryable)
		assert.IsType(t, &deadline.AttemptTimeoutError{}, rec.ends[0].Err)
		assert.Equal(t, 180*time.Millisecond, rec.ends[2].Duration)
		assert.False(t, rec.ends[2].Retryable)

		require.Len(t, rec.backoff, 2)
		assert.Equal(t, deadline.BackoffInfo{
			Name: "fetch", Attempt: 1, Delay: 0, Source: deadline.SourcePolicy, Remaining: 600 * time.Millisecond, Fits: true,
		}, rec.backoff[0])
	})
}

func TestHooksBackoffInfo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		p := policy(3, 0, 20*time.Millisecond)
		p.Backoff = deadline.Backoff{Base: 50 * time.Millisecond, Max: 400 * time.Millisecond}
		p.Rand = maxRand
		p.Hooks = rec.hooks("")
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, script(new(attemptLog),
			fail(deadline.Retryable(errFlaky)),
			fail(deadline.Retryable(deadline.RetryAfter(err503, 2*time.Second)))))
		assert.Equal(t, deadline.ReasonRetryAfterTooLong, stopErr(err).Reason)
		require.Len(t, rec.backoff, 2)
		assert.Equal(t, deadline.BackoffInfo{
			Name: "step", Attempt: 1, Delay: 50 * time.Millisecond, Source: deadline.SourcePolicy,
			Remaining: time.Second, Fits: true,
		}, rec.backoff[0])
		assert.Equal(t, deadline.BackoffInfo{
			Name: "step", Attempt: 2, Delay: 2 * time.Second, Source: deadline.SourceRetryAfter, RetryAfter: 2 * time.Second,
			Remaining: 950 * time.Millisecond, Fits: false,
		}, rec.backoff[1])
		assert.Equal(t, "CallEnd retry_after_exceeds_budget", rec.events[len(rec.events)-1])
	})
}

func TestCompose(t *testing.T) {
	assert.Nil(t, deadline.Compose())
	assert.Nil(t, deadline.Compose(nil, nil))
	var a recorder
	ha := a.hooks("a.")
	assert.Same(t, ha, deadline.Compose(nil, ha, nil), "one hook set is returned as it is")

	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		var bCtx, cCtx []string
		look := func(ctx context.Context) string { s, _ := ctx.Value(ctxKey("from")).(string); return s }
		hb := &deadline.Hooks{
			CallStart: func(ctx context.Context, _ deadline.CallInfo) context.Context {
				rec.add("b.CallStart")
				return context.WithValue(ctx, ctxKey("from"), "b")
			},
			AttemptStart: func(ctx context.Context, _ deadline.AttemptInfo) context.Context {
				rec.add("b.AttemptStart")
				return context.WithValue(ctx, ctxKey("from"), "b-attempt")
			},
			AttemptEnd: func(context.Context, deadline.AttemptInfo, deadline.AttemptResult) { rec.add("b.AttemptEnd") },
			CallEnd:    func(context.Context, deadline.CallResult) { rec.add("b.CallEnd") },
		}
		hc := &deadline.Hooks{ // only some fields set
			CallStart: func(ctx context.Context, _ deadline.CallInfo) context.Context {
				rec.add("c.CallStart")
				cCtx = append(cCtx, look(ctx))
				return nil // unchanged
			},
			AttemptStart: func(ctx context.Context, _ deadline.AttemptInfo) context.Context {
				rec.add("c.AttemptStart")
				cCtx = append(cCtx, look(ctx))
				return nil
			},
			CallEnd: func(ctx context.Context, _ deadline.CallResult) {
				rec.add("c.CallEnd")
				cCtx = append(cCtx, look(ctx))
			},
		}
		p := policy(1, 0, 0)
		p.Hooks = deadline.Compose(hb, nil, hc)
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p,
			func(ctx context.Context, _ deadline.AttemptInfo) (int, error) {
				bCtx = append(bCtx, look(ctx))
				return 1, nil
			})
		require.NoError(t, err)
		assert.Equal(t, []string{
			"b.CallStart", "c.CallStart", "b.AttemptStart", "c.AttemptStart",
			"b.AttemptEnd", // c has none; ends run in reverse order
			"c.CallEnd", "b.CallEnd",
		}, rec.events)
		assert.Equal(t, []string{"b", "b-attempt", "b"}, cCtx, "contexts are threaded from one hook set to the next")
		assert.Equal(t, []string{"b-attempt"}, bCtx, "op runs in the composed attempt context")
	})
}

func TestWithHooks(t *testing.T) {
	bg := context.Background()
	assert.Nil(t, deadline.ContextHooks(bg))
	assert.Equal(t, bg, deadline.WithHooks(bg, nil), "nil hooks leave ctx unchanged")

	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		ctx := deadline.WithHooks(bg, rec.hooks("ctx1."))
		ctx = deadline.WithHooks(ctx, rec.hooks("ctx2."))
		require.NotNil(t, deadline.ContextHooks(ctx))
		p := policy(1, 0, 0)
		p.Hooks = rec.hooks("policy.")
		_, err := deadline.Do(ctx, deadline.New(time.Second), p, ok)
		require.NoError(t, err)
		assert.Equal(t, []string{
			"ctx1.CallStart", "ctx2.CallStart", "policy.CallStart",
			"ctx1.AttemptStart 1", "ctx2.AttemptStart 1", "policy.AttemptStart 1",
			"policy.AttemptEnd 1 completed", "ctx2.AttemptEnd 1 completed", "ctx1.AttemptEnd 1 completed",
			"policy.CallEnd success", "ctx2.CallEnd success", "ctx1.CallEnd success",
		}, rec.events)
	})
}

func TestHookNames(t *testing.T) {
	assert.Equal(t, "ceiling", deadline.LimitCeiling.String())
	assert.Equal(t, "deadline", deadline.LimitDeadline.String())
	assert.Equal(t, "none", deadline.Limit(0).String())
	for e, s := range map[deadline.EndedBy]string{
		deadline.EndedCompleted: "completed", deadline.EndedError: "error", deadline.EndedAttemptTimeout: "attempt_timeout",
		deadline.EndedDeadline: "deadline", deadline.EndedCanceled: "canceled", deadline.EndedPanic: "panic", 0: "unknown", 99: "unknown",
	} {
		assert.Equal(t, s, e.String())
	}
	assert.Equal(t, "policy", deadline.SourcePolicy.String())
	assert.Equal(t, "retry_after", deadline.SourceRetryAfter.String())
	assert.Equal(t, "none", deadline.BackoffSource(0).String())
}

package deadline_test

import (
	"context"
	"testing"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// panicAt returns rec's hooks (events tagged tag), with the hook named at
// panicking with val after it recorded its event.
func panicAt(rec *recorder, tag, at string, val any) *deadline.Hooks {
	h := rec.hooks(tag)
	switch at {
	case "CallStart":
		f := h.CallStart
		h.CallStart = func(ctx context.Context, c deadline.CallInfo) context.Context { f(ctx, c); panic(val) }
	case "AttemptStart":
		f := h.AttemptStart
		h.AttemptStart = func(ctx context.Context, a deadline.AttemptInfo) context.Context { f(ctx, a); panic(val) }
	case "AttemptEnd":
		f := h.AttemptEnd
		h.AttemptEnd = func(ctx context.Context, a deadline.AttemptInfo, r deadline.AttemptResult) { f(ctx, a, r); panic(val) }
	case "Backoff":
		f := h.Backoff
		h.Backoff = func(ctx context.Context, b deadline.BackoffInfo) { f(ctx, b); panic(val) }
	case "CallEnd":
		f := h.CallEnd
		h.CallEnd = func(ctx context.Context, r deadline.CallResult) { f(ctx, r); panic(val) }
	}
	return h
}

// A panic in any hook or in op goes on unchanged, after every attempt
// context is released and every hook that began is closed. Two observers
// are composed (a, then b); the panic is in the one named.
func TestDoPanicInHooks(t *testing.T) {
	begin := []string{"a.CallStart", "b.CallStart", "a.AttemptStart 1", "b.AttemptStart 1"}
	failed := append(begin[:4:4], "b.AttemptEnd 1 error", "a.AttemptEnd 1 error")
	cases := []struct {
		name     string
		who, at  string // the observer and hook that panic; at "op": op panics
		events   []string
		attempts int // attempt contexts seen
	}{
		{name: "CallStart", who: "b", at: "CallStart",
			events: []string{"a.CallStart", "b.CallStart", "a.CallEnd panic"}},
		{name: "AttemptStart", who: "b", at: "AttemptStart", attempts: 1,
			events: append(begin[:4:4], "a.AttemptEnd 1 panic", "b.CallEnd panic", "a.CallEnd panic")},
		{name: "op", at: "op", attempts: 1,
			events: append(begin[:4:4], "b.AttemptEnd 1 panic", "a.AttemptEnd 1 panic", "b.CallEnd panic", "a.CallEnd panic")},
		{name: "AttemptEnd", who: "b", at: "AttemptEnd", attempts: 1,
			events: append(failed[:6:6], "b.CallEnd panic", "a.CallEnd panic")},
		{name: "Backoff", who: "a", at: "Backoff", attempts: 1,
			events: append(failed[:6:6], "a.Backoff 1 policy", "b.CallEnd panic", "a.CallEnd panic")},
		{name: "CallEnd", who: "b", at: "CallEnd", attempts: 2,
			events: append(failed[:6:6], "a.Backoff 1 policy", "b.Backoff 1 policy",
				"a.AttemptStart 2", "b.AttemptStart 2", "b.AttemptEnd 2 completed", "a.AttemptEnd 2 completed",
				"b.CallEnd success", "a.CallEnd success")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			type boom struct{ where string }
			val := &boom{tc.name} // a pointer: the very value must come out
			var rec recorder
			var actxs []context.Context
			catch := &deadline.Hooks{AttemptStart: func(ctx context.Context, _ deadline.AttemptInfo) context.Context {
				actxs = append(actxs, ctx) // the first hook receives the attempt's own context
				return nil
			}}
			a, b := rec.hooks("a."), rec.hooks("b.")
			switch tc.who {
			case "a":
				a = panicAt(&rec, "a.", tc.at, val)
			case "b":
				b = panicAt(&rec, "b.", tc.at, val)
			}
			p := policy(2, 0, 0)
			p.Hooks = deadline.Compose(catch, a, b)
			op := func(ctx context.Context, at deadline.AttemptInfo) (int, error) {
				if tc.at == "op" {
					panic(val)
				}
				if at.Number == 1 {
					return 0, deadline.Retryable(errFlaky)
				}
				return at.Number, nil
			}
			var got any
			func() {
				defer func() { got = recover() }()
				_, _ = deadline.Do(context.Background(), deadline.New(time.Hour), p, op)
			}()
			require.Same(t, val, got, "the panic goes on unchanged")
			assert.Equal(t, tc.events, rec.events)
			require.Len(t, actxs, tc.attempts)
			for i, c := range actxs {
				assert.ErrorIs(t, c.Err(), context.Canceled, "attempt %d's context was released", i+1)
			}
		})
	}
}

// The leak the brief names: a lone AttemptStart hook that panics used to skip
// the attempt context's cancel, keeping its timer until the deadline.
func TestDoPanicInAttemptStartReleasesTheAttempt(t *testing.T) {
	defer goleak.VerifyNone(t)
	var rec recorder
	var actx context.Context
	h := rec.hooks("")
	start := h.AttemptStart
	h.AttemptStart = func(ctx context.Context, a deadline.AttemptInfo) context.Context {
		actx = ctx
		start(ctx, a)
		panic("observer bug")
	}
	p := policy(1, time.Minute, 0)
	p.Hooks = h
	called := false
	assert.PanicsWithValue(t, "observer bug", func() {
		_, _ = deadline.Do(context.Background(), deadline.New(time.Hour), p, func(context.Context, deadline.AttemptInfo) (int, error) {
			called = true
			return 1, nil
		})
	})
	assert.False(t, called, "op never ran")
	require.NotNil(t, actx)
	assert.ErrorIs(t, actx.Err(), context.Canceled, "the attempt's context was released")
	assert.Equal(t, []string{"CallStart", "AttemptStart 1", "CallEnd panic"}, rec.events,
		"no AttemptEnd for an attempt that never began; CallEnd closes the call")
	require.Len(t, rec.calls, 1)
	assert.Equal(t, 1, rec.calls[0].Attempts)
}

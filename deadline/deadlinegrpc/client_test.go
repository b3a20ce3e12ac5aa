package deadlinegrpc_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinegrpc"
)

// fixedPolicy retries three times with a fixed 10ms backoff and a 20ms
// floor: counts and order are exact, waits are bounded below only.
func fixedPolicy() deadline.Policy {
	return deadline.Policy{
		MaxAttempts: 3,
		Floor:       20 * time.Millisecond,
		Backoff:     deadline.Backoff{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond, Jitter: deadline.JitterNone},
	}
}

// recorder keeps what the engine's hooks report.
type recorder struct {
	mu       sync.Mutex
	attempts []deadline.AttemptInfo
	backoffs []deadline.BackoffInfo
	ends     []deadline.CallResult
}

func (r *recorder) hooks() *deadline.Hooks {
	return &deadline.Hooks{
		AttemptStart: func(ctx context.Context, a deadline.AttemptInfo) context.Context {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.attempts = append(r.attempts, a)
			return nil
		},
		Backoff: func(ctx context.Context, b deadline.BackoffInfo) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.backoffs = append(r.backoffs, b)
		},
		CallEnd: func(ctx context.Context, c deadline.CallResult) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.ends = append(r.ends, c)
		},
	}
}

func budgetCtx(t *testing.T, budget time.Duration) context.Context {
	t.Helper()
	return deadline.NewContext(t.Context(), deadline.New(budget))
}

func unavailableUntil(n int) func(ctx context.Context, c call, in string) (string, error) {
	return func(ctx context.Context, c call, in string) (string, error) {
		if c.n < n {
			return "", status.Error(codes.Unavailable, "down")
		}
		return in, nil
	}
}

// stopOf returns the StopError err carries, failing the test if none.
func stopOf(t *testing.T, err error) *deadline.StopError {
	t.Helper()
	stop, ok := errors.AsType[*deadline.StopError](err)
	require.True(t, ok, "no *deadline.StopError in %v", err)
	return stop
}

func TestRetriesIdempotentMethodWithShrinkingLeases(t *testing.T) {
	for _, where := range []string{loopback, inMemory} {
		t.Run(where, func(t *testing.T) {
			e := &echo{handle: unavailableUntil(3)}
			rec := &recorder{}
			v := start(t, where, e, nil, newClient(t, deadlinegrpc.WithPolicy(fixedPolicy()), deadlinegrpc.WithHooks(rec.hooks())))
			const budget = 5 * time.Second
			out, err := v.get(budgetCtx(t, budget), mGet, "hello")
			require.NoError(t, err)
			assert.Equal(t, "hello", out)

			seen := e.seen(mGet)
			require.Len(t, seen, 3, "two retries of UNAVAILABLE, then success")
			for i, c := range seen {
				require.True(t, c.hasDeadline, "attempt %d carried no grpc-timeout", i+1)
				assert.LessOrEqual(t, c.remaining, budget-fixedPolicy().Floor, "attempt %d: the lease keeps the floor back", i+1)
				if i > 0 {
					assert.Less(t, c.remaining, seen[i-1].remaining, "the lease on the wire shrinks from attempt to attempt")
				}
			}
			require.Len(t, rec.attempts, 3)
			for i, a := range rec.attempts {
				assert.Equal(t, i+1, a.Number)
				assert.Equal(t, deadline.LimitDeadline, a.LimitedBy)
				assert.LessOrEqual(t, seen[i].remaining, a.Granted, "the server never sees more than the grant")
			}
		})
	}
}

func TestLeaseIsTheCeilingNotTheWholeBudget(t *testing.T) {
	e := &echo{handle: unavailableUntil(2)}
	p := fixedPolicy()
	p.AttemptTimeout = 300 * time.Millisecond
	v := start(t, inMemory, e, nil, newClient(t, deadlinegrpc.WithPolicy(p)))
	_, err := v.get(budgetCtx(t, 10*time.Second), mGet, "x")
	require.NoError(t, err)
	for _, c := range e.seen(mGet) {
		assert.LessOrEqual(t, c.remaining, 300*time.Millisecond, "grpc-timeout carries the lease, not the 10s budget")
	}
}

func TestIdempotencyDecidesRetries(t *testing.T) {
	cases := []struct {
		name   string
		method string
		opts   []deadlinegrpc.ClientOption
		calls  int
	}{
		{"no_side_effects", mGet, nil, 3},
		{"idempotent", mSet, nil, 3},
		{"no level: sent once", mPut, nil, 1},
		{"not in the descriptor: sent once", mUnlisted, nil, 1},
		{"listed explicitly", mPut, []deadlinegrpc.ClientOption{deadlinegrpc.WithIdempotentMethods(mPut)}, 3},
		{"listed, not in the descriptor", mUnlisted, []deadlinegrpc.ClientOption{deadlinegrpc.WithIdempotentMethods(mUnlisted)}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := &echo{handle: unavailableUntil(100)}
			v := start(t, inMemory, e, nil, newClient(t, append([]deadlinegrpc.ClientOption{deadlinegrpc.WithPolicy(fixedPolicy())}, tc.opts...)...))
			_, err := v.get(budgetCtx(t, 5*time.Second), tc.method, "x")
			require.Error(t, err)
			assert.Equal(t, tc.calls, e.count(tc.method))
			assert.Equal(t, codes.Unavailable, status.Code(err), "the last attempt's code")
			stop := stopOf(t, err)
			assert.Equal(t, tc.calls, stop.Attempts)
			if tc.calls == 1 {
				assert.Equal(t, deadline.ReasonNotRetryable, stop.Reason)
			} else {
				assert.Equal(t, deadline.ReasonExhausted, stop.Reason)
			}
		})
	}
}

func TestRetryCodes(t *testing.T) {
	fail := func(code codes.Code) func(context.Context, call, string) (string, error) {
		return func(context.Context, call, string) (string, error) { return "", status.Error(code, "no") }
	}
	cases := []struct {
		name  string
		code  codes.Code
		opts  []deadlinegrpc.ClientOption
		calls int
	}{
		{"resource_exhausted by default", codes.ResourceExhausted, nil, 3},
		{"internal not by default", codes.Internal, nil, 1},
		{"internal when configured", codes.Internal, []deadlinegrpc.ClientOption{deadlinegrpc.WithRetryCodes(codes.Internal)}, 3},
		{"unavailable no longer when replaced", codes.Unavailable, []deadlinegrpc.ClientOption{deadlinegrpc.WithRetryCodes(codes.Internal)}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := &echo{handle: fail(tc.code)}
			v := start(t, inMemory, e, nil, newClient(t, append([]deadlinegrpc.ClientOption{deadlinegrpc.WithPolicy(fixedPolicy())}, tc.opts...)...))
			_, err := v.get(budgetCtx(t, 5*time.Second), mGet, "x")
			assert.Equal(t, tc.code, status.Code(err))
			assert.Equal(t, tc.calls, e.count(mGet))
		})
	}
}

// pushbackThen answers UNAVAILABLE with the pushback values on the first
// call and succeeds afterwards.
func pushbackThen(values ...string) func(ctx context.Context, c call, in string) (string, error) {
	return func(ctx context.Context, c call, in string) (string, error) {
		if c.n == 1 {
			md := metadata.MD{}
			for _, v := range values {
				md.Append(deadlinegrpc.PushbackTrailer, v)
			}
			_ = grpc.SetTrailer(ctx, md)
			return "", status.Error(codes.Unavailable, "busy")
		}
		return in, nil
	}
}

func TestPushbackReplacesTheBackoff(t *testing.T) {
	e := &echo{handle: pushbackThen("150")}
	rec := &recorder{}
	v := start(t, inMemory, e, nil, newClient(t, deadlinegrpc.WithPolicy(fixedPolicy()), deadlinegrpc.WithHooks(rec.hooks())))
	_, err := v.get(budgetCtx(t, 5*time.Second), mGet, "x")
	require.NoError(t, err)
	require.Equal(t, 2, e.count(mGet))
	require.Len(t, rec.backoffs, 1)
	b := rec.backoffs[0]
	assert.Equal(t, deadline.SourceRetryAfter, b.Source)
	assert.Equal(t, 150*time.Millisecond, b.Delay, "the pushback, not the 10ms backoff, and never shortened")
	assert.True(t, b.Fits)
	seen := e.seen(mGet)
	assert.GreaterOrEqual(t, seen[0].remaining-seen[1].remaining, 150*time.Millisecond, "the second attempt came at least the pushback later")
}

// TestPushbackTooLongStopsAtOnce runs in a synctest bubble (bufconn runs
// there): "not slept" is then exact, no virtual time passes, instead of a
// wall-clock bound that a loaded machine could break.
func TestPushbackTooLongStopsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := &echo{handle: pushbackThen("10000")}
		v := start(t, inMemory, e, nil, newClient(t, deadlinegrpc.WithPolicy(fixedPolicy())))
		began := time.Now()
		_, err := v.get(budgetCtx(t, 2*time.Second), mGet, "x")
		assert.Zero(t, time.Since(began), "the 10s pushback was not slept, nor anything else")
		assert.Equal(t, 1, e.count(mGet))
		assert.Equal(t, codes.Unavailable, status.Code(err), "the server's status, not one made for the budget reason")
		stop := stopOf(t, err)
		assert.True(t, err.(interface{ Timeout() bool }).Timeout(), "a budget reason")
		assert.Equal(t, deadline.ReasonRetryAfterTooLong, stop.Reason)
		assert.Equal(t, 10*time.Second, stop.Wait)
		assert.ErrorIs(t, err, deadline.ErrRetryAfterExceedsBudget)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, codes.Unavailable, status.Code(stop.Last), "the server's status is kept")
	})
}

func TestPushbackThatRefusesRetries(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
	}{
		{"negative", []string{"-1"}},
		{"malformed", []string{"soon"}},
		{"fraction", []string{"1.5"}},
		{"empty", []string{""}},
		{"several", []string{"10", "20"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &echo{handle: pushbackThen(tc.values...)}
			p := fixedPolicy()
			p.Retryable = func(error) bool { return true } // cannot widen it
			v := start(t, inMemory, e, nil, newClient(t, deadlinegrpc.WithPolicy(p)))
			_, err := v.get(budgetCtx(t, 5*time.Second), mGet, "x")
			require.Error(t, err)
			assert.Equal(t, 1, e.count(mGet), "the server asked not to retry")
			assert.Equal(t, codes.Unavailable, status.Code(err))
			assert.Equal(t, deadline.ReasonNotRetryable, stopOf(t, err).Reason)
			pe, ok := errors.AsType[*deadlinegrpc.PushbackError](err)
			require.True(t, ok)
			assert.Equal(t, strings.Join(tc.values, ", "), pe.Value)
		})
	}
}

func TestParsePushback(t *testing.T) {
	for _, tc := range []struct {
		values            []string
		delay             time.Duration
		present, wellMade bool
	}{
		{nil, 0, false, false},
		{[]string{"0"}, 0, true, true},
		{[]string{"250"}, 250 * time.Millisecond, true, true},
		{[]string{"99999999999999999999999"}, time.Duration(1<<63 - 1), true, true},
		{[]string{"-5"}, 0, true, false},
		{[]string{" 5"}, 0, true, false},
		{[]string{"5ms"}, 0, true, false},
		{[]string{"1", "2"}, 0, true, false},
	} {
		d, present, ok := deadlinegrpc.ParsePushback(tc.values)
		assert.Equal(t, tc.delay, d, "%q", tc.values)
		assert.Equal(t, tc.present, present, "%q", tc.values)
		assert.Equal(t, tc.wellMade, ok, "%q", tc.values)
	}
}

func TestRefusedBelowTheFloorSendsNothing(t *testing.T) {
	e := &echo{}
	v := start(t, inMemory, e, nil, newClient(t, deadlinegrpc.WithPolicy(fixedPolicy())))
	_, err := v.get(budgetCtx(t, 10*time.Millisecond), mGet, "x")
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
	assert.Equal(t, deadline.ReasonRefused, stopOf(t, err).Reason)
	assert.ErrorIs(t, err, deadline.ErrRefused)
	assert.Equal(t, 0, e.count(mGet))
}

func TestCanceledCallIsCancelled(t *testing.T) {
	started := make(chan struct{})
	e := &echo{handle: func(ctx context.Context, c call, in string) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	}}
	v := start(t, inMemory, e, nil, newClient(t, deadlinegrpc.WithPolicy(fixedPolicy())))
	ctx, cancel := context.WithCancel(budgetCtx(t, 5*time.Second))
	go func() {
		<-started
		cancel()
	}()
	_, err := v.get(ctx, mGet, "x")
	assert.Equal(t, codes.Canceled, status.Code(err))
	assert.Equal(t, deadline.ReasonCanceled, stopOf(t, err).Reason)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestPolicyPrecedence(t *testing.T) {
	named := func(name string) deadline.Policy {
		p := fixedPolicy()
		p.Name = name
		return p
	}
	logs := &logBuffer{}
	rec := &recorder{}
	c := newClient(t,
		deadlinegrpc.WithPolicy(named("client")),
		deadlinegrpc.WithPolicyFunc(func(method string) (deadline.Policy, bool) {
			if method == mSet {
				return named("func"), true
			}
			return deadline.Policy{}, false
		}),
		deadlinegrpc.WithHooks(rec.hooks()),
		deadlinegrpc.WithLogger(logs.logger()),
	)
	v := start(t, inMemory, &echo{}, nil, c)
	ctx := budgetCtx(t, 5*time.Second)
	_, err := v.get(deadlinegrpc.WithRequestPolicy(ctx, named("context")), mSet, "x")
	require.NoError(t, err)
	_, err = v.get(ctx, mSet, "x")
	require.NoError(t, err)
	_, err = v.get(ctx, mGet, "x")
	require.NoError(t, err)

	require.Len(t, rec.ends, 3)
	assert.Equal(t, []string{"context", "func", "client"}, []string{rec.ends[0].Name, rec.ends[1].Name, rec.ends[2].Name})
	assert.Contains(t, logs.String(), "no policy for method", "the unknown method's fallback is logged")
	assert.Contains(t, logs.String(), mGet)
}

func TestDefaultNameIsTheMethod(t *testing.T) {
	rec := &recorder{}
	v := start(t, inMemory, &echo{}, nil, newClient(t, deadlinegrpc.WithHooks(rec.hooks())))
	_, err := v.get(t.Context(), mGet, "x")
	require.NoError(t, err)
	require.Len(t, rec.ends, 1)
	assert.Equal(t, strings.TrimPrefix(mGet, "/"), rec.ends[0].Name)
}

func TestInvalidPolicyFromTheContextFailsTheCall(t *testing.T) {
	e := &echo{}
	v := start(t, inMemory, e, nil, newClient(t))
	_, err := v.get(deadlinegrpc.WithRequestPolicy(t.Context(), deadline.Policy{}), mGet, "x")
	assert.Equal(t, codes.Internal, status.Code(err))
	assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
	_, ok := errors.AsType[*deadline.PolicyError](err)
	assert.True(t, ok)
	assert.Equal(t, 0, e.count(mGet))
}

func TestNewClientRejectsInvalidOptions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opt   deadlinegrpc.ClientOption
		field string
	}{
		{"policy", deadlinegrpc.WithPolicy(deadline.Policy{}), "Policy.MaxAttempts"},
		{"budget", deadlinegrpc.WithDefaultBudget(0), "deadlinegrpc.WithDefaultBudget"},
		{"code OK", deadlinegrpc.WithRetryCodes(codes.OK), "deadlinegrpc.WithRetryCodes"},
		{"code 17", deadlinegrpc.WithRetryCodes(codes.Code(17)), "deadlinegrpc.WithRetryCodes"},
		{"method", deadlinegrpc.WithIdempotentMethods("pkg.Svc.Get"), "deadlinegrpc.WithIdempotentMethods"},
		{"method without name", deadlinegrpc.WithIdempotentMethods("/pkg.Svc/"), "deadlinegrpc.WithIdempotentMethods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := deadlinegrpc.NewClient(nil, tc.opt)
			assert.Nil(t, c)
			pe, ok := errors.AsType[*deadline.PolicyError](err)
			require.True(t, ok, "%v", err)
			assert.Equal(t, tc.field, pe.Field)
		})
	}
}

func TestWarnsOfGRPCRetryPolicy(t *testing.T) {
	const config = `{"methodConfig":[{"name":[{"service":"` + service + `","method":"Get"}],
		"retryPolicy":{"maxAttempts":2,"initialBackoff":"0.01s","maxBackoff":"0.1s","backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]}}]}`
	logs := &logBuffer{}
	c := newClient(t, deadlinegrpc.WithLogger(logs.logger()))
	v := start(t, inMemory, &echo{}, nil, nil, grpc.WithChainUnaryInterceptor(c.UnaryInterceptor()), grpc.WithDefaultServiceConfig(config))
	for range 3 {
		_, err := v.get(t.Context(), mGet, "x")
		require.NoError(t, err)
	}
	_, err := v.get(t.Context(), mSet, "x")
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), "warned once, for Get only: %s", logs.String())
}

// The service config is not read on every call (it takes the connection's
// lock), but a later one is still noticed: after a resolver update gives a
// method the client retries a retryPolicy, the client warns within a few
// thousand calls (it reads the config on one call in 1024, at random), and
// only once.
func TestWarnsOfGRPCRetryPolicyAddedLater(t *testing.T) {
	const (
		with = `{"methodConfig":[{"name":[{"service":"` + service + `","method":"Get"}],
		"retryPolicy":{"maxAttempts":2,"initialBackoff":"0.01s","maxBackoff":"0.1s","backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]}}]}`
	)
	r := manual.NewBuilderWithScheme("later")
	r.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: "unused"}}})
	cc, err := grpc.NewClient(r.Scheme()+":///x", grpcInsecure(), grpc.WithResolvers(r),
		grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) { return nil, errors.New("no network in this test") }))
	require.NoError(t, err)
	defer cc.Close()

	logs := &logBuffer{}
	c := newClient(t, deadlinegrpc.WithLogger(logs.logger()))
	unary := c.UnaryInterceptor()
	invoke := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	ctx := deadline.NewContext(t.Context(), deadline.New(time.Hour))
	warned := func() int { return strings.Count(logs.String(), "level=WARN") }

	cc.Connect()
	wctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for cc.GetState() == connectivity.Idle && cc.WaitForStateChange(wctx, connectivity.Idle) {
	}
	for range 3000 {
		require.NoError(t, unary(ctx, mGet, nil, nil, cc, invoke))
	}
	require.Zero(t, warned(), "no retryPolicy yet")

	r.UpdateState(resolver.State{Addresses: []resolver.Address{{Addr: "unused"}}, ServiceConfig: r.CC().ParseServiceConfig(with)})
	require.NotNil(t, cc.GetMethodConfig(mGet).RetryPolicy, "the update is applied")
	calls := 0
	for ; calls < 64*1024 && warned() == 0; calls += 256 {
		for range 256 {
			require.NoError(t, unary(ctx, mGet, nil, nil, cc, invoke))
		}
	}
	require.Equal(t, 1, warned(), "warned within %d calls of the update: %s", calls, logs.String())
	for range 4096 {
		require.NoError(t, unary(ctx, mGet, nil, nil, cc, invoke))
	}
	assert.Equal(t, 1, warned(), "and only once")
}

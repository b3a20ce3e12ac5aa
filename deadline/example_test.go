package deadline_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

// One deadline for the whole run; each scope is a fresh context ending at it.
func ExampleNew() {
	d := deadline.New(time.Hour)
	fmt.Println("expired:", d.Expired())

	ctx, cancel := d.Scope(context.Background())
	end, _ := ctx.Deadline()
	fmt.Println("scope ends at the deadline:", end.Equal(d.End()))
	cancel()
	fmt.Println("released:", ctx.Err())

	// A limit of zero (or less) gives a scope that is already over.
	ctx, cancel = d.ScopeLimit(context.Background(), 0)
	defer cancel()
	fmt.Println("limit 0:", ctx.Err(), "/", context.Cause(ctx))
	// Output:
	// expired: false
	// scope ends at the deadline: true
	// released: context canceled
	// limit 0: context deadline exceeded / deadline: the attempt's ceiling was reached
}

// The seed's example: an operation that fails twice with a retryable error
// and then returns 7 runs three times.
func ExampleCall() {
	d := deadline.New(5 * time.Second)
	runs := 0
	v, err := deadline.Call(context.Background(), d, func(ctx context.Context) (int, error) {
		runs++
		if runs < 3 {
			return 0, deadline.Retryable(errors.New("connection reset"))
		}
		return 7, nil
	}, 3)
	fmt.Println(v, err, "after", runs, "runs")

	// An expired deadline refuses before calling op.
	_, err = deadline.Call(context.Background(), deadline.New(0), func(context.Context) (int, error) {
		panic("not called")
	}, 3)
	fmt.Println(errors.Is(err, context.DeadlineExceeded))
	// Output:
	// 7 <nil> after 3 runs
	// true
}

// Do leases each attempt out of what is left and says why it stopped.
func ExampleDo() {
	d := deadline.New(time.Hour)
	p := deadline.DefaultPolicy()
	p.Name = "fetch"
	p.AttemptTimeout = 2 * time.Second
	p.Backoff = deadline.Backoff{} // retry at once, to keep the example quick

	v, err := deadline.Do(context.Background(), d, p, func(ctx context.Context, a deadline.AttemptInfo) (string, error) {
		fmt.Printf("attempt %d granted %v (limited by the %v)\n", a.Number, a.Granted, a.LimitedBy)
		if a.Number == 1 {
			return "", deadline.Retryable(errors.New("503 Service Unavailable"))
		}
		return "page", nil
	})
	fmt.Println(v, err)

	// Too little left: refused locally, the op is never called.
	_, err = deadline.Do(context.Background(), deadline.New(10*time.Millisecond), p, func(context.Context, deadline.AttemptInfo) (string, error) {
		panic("not called")
	})
	var se *deadline.StopError
	if errors.As(err, &se) {
		fmt.Println(se.Reason, se.Attempts, errors.Is(err, deadline.ErrRefused), errors.Is(err, context.DeadlineExceeded))
	}

	// A server's Retry-After longer than the budget: give up now.
	_, err = deadline.Do(context.Background(), d, p, func(context.Context, deadline.AttemptInfo) (string, error) {
		return "", deadline.Retryable(deadline.RetryAfter(errors.New("429 Too Many Requests"), 2*time.Hour))
	})
	if errors.As(err, &se) {
		fmt.Println(se.Reason, se.Attempts, se.Wait)
	}
	// Output:
	// attempt 1 granted 2s (limited by the ceiling)
	// attempt 2 granted 2s (limited by the ceiling)
	// page <nil>
	// refused 0 true true
	// retry_after_exceeds_budget 1 2h0m0s
}

// LogHooks logs each attempt's lease and the call's stop reason. Here the
// time is dropped and durations are rounded to the second so that the output
// does not depend on the machine.
func ExampleLogHooks() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch {
			case a.Key == slog.TimeKey:
				return slog.Attr{}
			case a.Value.Kind() == slog.KindDuration:
				a.Value = slog.DurationValue(a.Value.Duration().Round(time.Second))
			}
			return a
		},
	}))
	p := deadline.Policy{Name: "search", MaxAttempts: 2, AttemptTimeout: 2 * time.Second, Hooks: deadline.LogHooks(logger)}
	_, _ = deadline.Do(context.Background(), deadline.New(time.Hour), p, func(_ context.Context, a deadline.AttemptInfo) (int, error) {
		if a.Number == 1 {
			return 0, deadline.Retryable(errors.New("connection reset"))
		}
		return 42, nil
	})
	// Output:
	// level=INFO msg="deadline attempt" step=search attempt=1 granted=2s limited_by=ceiling remaining=1h0m0s duration=0s ended_by=error retryable=true error="connection reset"
	// level=DEBUG msg="deadline backoff" step=search attempt=1 delay=0s source=policy remaining=1h0m0s fits=true
	// level=DEBUG msg="deadline attempt" step=search attempt=2 granted=2s limited_by=ceiling remaining=1h0m0s duration=0s ended_by=completed
	// level=INFO msg="deadline call" step=search reason=success verdict=ok attempts=2 duration=0s remaining=1h0m0s
}

// Hooks observe every call; WithHooks carries them in the context so that
// calls made deep inside (an HTTP transport's included) report to them.
func ExampleWithHooks() {
	h := &deadline.Hooks{
		AttemptStart: func(ctx context.Context, a deadline.AttemptInfo) context.Context {
			fmt.Println("attempt", a.Number, "of", a.Name)
			return nil
		},
		CallEnd: func(_ context.Context, r deadline.CallResult) {
			fmt.Println(r.Name, r.Reason, "after", r.Attempts, "attempt(s)")
		},
	}
	ctx := deadline.WithHooks(context.Background(), h)
	p := deadline.Policy{Name: "extract", MaxAttempts: 1}
	_, _ = deadline.Do(ctx, deadline.New(time.Hour), p, func(context.Context, deadline.AttemptInfo) (int, error) {
		return 0, errors.New("bad input")
	})
	// Output:
	// attempt 1 of extract
	// extract not_retryable after 1 attempt(s)
}

// One retry budget per downstream, shared by every call to it: during an
// outage, retries stay within 20 % of first attempts (plus a floor rate)
// whatever the number of callers, and a denied retry stops the call at once,
// keeping the last error.
func ExampleNewRetryBudget() {
	budget, err := deadline.NewRetryBudget(deadline.WithRetryRatio(0.2), deadline.WithMinRetryRate(0))
	if err != nil {
		panic(err)
	}
	p := deadline.Policy{Name: "inventory", MaxAttempts: 3, RetryBudget: budget}
	down := func(context.Context, deadline.AttemptInfo) (string, error) {
		return "", deadline.Retryable(errors.New("503 Service Unavailable"))
	}
	attempts, denied := 0, 0
	for i := range 10 {
		_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, down)
		var stop *deadline.StopError
		errors.As(err, &stop)
		attempts += stop.Attempts
		if errors.Is(err, deadline.ErrRetryBudgetExhausted) {
			denied++
			if i == 0 {
				fmt.Println(err)
			}
		}
	}
	fmt.Printf("10 calls: %d attempts sent (a loop without the budget sends 30), %d retries denied\n", attempts, denied)
	// Output:
	// inventory: retry budget exhausted (balance 0) (after 1 attempt): 503 Service Unavailable
	// 10 calls: 12 attempts sent (a loop without the budget sends 30), 10 retries denied
}

// Hedging: when the first attempt has not answered after the delay (here
// 40ms, say the operation's p95), a second one starts beside it; the first
// success wins and the other is canceled with ErrHedgeLost.
func ExampleHedge() {
	p := deadline.Policy{
		Name: "lookup", MaxAttempts: 2, Floor: 20 * time.Millisecond,
		Hedge: &deadline.Hedge{Delay: 40 * time.Millisecond, MaxHedges: 1},
	}
	lookup := func(ctx context.Context, a deadline.AttemptInfo) (string, error) {
		took := time.Hour // the first attempt is stuck
		if a.Hedge {
			took = time.Millisecond
		}
		select {
		case <-time.After(took):
			return fmt.Sprintf("answer from attempt %d (hedge: %t)", a.Number, a.Hedge), nil
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	}
	v, err := deadline.DoHedged(context.Background(), deadline.New(time.Second), p, lookup)
	fmt.Println(v, err)
	// Output: answer from attempt 2 (hedge: true) <nil>
}

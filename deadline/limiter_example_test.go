package deadline_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/overload"
)

// One overload.Limiter and one overload.Throttle per downstream, shared by
// the policies of every route that calls it: an attempt takes a slot
// before it goes out, and waits for one only while it can still finish. A refusal says the downstream's capacity,
// not the budget, stopped the call.
func ExamplePolicy_limiter() {
	limiter, err := overload.NewLimiter(overload.WithBreaker())
	if err != nil {
		panic(err)
	}
	throttle, err := overload.NewThrottle() // SRE client-side throttling, K = 2
	if err != nil {
		panic(err)
	}
	p := deadline.DefaultPolicy()
	p.Name, p.Limiter, p.Throttle = "search", limiter, throttle

	v, err := deadline.Do(context.Background(), deadline.New(time.Second), p,
		func(ctx context.Context, a deadline.AttemptInfo) (string, error) {
			return "results", nil // the downstream call, under ctx
		})
	fmt.Println(v, err, limiter.Limit(), limiter.Breaker().State())
	// Output: results <nil> 20 closed
}

// A call that finds every slot taken and cannot wait stops with
// ReasonLimited: not a timeout, and its verdict names the downstream.
func ExamplePolicy_limiterRefusal() {
	limiter, err := overload.NewLimiter(overload.WithFixedLimit(1), overload.WithBacklog(0))
	if err != nil {
		panic(err)
	}
	held, _ := limiter.TryAcquire("search") // another call holds the only slot
	defer held.Done(overload.OutcomeSuccess)

	var verdict deadline.Verdict
	p := deadline.Policy{Name: "search", MaxAttempts: 1, Limiter: limiter,
		Hooks: &deadline.Hooks{CallEnd: func(_ context.Context, r deadline.CallResult) { verdict = deadline.VerdictOf(r) }}}
	_, err = deadline.Do(context.Background(), deadline.New(time.Second), p,
		func(ctx context.Context, a deadline.AttemptInfo) (string, error) { return "results", nil })
	fmt.Println(errors.Is(err, deadline.ErrLimited), errors.Is(err, context.DeadlineExceeded), verdict)
	// Output: true false downstream_overloaded
}

package overload_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/deadlinebudget/budget/deadline/overload"
)

// The parts compose as package deadline's engine composes them: the
// limiter (its breaker first) gives a call a slot, the throttle lets it
// out, and how it ended goes back to both.
func Example() {
	limiter, err := overload.NewLimiter(overload.WithFixedLimit(2), overload.WithBacklog(0), overload.WithBreaker())
	if err != nil {
		panic(err)
	}
	throttle, err := overload.NewThrottle()
	if err != nil {
		panic(err)
	}
	call := func(ctx context.Context) error {
		permit, err := limiter.Acquire(ctx, "search", time.Now().Add(time.Second), 10*time.Millisecond)
		if err != nil {
			return err // a *RefusedError: nothing was sent
		}
		if !throttle.Allow(0.5) {
			permit.Done(overload.OutcomeIgnore)
			return &overload.RefusedError{Cause: overload.CauseThrottled}
		}
		// ... the call to the downstream, under ctx ...
		permit.Done(overload.OutcomeSuccess)
		throttle.Record(overload.OutcomeSuccess)
		return nil
	}
	fmt.Println(call(context.Background()))
	running, waiting := limiter.Len()
	fmt.Println(limiter.Limit(), running, waiting, limiter.Breaker().State(), throttle.DropProbability())
	// Output:
	// <nil>
	// 2 0 0 closed 0
}

// A refusal explains itself: its cause, where the call stood, the limit,
// what was left and what it needed; errors.Is matches its sentinel.
func ExampleLimiter_Acquire() {
	limiter, err := overload.NewLimiter(overload.WithFixedLimit(1), overload.WithBacklog(0))
	if err != nil {
		panic(err)
	}
	held, _ := limiter.TryAcquire("search") // another call holds the only slot
	defer held.Done(overload.OutcomeSuccess)

	_, err = limiter.Acquire(context.Background(), "search", time.Time{}, 0)
	var re *overload.RefusedError
	fmt.Println(errors.As(err, &re), re.Cause, errors.Is(err, overload.ErrLimited), re.ErrorType())
	// Output: true queue_full true limited
}

// A breaker's transitions are observable: every change of state reaches
// the callback once, outside the limiter's locks.
func ExampleWithBreaker() {
	limiter, err := overload.NewLimiter(overload.WithBreaker(
		overload.WithFailureRatio(0.5, 4),
		overload.WithOnTransition(func(t overload.Transition) {
			fmt.Printf("%s → %s after %d failures of %d calls\n", t.From, t.To, t.Failures, t.Calls)
		})))
	if err != nil {
		panic(err)
	}
	for range 4 {
		p, _ := limiter.TryAcquire("search")
		p.Done(overload.OutcomeFailure)
	}
	_, err = limiter.Acquire(context.Background(), "search", time.Time{}, 0)
	fmt.Println(errors.Is(err, overload.ErrDownstreamOpen))
	// Output:
	// closed → open after 4 failures of 4 calls
	// true
}

// A throttle drops requests once the downstream refuses most of them:
// with K = 2, past half of the window's requests refused.
func ExampleNewThrottle() {
	throttle, err := overload.NewThrottle(overload.WithThrottleK(2))
	if err != nil {
		panic(err)
	}
	for range 9 {
		throttle.Record(overload.OutcomeOverload) // a 503
	}
	throttle.Record(overload.OutcomeSuccess)
	// (10 − 2 × 1) / (10 + 1): a draw below it is dropped.
	fmt.Printf("%.2f %v %v\n", throttle.DropProbability(), throttle.Allow(0.5), throttle.Allow(0.9))
	// Output: 0.73 false true
}

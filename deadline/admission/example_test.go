package admission_test

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// A transport that receives a caller's budget (here 800 ms, as a header
// would carry it) applies the one admission rule: clamp to the server's
// maximum, refuse at or below the floor.
func ExampleAdmit() {
	limits := admission.Limits{MaxBudget: 5 * time.Second, Floor: 20 * time.Millisecond}
	a := admission.Admit(admission.Inbound{Present: true, Budget: 800 * time.Millisecond}, deadline.Deadline{}, limits)
	fmt.Println(a.Budget, a.Limit, a.Refusal)

	a = admission.Admit(admission.Inbound{Present: true, Budget: 15 * time.Millisecond}, deadline.Deadline{}, limits)
	fmt.Println(a.Budget, a.Limit, a.Refusal, a.Refused())
	// Output:
	// 800ms header none
	// 15ms header floor true
}

// A server's admission, as a transport adapts it: the shared rule, then
// what the route's learned service time allows (here recorded by hand: 100
// calls of 80 ms), then a slot in the admission queue. The Ticket of an
// admitted call frees its slot and records its service time.
func ExampleAdmitter() {
	rec := &learn.Recorder{}
	live, err := rec.Live(learn.LiveOptions{SuggestOptions: learn.SuggestOptions{Max: 10 * time.Second, MinSamples: 100}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 100 {
		rec.Record("GetReport", deadline.EndedCompleted, 80*time.Millisecond, time.Now())
	}
	q, err := admission.NewQueue(8, 32)
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := admission.NewAdmitter(admission.Config{
		Limits: admission.Limits{MaxBudget: 30 * time.Second, Floor: 5 * time.Millisecond}, Limiter: q,
		Learned: &admission.Learned{Recorder: rec, Estimator: live, Threshold: 0.05},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for _, budget := range []time.Duration{3 * time.Millisecond, 50 * time.Millisecond, 500 * time.Millisecond} {
		a, t := g.Admit(ctx, "GetReport", admission.Inbound{Present: true, Budget: budget}, deadline.Deadline{})
		fmt.Printf("%v: refused %s, learned %v, P %.2f\n", budget, a.Refusal, a.Learned, a.Estimate.P)
		t.Done(ctx, true) // after the handler; a refused call's Ticket holds nothing
	}
	// Output:
	// 3ms: refused floor, learned false, P 0.00
	// 50ms: refused learned, learned true, P 0.00
	// 500ms: refused none, learned true, P 1.00
}

// A server whose handlers are bound by the CPU needs no numbers picked:
// DefaultQueue runs GOMAXPROCS of them at once and lets twice as many wait.
func ExampleDefaultQueue() {
	q := admission.DefaultQueue()
	g, err := admission.NewAdmitter(admission.Config{Limits: admission.DefaultLimits(), Limiter: q})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	a, t := g.Admit(ctx, "Render", admission.Inbound{Present: true, Budget: time.Second}, deadline.Deadline{})
	defer t.Done(ctx, true) // once the handler has returned
	fmt.Println(a.Refusal, q.Limit() == runtime.GOMAXPROCS(0), q.Backlog() == admission.DefaultBacklogPerSlot*q.Limit())
	// Output:
	// none true true
}

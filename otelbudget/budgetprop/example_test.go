package budgetprop_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/budgetprop"
)

// The propagator composed with TraceContext and Baggage: a sender injects
// its remaining budget, a receiver extracts it as a deadline of its own.
// In a program, give the composite to otel.SetTextMapPropagator and the
// instrumentations (otelhttp, otelgrpc) do the injecting and extracting.
func ExampleNew() {
	p, err := budgetprop.New(budgetprop.WithMaxBudget(10 * time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}, p)

	// The sender: a run with 60 s left (carrier: HTTP headers, gRPC
	// metadata, message headers).
	headers := propagation.MapCarrier{}
	prop.Inject(deadline.NewContext(context.Background(), deadline.New(time.Minute)), headers)

	// The receiver: clamped to its 10 s maximum.
	ctx := prop.Extract(context.Background(), headers)
	x, _ := budgetprop.FromContext(ctx)
	d, _ := deadline.FromContext(ctx)
	fmt.Println("limited by:", x.Admission.Limit, "budget:", x.Admission.Budget, "deadline stored:", !d.IsZero())
	fmt.Println("refused:", budgetprop.Check(ctx) != nil)
	// Output:
	// limited by: max budget: 10s deadline stored: true
	// refused: false
}

// A queue consumer: the producer's message waited 3 s with a 2 s budget,
// so it is not processed and the application acknowledges it as expired.
func ExamplePropagator_Consume() {
	published := time.Now()
	producer, _ := budgetprop.New(budgetprop.WithClock(func() time.Time { return published }))
	headers := propagation.MapCarrier{}
	producer.Inject(deadline.NewContext(context.Background(), deadline.New(2*time.Second)), headers)

	// The consumer takes it 3 s later (its clock, simulated here).
	consumer, _ := budgetprop.New(budgetprop.WithClock(func() time.Time { return published.Add(3 * time.Second) }))
	err := consumer.Consume(context.Background(), headers, func(ctx context.Context) error {
		fmt.Println("processing") // not reached
		return nil
	})
	var refused *budgetprop.RefusedError
	if errors.As(err, &refused) {
		fmt.Println("expired:", refused.Reason(), "queued:", refused.Extraction.QueueTime)
		// dead-letter it, count it, or acknowledge and drop it here
	}
	// Output:
	// expired: spent queued: 3s
}

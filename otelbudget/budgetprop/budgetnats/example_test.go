package budgetnats_test

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/budgetprop"
	"github.com/deadlinebudget/budget/otelbudget/budgetprop/budgetnats"
)

// A producer makes two jobs under a 2 s budget; the consumer's clock says
// the first waited 500 ms and the second 3 s. The first is handled with
// what is left, the second is reported expired, not processed. The
// messages go straight from NewMsg to the handler, as a subscription would
// deliver them; the natstest module runs the same through a real broker.
func ExampleHandler() {
	published := time.Now()
	producer, _ := budgetprop.New(budgetprop.WithClock(func() time.Time { return published }))
	waited := 500 * time.Millisecond
	consumer, _ := budgetprop.New(budgetprop.WithClock(func() time.Time { return published.Add(waited) }))

	h, _ := budgetnats.Handler(context.Background(), consumer,
		func(ctx context.Context, msg *nats.Msg) {
			x, _ := budgetprop.FromContext(ctx)
			fmt.Printf("%s: handled, queued %v, about %v left\n", msg.Data, x.QueueTime, x.Budget().Round(100*time.Millisecond))
		},
		func(msg *nats.Msg, err *budgetprop.RefusedError) {
			fmt.Printf("%s: expired (%s), queued %v\n", msg.Data, err.Reason(), err.Extraction.QueueTime)
		})

	run := deadline.NewContext(context.Background(), deadline.New(2*time.Second))
	for _, job := range []struct {
		name   string
		waited time.Duration
	}{{"job 1", 500 * time.Millisecond}, {"job 2", 3 * time.Second}} {
		msg := budgetnats.NewMsg(run, producer, "jobs", []byte(job.name))
		waited = job.waited
		h(msg) // as the subscription would, on the consumer's clock
	}
	// Output:
	// job 1: handled, queued 500ms, about 1.5s left
	// job 2: expired (spent), queued 3s
}

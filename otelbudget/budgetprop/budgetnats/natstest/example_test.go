package natstest

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget/budgetprop"
	"github.com/deadlinebudget/budget/otelbudget/budgetprop/budgetnats"
)

// A producer publishes two jobs under a 2 s budget; the consumer's clock
// says the first waited 500 ms and the second 3 s (simulated: the broker
// and the headers are real). The first is handled with what is left, the
// second is reported expired, not processed.
func Example_handlerOverBroker() {
	dir, _ := os.MkdirTemp("", "budgetnats")
	defer os.RemoveAll(dir)
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	go s.Start()
	defer s.WaitForShutdown()
	defer s.Shutdown()
	if !s.ReadyForConnections(10 * time.Second) {
		fmt.Println("no server")
		return
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()

	published := time.Now()
	producer, _ := budgetprop.New(budgetprop.WithClock(func() time.Time { return published }))
	waited := 500 * time.Millisecond
	consumer, _ := budgetprop.New(budgetprop.WithClock(func() time.Time { return published.Add(waited) }))

	done := make(chan string, 1)
	h, _ := budgetnats.Handler(context.Background(), consumer,
		func(ctx context.Context, msg *nats.Msg) {
			x, _ := budgetprop.FromContext(ctx)
			done <- fmt.Sprintf("%s: handled, queued %v, about %v left", msg.Data, x.QueueTime, x.Budget().Round(100*time.Millisecond))
		},
		func(msg *nats.Msg, err *budgetprop.RefusedError) {
			done <- fmt.Sprintf("%s: expired (%s), queued %v", msg.Data, err.Reason(), err.Extraction.QueueTime)
		})
	sub, _ := nc.SubscribeSync("jobs")
	defer sub.Unsubscribe()

	run := deadline.NewContext(context.Background(), deadline.New(2*time.Second))
	for _, job := range []struct {
		name   string
		waited time.Duration
	}{{"job 1", 500 * time.Millisecond}, {"job 2", 3 * time.Second}} {
		if err := nc.PublishMsg(budgetnats.NewMsg(run, producer, "jobs", []byte(job.name))); err != nil {
			fmt.Println(err)
			return
		}
		msg, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			fmt.Println(err)
			return
		}
		waited = job.waited
		h(msg) // as the subscription would, on the consumer's clock
		fmt.Println(<-done)
	}
	// Output:
	// job 1: handled, queued 500ms, about 1.5s left
	// job 2: expired (spent), queued 3s
}

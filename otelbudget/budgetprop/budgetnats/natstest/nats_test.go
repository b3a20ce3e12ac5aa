package natstest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/otelbudget/budgetprop"
	"github.com/deadlinebudget/budget/otelbudget/budgetprop/budgetnats"
)

// broker runs an embedded NATS server with JetStream on a random port of
// 127.0.0.1 and connects to it; both end with the test (TestMain checks
// that no goroutine outlives them).
func broker(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second), "the embedded NATS server did not start")
	nc, err := nats.Connect(s.ClientURL())
	require.NoError(t, err)
	t.Cleanup(func() {
		nc.Close()
		s.Shutdown()
		s.WaitForShutdown()
	})
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

// clocks: the producer's wall clock, and a consumer's later by d.
type clocks struct{ t0 time.Time }

func newClocks() clocks { return clocks{t0: time.Now()} }

func (c clocks) producer() func() time.Time { return func() time.Time { return c.t0 } }

func (c clocks) after(d time.Duration) func() time.Time {
	return func() time.Time { return c.t0.Add(d) }
}

func newProp(t *testing.T, now func() time.Time) *budgetprop.Propagator {
	t.Helper()
	p, err := budgetprop.New(budgetprop.WithClock(now))
	require.NoError(t, err)
	return p
}

// outcome is what a consumer did with one message.
type outcome struct {
	handled bool
	x       budgetprop.Extraction
	err     error // the expiry
}

// Publish with a 2 s budget over core NATS; a consumer that takes the
// message after 500 ms sees about 1.5 s, one that takes it after 3 s does
// not process it and reports it expired. The queue time is simulated with
// the consumers' clocks; the broker and the headers are real.
func TestCoreNATSQueueTime(t *testing.T) {
	nc, _ := broker(t)
	clk := newClocks()
	producer := newProp(t, clk.producer())

	for _, tc := range []struct {
		name    string
		after   time.Duration
		handled bool
	}{
		{"after 500ms", 500 * time.Millisecond, true},
		{"after 3s", 3 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan outcome, 1)
			h, err := budgetnats.Handler(context.Background(), newProp(t, clk.after(tc.after)),
				func(ctx context.Context, msg *nats.Msg) {
					x, _ := budgetprop.FromContext(ctx)
					got <- outcome{handled: true, x: x}
				},
				func(msg *nats.Msg, err *budgetprop.RefusedError) {
					got <- outcome{x: err.Extraction, err: err}
				})
			require.NoError(t, err)
			subject := "jobs." + t.Name()
			sub, err := nc.Subscribe(subject, h)
			require.NoError(t, err)
			defer sub.Unsubscribe()
			require.NoError(t, nc.Flush())

			ctx := deadline.NewContext(context.Background(), deadline.New(2*time.Second))
			msg := budgetnats.NewMsg(ctx, propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, producer), subject, []byte("job"))
			sent, ok := budgetprop.FromContext(producer.Extract(context.Background(), budgetnats.HeaderCarrier(msg.Header)))
			require.True(t, ok)
			require.NoError(t, nc.PublishMsg(msg))

			o := <-got
			assert.Equal(t, tc.handled, o.handled)
			assert.True(t, o.x.Queued)
			assert.Equal(t, tc.after, o.x.QueueTime)
			if tc.handled {
				assert.NoError(t, o.err)
				assert.Equal(t, sent.SentBudget-tc.after, o.x.Admission.Budget)
				assert.InDelta(t, 1500*time.Millisecond, o.x.Admission.Budget, float64(5*time.Millisecond))
				return
			}
			require.ErrorIs(t, o.err, budgetprop.ErrRefused)
			assert.Equal(t, admission.RefusalSpent, o.x.Admission.Refusal)
		})
	}
}

// With JetStream, an expired message is terminated: the server keeps
// nothing pending for it and never redelivers it. A message the handler
// leaves unacknowledged is redelivered after AckWait: the control that
// shows the check can fail.
//
// The expired message is handled under a long AckWait: with 100 ms, a
// loaded machine let AckWait pass between the delivery and the Term
// reaching the server, which then redelivered it (rightly) and the check
// never held. AckWait is shortened only for the control, once the expired
// message is terminated: were it still pending, it would be redelivered
// with the control, and the final count of its deliveries would show it.
func TestJetStreamExpiredIsNotRedelivered(t *testing.T) {
	_, js := broker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "JOBS", Subjects: []string{"jobs.>"}})
	require.NoError(t, err)
	cfg := jetstream.ConsumerConfig{
		Durable: "worker", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxDeliver: -1,
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "JOBS", cfg)
	require.NoError(t, err)

	clk := newClocks()
	producer := newProp(t, clk.producer())
	var mu sync.Mutex
	deliveries := map[string]int{}
	expired := make(chan error, 10)
	h, err := budgetnats.JetStreamHandler(ctx, newProp(t, clk.after(3*time.Second)),
		func(ctx context.Context, msg jetstream.Msg) {
			mu.Lock()
			deliveries[msg.Subject()]++
			mu.Unlock()
			// jobs.unacked is never acknowledged: redelivered.
		},
		func(msg jetstream.Msg, err error) {
			mu.Lock()
			deliveries[msg.Subject()]++
			mu.Unlock()
			expired <- err
		})
	require.NoError(t, err)
	cc, err := cons.Consume(h)
	require.NoError(t, err)
	defer cc.Stop()

	run := deadline.NewContext(context.Background(), deadline.New(2*time.Second))
	_, err = js.PublishMsg(ctx, budgetnats.NewMsg(run, producer, "jobs.expired", []byte("late")))
	require.NoError(t, err)

	err = <-expired
	require.ErrorIs(t, err, budgetprop.ErrRefused)
	var re *budgetprop.RefusedError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 3*time.Second, re.Extraction.QueueTime)

	// Terminated: nothing pending, nothing redelivered.
	require.Eventually(t, func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumAckPending == 0 && info.AckFloor.Consumer == 1
	}, 10*time.Second, 10*time.Millisecond)

	// The control: a message with budget left that the handler does not
	// acknowledge is redelivered.
	cfg.AckWait = 100 * time.Millisecond
	_, err = js.CreateOrUpdateConsumer(ctx, "JOBS", cfg)
	require.NoError(t, err)
	long := deadline.NewContext(context.Background(), deadline.New(time.Hour))
	_, err = js.PublishMsg(ctx, budgetnats.NewMsg(long, producer, "jobs.unacked", []byte("slow")))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return deliveries["jobs.unacked"] >= 2
	}, 10*time.Second, 10*time.Millisecond)

	info, err := cons.Info(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, info.NumRedelivered, 1)
	mu.Lock()
	assert.Equal(t, 1, deliveries["jobs.expired"], "the expired message was delivered once")
	mu.Unlock()
	select {
	case err := <-expired:
		t.Fatalf("a second expiry: %v", err)
	default:
	}
}

// The real clocks, no simulation: a message that waited in a JetStream
// stream before a consumer existed is charged the time it waited, as the
// host's own wall clock measured it (one host, so no skew).
func TestJetStreamRealQueueTime(t *testing.T) {
	_, js := broker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "WORK", Subjects: []string{"work.>"}})
	require.NoError(t, err)

	p, err := budgetprop.New()
	require.NoError(t, err)
	run := deadline.NewContext(context.Background(), deadline.New(5*time.Second))
	msg := budgetnats.NewMsg(run, p, "work.a", []byte("a"))
	published := time.Now()
	_, err = js.PublishMsg(ctx, msg)
	require.NoError(t, err)
	sent, ok := budgetprop.FromContext(p.Extract(context.Background(), budgetnats.HeaderCarrier(msg.Header)))
	require.True(t, ok)

	<-time.After(100 * time.Millisecond) // the message waits in the stream
	waited := time.Since(published)

	cons, err := js.CreateOrUpdateConsumer(ctx, "WORK", jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	got := make(chan budgetprop.Extraction, 1)
	h, err := budgetnats.JetStreamHandler(ctx, p,
		func(ctx context.Context, msg jetstream.Msg) {
			x, _ := budgetprop.FromContext(ctx)
			got <- x
			msg.Ack()
		},
		func(msg jetstream.Msg, err error) { t.Errorf("expired: %v", err) })
	require.NoError(t, err)
	cc, err := cons.Consume(h)
	require.NoError(t, err)
	defer cc.Stop()

	x := <-got
	// Charged at least the measured wait (the expiry is whole
	// milliseconds: one of rounding), and never more than was sent.
	assert.GreaterOrEqual(t, x.QueueTime, waited.Truncate(time.Millisecond)-time.Millisecond)
	assert.LessOrEqual(t, x.Admission.Budget, sent.SentBudget-waited.Truncate(time.Millisecond)+time.Millisecond)
	assert.Greater(t, x.Admission.Budget, time.Duration(0))
}

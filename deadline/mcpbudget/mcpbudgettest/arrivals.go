package mcpbudgettest

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Arrival is what one call of a test tool saw when its handler started,
// and how its context ended, whichever SDK served it.
type Arrival struct {
	// Meta is the raw value of the request's _meta budget key, nil when
	// absent.
	Meta any
	// Left is the handler's context deadline less the handler's start; -1
	// when the context had none (HasLimit false).
	Left     time.Duration
	HasLimit bool
	// Ended receives context.Cause once the handler's context is done.
	Ended chan error
}

// WaitEnded waits for the handler's context to end and returns its cause.
// The bound, 30 s of the test's clock, only keeps a broken build from
// hanging: past it, t fails.
func (a Arrival) WaitEnded(t testing.TB) error {
	t.Helper()
	select {
	case cause := <-a.Ended:
		return cause
	case <-time.After(30 * time.Second):
		t.Fatal("the handler's context never ended")
		return nil
	}
}

// Arrivals records the calls of one test tool: an adapter's test tool
// calls [Arrivals.Arrive] first thing in its handler. The zero value is
// ready; it is safe for concurrent use.
type Arrivals struct {
	mu  sync.Mutex
	all []Arrival
}

// Arrive records a call whose handler runs with ctx and whose _meta held
// meta under the budget key (nil when absent), and returns the call's
// number, from 1.
func (r *Arrivals) Arrive(ctx context.Context, meta any) int {
	a := Arrival{Meta: meta, Left: -1, Ended: make(chan error, 1)}
	if end, ok := ctx.Deadline(); ok {
		a.Left, a.HasLimit = time.Until(end), true
	}
	context.AfterFunc(ctx, func() { a.Ended <- context.Cause(ctx) })
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = append(r.all, a)
	return len(r.all)
}

// List returns the calls recorded, in order.
func (r *Arrivals) List() []Arrival {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Arrival(nil), r.all...)
}

package budgetprop_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"

	"github.com/deadlinebudget/budget/otelbudget/budgetprop"
)

// clock is an injectable wall clock: a fixed instant moved by the test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.UnixMilli(1_764_600_000_000)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// at returns a clock function offset from c by d (a host whose clock is
// skewed by d, or a later moment).
func (c *clock) at(d time.Duration) func() time.Time {
	return func() time.Time { return c.Now().Add(d) }
}

func newProp(t *testing.T, opts ...budgetprop.Option) *budgetprop.Propagator {
	t.Helper()
	p, err := budgetprop.New(opts...)
	require.NoError(t, err)
	return p
}

// carrier builds a MapCarrier (one value per key, no ValuesGetter, as
// most message headers) from key-value pairs.
func carrier(kv ...string) propagation.MapCarrier {
	c := propagation.MapCarrier{}
	for i := 0; i+1 < len(kv); i += 2 {
		c[kv[i]] = kv[i+1]
	}
	return c
}

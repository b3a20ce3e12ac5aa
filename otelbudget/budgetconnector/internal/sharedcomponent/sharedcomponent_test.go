package sharedcomponent

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
)

// recorder is a component that counts its Starts and Shutdowns.
type recorder struct {
	starts, shutdowns int
	startErr, stopErr error
}

func (r *recorder) Start(context.Context, component.Host) error {
	r.starts++
	return r.startErr
}

func (r *recorder) Shutdown(context.Context) error {
	r.shutdowns++
	return r.stopErr
}

func TestOneInstancePerKey(t *testing.T) {
	var m Map[component.ID, *recorder]
	id, other := component.MustNewID("a"), component.MustNewIDWithName("a", "2")
	made := 0
	create := func() (*recorder, error) { made++; return &recorder{}, nil }
	c1, err := m.LoadOrStore(id, create)
	require.NoError(t, err)
	c2, err := m.LoadOrStore(id, create)
	require.NoError(t, err)
	c3, err := m.LoadOrStore(other, create)
	require.NoError(t, err)
	assert.Same(t, c1, c2)
	assert.Same(t, c1.Unwrap(), c2.Unwrap())
	assert.NotSame(t, c1.Unwrap(), c3.Unwrap())
	assert.Equal(t, 2, made)
	assert.Equal(t, 2, m.Len())
}

func TestCreateErrorStoresNothing(t *testing.T) {
	var m Map[string, *recorder]
	boom := errors.New("boom")
	_, err := m.LoadOrStore("k", func() (*recorder, error) { return nil, boom })
	require.ErrorIs(t, err, boom)
	assert.Zero(t, m.Len())
	c, err := m.LoadOrStore("k", func() (*recorder, error) { return &recorder{}, nil })
	require.NoError(t, err)
	assert.NotNil(t, c.Unwrap())
}

// Two pipelines: the first Start starts, the last Shutdown shuts down and
// forgets the instance; a new LoadOrStore makes a new one.
func TestFirstStartsLastShutsDown(t *testing.T) {
	ctx, host := context.Background(), componenttest.NewNopHost()
	var m Map[string, *recorder]
	create := func() (*recorder, error) { return &recorder{}, nil }
	a, err := m.LoadOrStore("k", create)
	require.NoError(t, err)
	b, err := m.LoadOrStore("k", create)
	require.NoError(t, err)
	r := a.Unwrap()

	require.NoError(t, a.Start(ctx, host))
	require.NoError(t, b.Start(ctx, host))
	assert.Equal(t, 1, r.starts)
	require.NoError(t, a.Shutdown(ctx))
	assert.Zero(t, r.shutdowns, "one pipeline still uses it")
	assert.Equal(t, 1, m.Len())
	require.NoError(t, b.Shutdown(ctx))
	assert.Equal(t, 1, r.shutdowns)
	assert.Zero(t, m.Len())

	require.NoError(t, b.Shutdown(ctx), "a Shutdown after the last is nil")
	assert.Equal(t, 1, r.shutdowns)
	require.ErrorIs(t, a.Start(ctx, host), ErrShutDown)

	c, err := m.LoadOrStore("k", create)
	require.NoError(t, err)
	assert.NotSame(t, r, c.Unwrap(), "a new instance after the last Shutdown")
}

// A failed Start is not counted: the error comes back, the next Start
// tries again, and one Shutdown then shuts the instance down.
func TestFailedStartNotCounted(t *testing.T) {
	ctx, host := context.Background(), componenttest.NewNopHost()
	var m Map[string, *recorder]
	boom := errors.New("no extension")
	c, err := m.LoadOrStore("k", func() (*recorder, error) { return &recorder{startErr: boom}, nil })
	require.NoError(t, err)
	r := c.Unwrap()
	require.ErrorIs(t, c.Start(ctx, host), boom)
	r.startErr = nil
	require.NoError(t, c.Start(ctx, host))
	assert.Equal(t, 2, r.starts)
	require.NoError(t, c.Shutdown(ctx))
	assert.Equal(t, 1, r.shutdowns)
}

// The Collector shuts every component down when one fails to start: a
// Shutdown with no Start shuts the instance down once, with its error.
func TestShutdownWithoutStart(t *testing.T) {
	ctx := context.Background()
	var m Map[string, *recorder]
	stop := errors.New("stop failed")
	create := func() (*recorder, error) { return &recorder{stopErr: stop}, nil }
	a, err := m.LoadOrStore("k", create)
	require.NoError(t, err)
	b, err := m.LoadOrStore("k", create)
	require.NoError(t, err)
	require.ErrorIs(t, a.Shutdown(ctx), stop)
	require.NoError(t, b.Shutdown(ctx))
	assert.Equal(t, 1, a.Unwrap().shutdowns)
	assert.Zero(t, m.Len())
}

// An instance removed and made again under its key: the old one's late
// Shutdown does not remove the new one.
func TestLateShutdownKeepsTheNewInstance(t *testing.T) {
	ctx := context.Background()
	var m Map[string, *recorder]
	create := func() (*recorder, error) { return &recorder{}, nil }
	old, err := m.LoadOrStore("k", create)
	require.NoError(t, err)
	require.NoError(t, old.Shutdown(ctx))
	fresh, err := m.LoadOrStore("k", create)
	require.NoError(t, err)
	require.NoError(t, old.Shutdown(ctx))
	again, err := m.LoadOrStore("k", create)
	require.NoError(t, err)
	assert.Same(t, fresh, again)
}

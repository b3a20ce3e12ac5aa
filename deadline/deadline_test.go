package deadline_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDeadlineValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := deadline.New(time.Second)
		end := d.End()
		assert.Equal(t, time.Second, d.Budget())
		assert.Equal(t, time.Second, d.Remaining())
		assert.False(t, d.Expired())
		assert.False(t, d.IsZero())
		assert.Equal(t, "deadline(budget 1s, 1s left)", d.String())

		time.Sleep(400 * time.Millisecond)
		c := d // a copy is the same deadline
		assert.Equal(t, 600*time.Millisecond, c.Remaining())
		assert.True(t, c.End().Equal(end), "never extended")

		time.Sleep(600 * time.Millisecond)
		assert.Equal(t, time.Duration(0), d.Remaining())
		assert.True(t, d.Expired(), "Remaining() <= 0")

		time.Sleep(500 * time.Millisecond)
		assert.Equal(t, -500*time.Millisecond, d.Remaining(), "negative after the deadline")
		assert.True(t, d.End().Equal(end))
		assert.Equal(t, time.Second, d.Budget())
	})
}

func TestDeadlineEdges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		assert.True(t, deadline.New(0).Expired())
		assert.True(t, deadline.New(-time.Second).Expired())
		assert.Equal(t, -time.Second, deadline.New(-time.Second).Remaining())

		var z deadline.Deadline
		assert.True(t, z.IsZero())
		assert.True(t, z.Expired(), "the zero Deadline has no end and reports itself expired")
		assert.Less(t, z.Remaining(), time.Duration(0))
		assert.Equal(t, "deadline(none)", z.String())

		at := deadline.At(time.Now().Add(300 * time.Millisecond))
		assert.Equal(t, 300*time.Millisecond, at.Budget())
		assert.Equal(t, 300*time.Millisecond, at.Remaining())
	})
}

func TestScope(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := deadline.New(time.Second)
		c1, cancel1 := d.Scope(context.Background())
		c2, cancel2 := d.Scope(context.Background())
		defer cancel2()
		assert.NotSame(t, c1, c2, "a new context on every call")
		dl, ok := c1.Deadline()
		require.True(t, ok)
		assert.True(t, dl.Equal(d.End()))
		cancel1()
		assert.ErrorIs(t, c1.Err(), context.Canceled)
		assert.NoError(t, c2.Err(), "releasing one scope leaves the other")

		start := time.Now()
		<-c2.Done()
		assert.Equal(t, time.Second, time.Since(start), "ends at the deadline")
		assert.Equal(t, context.DeadlineExceeded, c2.Err())
		assert.Equal(t, deadline.ErrDeadlineReached, context.Cause(c2))

		late, cancel := d.Scope(context.Background())
		defer cancel()
		assert.Equal(t, context.DeadlineExceeded, late.Err(), "a scope of an expired deadline is already done")
	})
}

func TestScopeLimit(t *testing.T) {
	cases := []struct {
		name  string
		limit time.Duration
		ends  time.Duration
		cause error
		at0   bool // done at once
	}{
		{"limit first", 100 * time.Millisecond, 100 * time.Millisecond, deadline.ErrCeilingReached, false},
		{"deadline first", 5 * time.Second, time.Second, deadline.ErrDeadlineReached, false},
		{"equal goes to the deadline", time.Second, time.Second, deadline.ErrDeadlineReached, false},
		{"zero", 0, 0, deadline.ErrCeilingReached, true},
		{"negative", -time.Second, 0, deadline.ErrCeilingReached, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d := deadline.New(time.Second)
				ctx, cancel := d.ScopeLimit(context.Background(), tc.limit)
				defer cancel()
				if tc.at0 {
					assert.Equal(t, context.DeadlineExceeded, ctx.Err(), "already done")
				}
				start := time.Now()
				<-ctx.Done()
				assert.Equal(t, tc.ends, time.Since(start))
				assert.Equal(t, context.DeadlineExceeded, ctx.Err())
				assert.Equal(t, tc.cause, context.Cause(ctx))
			})
		})
	}
}

// Nested scopes: the seed driver's "inner" and "outer" scenarios.
func TestNestedScopes(t *testing.T) {
	t.Run("shorter inner ends first", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d := deadline.New(time.Second)
			outer, cancelOuter := d.Scope(context.Background())
			defer cancelOuter()
			inner, cancelInner := d.ScopeLimit(outer, 100*time.Millisecond)
			defer cancelInner()
			start := time.Now()
			<-inner.Done()
			assert.Equal(t, 100*time.Millisecond, time.Since(start))
			assert.Equal(t, deadline.ErrCeilingReached, context.Cause(inner))
			assert.NoError(t, outer.Err(), "the outer scope is still alive")
			<-outer.Done()
			assert.Equal(t, time.Second, time.Since(start))
			assert.Equal(t, deadline.ErrDeadlineReached, context.Cause(outer))
		})
	})
	t.Run("shorter outer ends both", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d := deadline.New(time.Second)
			outer, cancelOuter := d.ScopeLimit(context.Background(), 50*time.Millisecond)
			defer cancelOuter()
			inner, cancelInner := d.ScopeLimit(outer, 100*time.Millisecond)
			defer cancelInner()
			start := time.Now()
			<-inner.Done()
			assert.Equal(t, 50*time.Millisecond, time.Since(start))
			assert.Error(t, outer.Err(), "the outer scope ended too")
			assert.Equal(t, context.DeadlineExceeded, inner.Err())
			assert.Equal(t, deadline.ErrCeilingReached, context.Cause(inner), "the outer's cause propagates")
		})
	})
	t.Run("shorter outer deadline ends an inner Call", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			outerD := deadline.New(50 * time.Millisecond)
			outer, cancel := outerD.Scope(context.Background())
			defer cancel()
			runs := 0
			start := time.Now()
			_, err := deadline.Call(outer, deadline.New(time.Second), func(ctx context.Context) (int, error) {
				runs++
				<-ctx.Done()
				return 0, ctx.Err()
			}, 3)
			assert.Equal(t, 1, runs)
			assert.Equal(t, context.DeadlineExceeded, err)
			assert.Equal(t, 50*time.Millisecond, time.Since(start), "the outer deadline ended the attempt")
		})
	})
}

func TestFromContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bg := context.Background()

		_, ok := deadline.FromContext(bg)
		assert.False(t, ok, "none")

		d := deadline.New(time.Second)
		got, ok := deadline.FromContext(deadline.NewContext(bg, d))
		require.True(t, ok)
		assert.Equal(t, d, got, "stored")

		tctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
		defer cancel()
		got, ok = deadline.FromContext(tctx)
		require.True(t, ok)
		assert.Equal(t, 200*time.Millisecond, got.Remaining(), "adopted from the context's deadline")
		assert.Equal(t, 200*time.Millisecond, got.Budget())

		got, ok = deadline.FromContext(deadline.NewContext(tctx, d))
		require.True(t, ok)
		assert.Equal(t, 200*time.Millisecond, got.Remaining(), "the context's deadline is earlier")

		short := deadline.New(50 * time.Millisecond)
		got, ok = deadline.FromContext(deadline.NewContext(tctx, short))
		require.True(t, ok)
		assert.Equal(t, short, got, "the stored deadline is earlier")

		_, has := deadline.NewContext(bg, d).Deadline()
		assert.False(t, has, "NewContext does not set a context deadline")
	})
}

// A stored zero Deadline has no end: it must not hide the context's own
// deadline, nor be reported as a deadline found.
func TestFromContextStoredZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bg := context.Background()
		_, ok := deadline.FromContext(deadline.NewContext(bg, deadline.Deadline{}))
		assert.False(t, ok, "a zero Deadline is no deadline")

		tctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
		defer cancel()
		got, ok := deadline.FromContext(deadline.NewContext(tctx, deadline.Deadline{}))
		require.True(t, ok)
		assert.False(t, got.IsZero())
		assert.Equal(t, 200*time.Millisecond, got.Remaining(), "the context's deadline is adopted")
	})
}

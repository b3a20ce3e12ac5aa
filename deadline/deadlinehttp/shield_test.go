package deadlinehttp

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShieldAfter: with WithBodyReadDeadline, net/http cancels the
// request's context when the read deadline set at the budget's end fails
// a body read; that cancellation must not reach next's context, whose own
// deadline (the same end) reports the budget's end as DeadlineExceeded. A
// client going away before the end still cancels it, with its cause.
func TestShieldAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		end := time.Now().Add(300 * time.Millisecond)
		type key struct{}

		// At or after the end: not passed on.
		parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
		ctx, release := shieldAfter(parent, end)
		assert.Equal(t, "v", ctx.Value(key{}), "values are parent's")
		time.Sleep(300 * time.Millisecond)
		cancelParent()
		synctest.Wait()
		assert.NoError(t, ctx.Err(), "a cancellation at the end is the budget's, reported by the scope's deadline")
		release()
		assert.ErrorIs(t, ctx.Err(), context.Canceled, "released")

		// Before the end: passed on, with its cause.
		gone := errors.New("client went away")
		parent2, cancelParent2 := context.WithCancelCause(context.Background())
		ctx2, release2 := shieldAfter(parent2, time.Now().Add(300*time.Millisecond))
		defer release2()
		time.Sleep(100 * time.Millisecond)
		cancelParent2(gone)
		synctest.Wait()
		require.ErrorIs(t, ctx2.Err(), context.Canceled)
		assert.ErrorIs(t, context.Cause(ctx2), gone)
	})
}

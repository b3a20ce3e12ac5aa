package deadline_test

import (
	"context"
	"testing"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/stretchr/testify/assert"
)

// With no observer, Do's success path allocates nothing beyond the attempt's
// context: no more than a bare context.WithDeadline, call and cancel.
func TestDoAllocatesOnlyTheAttemptContext(t *testing.T) {
	ctx := context.Background()
	end := time.Now().Add(time.Hour)
	op := func(ctx context.Context) (int, error) { return 1, ctx.Err() }
	bare := testing.AllocsPerRun(200, func() {
		actx, cancel := context.WithDeadline(ctx, end)
		_, _ = op(actx)
		cancel()
	})
	d := deadline.New(time.Hour)
	p := deadline.DefaultPolicy()
	p.AttemptTimeout = time.Minute
	dop := func(ctx context.Context, _ deadline.AttemptInfo) (int, error) { return 1, ctx.Err() }
	do := testing.AllocsPerRun(200, func() {
		_, _ = deadline.Do(ctx, d, p, dop)
	})
	assert.LessOrEqual(t, do, bare, "Do allocates %v per call, a bare WithDeadline %v", do, bare)
}

package deadline_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/stretchr/testify/assert"
)

// TestSharedDeadlineConcurrent has 64 goroutines share one Deadline (and one
// Policy with hooks) through Call and Do at once; run it with -race.
func TestSharedDeadlineConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := deadline.New(time.Second)
		var ends atomic.Int64
		p := policy(3, 100*time.Millisecond, 20*time.Millisecond)
		p.Backoff = deadline.Backoff{Base: time.Millisecond, Max: 4 * time.Millisecond}
		p.Hooks = &deadline.Hooks{CallEnd: func(context.Context, deadline.CallResult) { ends.Add(1) }}
		const n = 64
		results := make([]int, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				tries := 0
				if i%2 == 0 {
					results[i], errs[i] = deadline.Call(context.Background(), d, func(ctx context.Context) (int, error) {
						tries++
						time.Sleep(time.Duration(i) * time.Millisecond)
						if tries < 2 {
							return 0, deadline.Retryable(errFlaky)
						}
						return i, ctx.Err()
					}, 3)
					return
				}
				results[i], errs[i] = deadline.Do(context.Background(), d, p, func(ctx context.Context, a deadline.AttemptInfo) (int, error) {
					time.Sleep(time.Duration(i) * time.Millisecond)
					if a.Number < 2 {
						return 0, deadline.Retryable(errFlaky)
					}
					return i, ctx.Err()
				})
			})
		}
		wg.Wait()
		for i := range n {
			assert.NoError(t, errs[i], "goroutine %d", i)
			assert.Equal(t, i, results[i])
		}
		assert.Equal(t, int64(n/2), ends.Load(), "one CallEnd per Do")
	})
}

// TestSharedDeadlineConcurrentRealTime is the same sharing on the real
// scheduler and clock (ops return at once; no duration is asserted).
func TestSharedDeadlineConcurrentRealTime(t *testing.T) {
	d := deadline.New(time.Minute)
	p := policy(3, 0, 0)
	var wg sync.WaitGroup
	var good atomic.Int64
	for i := range 64 {
		wg.Go(func() {
			var v int
			var err error
			if i%2 == 0 {
				v, err = deadline.Call(context.Background(), d, func(context.Context) (int, error) { return i, nil }, 1)
			} else {
				v, err = deadline.Do(context.Background(), d, p, func(_ context.Context, a deadline.AttemptInfo) (int, error) { return i + a.Number - 1, nil })
			}
			if err == nil && v == i {
				good.Add(1)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(64), good.Load())
}

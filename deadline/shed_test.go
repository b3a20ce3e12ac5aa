package deadline_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/overload"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestShedMarks(t *testing.T) {
	assert.NoError(t, deadline.Shed(nil))
	base := deadline.Retryable(errFlaky)
	err := deadline.Shed(base)
	assert.ErrorIs(t, err, deadline.ErrOverloaded, "a shed is an overload answer")
	assert.ErrorIs(t, err, errFlaky)
	assert.True(t, deadline.IsRetryable(err))
	assert.Equal(t, base.Error(), err.Error())
}

// TestShedIsNotThrottled: answers that shed the call from the server's
// standing queue ([deadline.Shed]) are not counted by client-side
// throttling, where the same answers marked Overloaded make it drop
// nearly every attempt; the limiter still takes them as overload (its
// breaker does not open).
func TestShedIsNotThrottled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mark    func(error) error
		dropped bool
	}{
		{"overloaded", deadline.Overloaded, true},
		{"shed", deadline.Shed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, err := overload.NewThrottle()
				require.NoError(t, err)
				l, err := overload.NewLimiter(overload.WithBreaker())
				require.NoError(t, err)
				p := deadline.Policy{MaxAttempts: 1, Throttle: b, Limiter: l, Rand: func(n int64) int64 { return n / 2 }} // draws 0.5
				sent, throttled := 0, 0
				for range 100 {
					_, err := deadline.Do(context.Background(), deadline.New(time.Second), p, func(context.Context, deadline.AttemptInfo) (string, error) {
						sent++
						return "", tc.mark(errors.New("503"))
					})
					require.Error(t, err)
					if errors.Is(err, deadline.ErrThrottled) {
						throttled++
					} else {
						assert.ErrorIs(t, err, deadline.ErrOverloaded)
					}
					time.Sleep(10 * time.Millisecond)
				}
				if tc.dropped {
					assert.Less(t, sent, 10)
					assert.Greater(t, b.DropProbability(), 0.5)
					return
				}
				assert.Equal(t, 100, sent, "every attempt went out")
				assert.Zero(t, throttled)
				assert.Zero(t, b.DropProbability())
				assert.Equal(t, "closed", fmt.Sprint(l.Breaker().State()), "an overload answer is no failure for the breaker")
			})
		})
	}
}

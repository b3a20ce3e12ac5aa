package ring

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestCountsSlide: counts stay for a window and leave a bucket at a time;
// an undo never goes below zero nor reaches a bucket that moved on; a
// count saturates; Reset empties.
func TestCountsSlide(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewClock(time.Second)
		assert.True(t, c.Valid())
		assert.False(t, Clock{}.Valid())
		assert.Equal(t, 100*time.Millisecond, c.Bucket())
		var r Counts
		r.Add(c.Epoch(), 3)
		time.Sleep(500 * time.Millisecond)
		r.Add(c.Epoch(), 2)
		assert.Equal(t, uint64(5), r.Sum(c.Epoch()))
		time.Sleep(500 * time.Millisecond) // the first bucket leaves
		assert.Equal(t, uint64(2), r.Sum(c.Epoch()))
		r.Add(c.Epoch(), -5)
		assert.Equal(t, uint64(2), r.Sum(c.Epoch()), "an undo in an empty bucket takes nothing below zero")
		e := c.Epoch()
		r.Add(e, 1)
		r.Add(e, -1)
		assert.Equal(t, uint64(2), r.Sum(e))
		r.Add(e, math.MaxInt)
		assert.Equal(t, uint64(math.MaxUint32)+2, r.Sum(e), "the bucket saturates at 2³²−1")
		r.Reset()
		assert.Zero(t, r.Sum(e))
	})
}

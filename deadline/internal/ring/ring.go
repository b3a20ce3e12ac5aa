// Package ring is the lock-free sliding window of counts that the retry
// budget, the throttle and the breaker share: a window divided into
// [Buckets] time buckets, each an atomic word holding its epoch (the
// bucket's number since the window's origin) and its count, so that counts
// leave the window a bucket at a time and a count is a clock read and a
// compare-and-swap, with no lock and no allocation.
package ring

import (
	"math"
	"sync/atomic"
	"time"
)

// Buckets is how many time buckets a window is divided into: counts leave
// it one bucket (a tenth of the window) at a time.
const Buckets = 10

// Clock numbers a window's buckets: the epoch of an instant is the number
// of whole buckets since the origin, on the monotonic clock.
type Clock struct {
	origin time.Time
	bucket time.Duration
}

// NewClock returns the clock of a window of the given length (> 0) whose
// origin is now: built inside a testing/synctest bubble, it runs on the
// bubble's clock.
func NewClock(window time.Duration) Clock {
	return Clock{origin: time.Now(), bucket: max(window/Buckets, 1)}
}

// Valid reports whether c was built by NewClock.
func (c Clock) Valid() bool { return c.bucket > 0 }

// Bucket returns the length of one bucket.
func (c Clock) Bucket() time.Duration { return c.bucket }

// Epoch is the number of the current bucket since the origin, truncated to
// 32 bits: after 2³² buckets (136 years of 1s buckets, 50 days of 1ms ones)
// a bucket idle for exactly that long would be counted again, for at most a
// window. A clock behind the origin (a window built outside a
// testing/synctest bubble and used inside it) counts as the origin.
func (c Clock) Epoch() uint32 {
	return uint32(max(time.Since(c.origin), 0) / c.bucket)
}

// Counts is one count over a sliding window: a ring of buckets. The zero
// Counts is empty.
type Counts [Buckets]atomic.Uint64 // epoch<<32 | count

// Sum returns the count of the window ending in bucket e.
func (r *Counts) Sum(e uint32) uint64 {
	var n uint64
	for i := range r {
		n += count(r[i].Load(), e)
	}
	return n
}

// count is the count a bucket word holds if its epoch is within the window
// ending at epoch e, else 0.
func count(w uint64, e uint32) uint64 {
	if e-uint32(w>>32) < Buckets {
		return w & math.MaxUint32
	}
	return 0
}

// staleWriter bounds how far behind the bucket's epoch a writer may be for
// Add to drop its count rather than reset the bucket: far enough for a
// goroutine descheduled across a window, far below 2³¹ so that a bucket
// idle for that many epochs (25 days of 1ms buckets) is reset, not frozen.
const staleWriter = 1 << 16

// Add adds delta to the count of bucket e, the bucket being reset first if
// it still holds an older epoch. A negative delta (an undo) does nothing
// once the bucket has moved on, and never takes the count below 0; the
// count saturates at 2³²−1.
func (r *Counts) Add(e uint32, delta int) {
	slot := &r[e%Buckets]
	for {
		w := slot.Load()
		var c uint64
		switch we := uint32(w >> 32); {
		case we == e:
			c = w & math.MaxUint32
		case delta < 0 || we-e < staleWriter:
			// An undo after the bucket moved on, or a writer that read the
			// clock a whole window ago and finds its bucket already reused
			// for a later epoch: the count it meant has expired.
			return
		}
		switch {
		case delta < 0:
			c -= min(c, uint64(-delta))
		default:
			c = min(c+uint64(delta), math.MaxUint32)
		}
		if slot.CompareAndSwap(w, uint64(e)<<32|c) {
			return
		}
	}
}

// Reset empties every bucket. A count added while it runs may survive it.
func (r *Counts) Reset() {
	for i := range r {
		r[i].Store(0)
	}
}

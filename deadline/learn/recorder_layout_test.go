package learn

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"

	"github.com/deadlinebudget/budget/deadline"
)

// The fields of a series that every recording writes do not share a cache
// line with those it only reads, nor with one another's shards, and the
// series still fits the heap size class it had before sharding (9472
// bytes, the next above 8192), so that sharding costs no memory.
func TestSeriesLayoutSeparatesHotFields(t *testing.T) {
	var s series
	assert.EqualValues(t, cacheLine, unsafe.Sizeof(kindCounts{}), "a shard is one cache line")
	assert.EqualValues(t, cacheLine, unsafe.Offsetof(s.kinds), "the read-mostly fields fill the first line alone")
	assert.Zero(t, unsafe.Offsetof(s.completed)%cacheLine, "the buckets start a line")
	assert.LessOrEqual(t, unsafe.Sizeof(s), uintptr(9472), "a series fits the 9472-byte size class")
}

// shard spreads goroutines over every shard, evenly, whether their stacks
// are the smallest (8 KiB, adjacent) or grown to 16 or 32 KiB.
func TestShardSpreadsGoroutines(t *testing.T) {
	const base = uintptr(0xc000100000) + 0x1f38 // a stack block, and a frame's offset in it
	for _, size := range []uintptr{8 << 10, 16 << 10, 32 << 10} {
		var n [shards]int
		const stacks = 8192
		for i := range uintptr(stacks) {
			n[shard(base+i*size)]++
		}
		for k, c := range n {
			assert.InDelta(t, stacks/shards, c, stacks/shards/4, "%d-byte stacks: shard %d got %d of %d", size, k, c, stacks)
		}
	}
}

// The recordings of one goroutine add to one shard, so that the shard's
// cache line stays with the core that runs it, whatever the durations and
// end times.
func TestRecordingsOfAGoroutineKeepToOneShard(t *testing.T) {
	var s series
	const n = 10000
	start := time.Unix(1_700_000_000, 123_456_789).UnixNano()
	for i := range int64(n) {
		s.add(deadline.EndedCompleted, time.Duration(i)*time.Microsecond, start+i*int64(time.Microsecond)+i%7)
	}
	var most uint64
	for i := range s.kinds {
		most = max(most, s.kinds[i].successes.Load())
	}
	// All of them but for the rare move of the stack by the runtime.
	assert.GreaterOrEqual(t, most, uint64(n*99/100))
	assert.EqualValues(t, n, s.histogram().Successes, "the shards sum to every recording")
}

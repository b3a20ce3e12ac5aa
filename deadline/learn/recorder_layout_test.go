package learn

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
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

// shard spreads recordings over every shard, evenly, both for attempts
// ending at consecutive nanoseconds and for durations that are round
// multiples (as BenchmarkRecordParallel's are) from one start.
func TestShardSpreadsRecordings(t *testing.T) {
	start := time.Unix(1_700_000_000, 123_456_789).UnixNano()
	for _, step := range []int64{1, int64(time.Microsecond), 100 * int64(time.Microsecond), int64(time.Millisecond)} {
		var n [shards]int
		const samples = 8192
		for i := range int64(samples) {
			n[shard(start+i*step)]++
		}
		for k, c := range n {
			assert.InDelta(t, samples/shards, c, samples/shards/4, "step %d: shard %d got %d of %d", step, k, c, samples)
		}
	}
}

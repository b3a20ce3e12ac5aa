package learn

import (
	"math"
	"time"
)

// The sketch is OpenTelemetry's base-2 exponential histogram at the fixed
// scale [Scale]: bucket index i holds the durations d (in nanoseconds) with
// base^i < d <= base^(i+1), base = 2^(2^-Scale). Only the indexes from
// [MinIndex] to [MaxIndex] are kept; shorter durations (0 included) go to
// one underflow bucket and longer ones to one overflow bucket, so the memory
// per histogram is fixed.
const (
	// Scale is the exponential histogram scale: 2^5 = 32 buckets per
	// doubling, base 2^(1/32) ≈ 1.0219, so a bucket's representative value
	// is within [RelativeError] of every duration in it.
	Scale = 5
	// MinIndex is the first bucket kept: (2^10 ns, 2^(10+1/32) ns], just
	// above 1.024µs. Durations <= 1.024µs are in the underflow bucket.
	MinIndex = minExp << Scale
	// MaxIndex is the last bucket kept, ending at 2^44 ns (about 4h53m).
	// Longer durations are in the overflow bucket.
	MaxIndex = maxExp<<Scale - 1
	// RelativeError bounds the relative error of a duration read back from
	// a kept bucket: (base-1)/(base+1) with base = 2^(1/32), about 1.08%.
	RelativeError = 0.010830
	// Underflow is the largest duration of the underflow bucket; a quantile
	// that falls in it is reported as Underflow.
	Underflow = time.Duration(1) << minExp
	// Overflow is the smallest duration above the overflow bucket's lower
	// bound; a quantile that falls in the overflow bucket is reported as
	// the largest duration recorded.
	Overflow = time.Duration(1) << maxExp
)

const (
	minExp = 10
	maxExp = 44
	// slots is the number of counters per histogram: the kept buckets,
	// then the underflow and the overflow bucket.
	slots     = MaxIndex - MinIndex + 1 + 2
	underSlot = slots - 2
	overSlot  = slots - 1
)

// BucketIndex returns the OpenTelemetry exponential-histogram index of d at
// [Scale]: the i with base^i < d <= base^(i+1) nanoseconds. d <= 0 returns
// math.MinInt32 (the zero bucket). Exact powers of two are placed exactly,
// as the OpenTelemetry SDK places them.
func BucketIndex(d time.Duration) int32 {
	if d <= 0 {
		return math.MinInt32
	}
	// d = 2^exp · (1 + m/2^52), exactly (d < 2^63). The index is
	// exp·32 + j with 2^(j/32) < 1 + m/2^52 <= 2^((j+1)/32): j counts the
	// sub-bucket boundaries below the mantissa. A table on the mantissa's
	// top bits gives j but for at most one boundary inside the cell, as
	// boundaries are further apart than a cell; an exact power of two is
	// the top of the bucket below. No logarithm: this is the hot path.
	b := math.Float64bits(float64(d))
	exp := int32(b>>mantBits) - 1023
	m := b & (1<<mantBits - 1)
	if m == 0 {
		return exp<<Scale - 1
	}
	j := subStart[m>>(mantBits-cellBits)]
	if j < 1<<Scale-1 && subBound[j+1] < m {
		j++
	}
	return exp<<Scale + int32(j)
}

const (
	mantBits = 52
	cellBits = 8 // 256 cells of 1/256 of an octave; boundaries are >= 1/46 apart
)

// subBound[k] is the mantissa of 2^(k/32); subStart[c] counts the
// boundaries k >= 1 below the start of mantissa cell c.
var subBound, subStart = subTables()

func subTables() (bound [1 << Scale]uint64, start [1 << cellBits]uint8) {
	for k := range bound {
		bound[k] = uint64(math.Round((math.Exp2(float64(k)/(1<<Scale)) - 1) * (1 << mantBits)))
	}
	for c := range start {
		lo := uint64(c) << (mantBits - cellBits)
		for k := 1; k < len(bound) && bound[k] < lo; k++ {
			start[c] = uint8(k)
		}
	}
	return bound, start
}

// BucketBounds returns the bounds (lower, upper] of bucket index i at
// [Scale], in nanoseconds as float64 (they are rarely whole).
func BucketBounds(i int32) (lower, upper float64) {
	return math.Exp2(float64(i) / (1 << Scale)), math.Exp2(float64(i+1) / (1 << Scale))
}

// slot returns the counter of d.
func slot(d time.Duration) int {
	if d <= Underflow {
		return underSlot
	}
	if d > Overflow {
		return overSlot
	}
	return int(BucketIndex(d)) - MinIndex
}

// order lists the slots from the shortest durations to the longest.
func order(k int) int {
	switch k {
	case 0:
		return underSlot
	case slots - 1:
		return overSlot
	}
	return k - 1
}

// value returns the duration a kept bucket stands for: the point of
// (lower, upper] with the same relative distance to both bounds,
// 2·lower·upper/(lower+upper), whose relative error is RelativeError.
func value(s int) time.Duration {
	lo, hi := BucketBounds(int32(s + MinIndex))
	return time.Duration(math.Round(2 * lo * hi / (lo + hi)))
}

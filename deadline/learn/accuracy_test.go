package learn_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// distributions of attempt durations, in nanoseconds, each drawn from a
// seeded source.
var distributions = []struct {
	name string
	draw func(r *rand.Rand) float64
}{
	{"uniform 1ms-1s", func(r *rand.Rand) float64 { return 1e6 + r.Float64()*(1e9-1e6) }},
	{"log-normal median 50ms σ=1", func(r *rand.Rand) float64 { return 50e6 * math.Exp(r.NormFloat64()) }},
	{"Pareto 10ms α=1.5", func(r *rand.Rand) float64 { return 10e6 / math.Pow(1-r.Float64(), 1/1.5) }},
}

// The sketch's quantiles are within 2% of an exact sort of 1 000 000
// samples, for p50, p90, p99 and p99.9 of three distributions.
func TestQuantileWithin2PercentOfExactSort(t *testing.T) {
	const n = 1_000_000
	at := time.Unix(1_700_000_000, 0)
	for i, dist := range distributions {
		t.Run(dist.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(42, uint64(i)))
			var rec learn.Recorder
			exact := make([]time.Duration, n)
			for j := range exact {
				d := time.Duration(dist.draw(r))
				exact[j] = d
				rec.Record("step", deadline.EndedCompleted, d, at)
			}
			slices.Sort(exact)
			h := rec.Snapshot().Steps["step"]
			require.EqualValues(t, n, h.Samples)
			for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
				want := exact[int(math.Ceil(q*n-1e-9))-1] // the smallest t with F(t) >= q
				got, err := h.Quantile(q)
				require.NoError(t, err)
				rel := math.Abs(float64(got-want)) / float64(want)
				assert.LessOrEqual(t, rel, 0.02, "p%v: sketch %s, exact %s", q*100, got, want)
				assert.LessOrEqual(t, rel, learn.RelativeError+1e-6, "p%v: sketch %s, exact %s: beyond the bucket bound", q*100, got, want)
			}
		})
	}
}

// Every bucket's representative value is within RelativeError of both of
// its bounds, and BucketIndex places a duration in the bucket whose bounds
// hold it, exact powers of two at the top of the bucket below.
func TestBucketLayoutIsOpenTelemetrys(t *testing.T) {
	assert.EqualValues(t, learn.MinIndex-1, learn.BucketIndex(1<<10), "2^10 ns ends bucket 319")
	assert.EqualValues(t, learn.MinIndex, learn.BucketIndex(1<<10+1))
	assert.EqualValues(t, learn.MaxIndex, learn.BucketIndex(1<<44))
	assert.EqualValues(t, math.MinInt32, learn.BucketIndex(0))
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		d := time.Duration(math.Exp(r.Float64() * math.Log(1<<44)))
		lo, hi := learn.BucketBounds(learn.BucketIndex(d))
		assert.True(t, float64(d) > lo*(1-1e-12) && float64(d) <= hi*(1+1e-12), "%d not in (%v, %v]", d, lo, hi)
	}
}

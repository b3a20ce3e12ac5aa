package learn_test

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/learn"
)

// histogramOf records the attempts of data: each 9 bytes, an ended_by
// (mod 6, so canceled and panics come up) and a duration in nanoseconds
// spread from below the underflow to above the overflow.
func histogramOf(data []byte) learn.Histogram {
	var h learn.Histogram
	for i := 0; i+9 <= len(data); i += 9 {
		ended := deadline.EndedBy(1 + int(data[i])%6)
		raw := binary.LittleEndian.Uint64(data[i+1 : i+9])
		// Durations log-uniform over 2^0 … 2^50 ns, some negative.
		d := time.Duration(raw >> (14 + raw%50))
		if raw%97 == 0 {
			d = -d
		}
		h.Add(ended, d, t0.Add(time.Duration(raw%1e6)*time.Millisecond))
	}
	return h
}

// rebuilt returns a histogram with h's counters and h's series set.
func rebuilt(t *testing.T, h *learn.Histogram) learn.Histogram {
	t.Helper()
	c, x := h.Series()
	// The counters alone, the buckets empty: SetSeries fills them.
	out := learn.Histogram{Samples: h.Samples, Successes: h.Successes, CeilingTimeouts: h.CeilingTimeouts, DeadlineCuts: h.DeadlineCuts,
		First: h.First, Last: h.Last, Max: h.Max, MaxCensored: h.MaxCensored}
	require.NoError(t, out.SetSeries(c, x))
	return out
}

func TestSeriesRoundTrip(t *testing.T) {
	var h learn.Histogram
	h.Add(deadline.EndedCompleted, 0, t0)                                // underflow
	h.Add(deadline.EndedCompleted, 30*time.Millisecond, t0)              // kept
	h.Add(deadline.EndedError, 31*time.Millisecond, t0.Add(time.Second)) // kept, error
	h.Add(deadline.EndedCompleted, 6*time.Hour, t0)                      // overflow
	h.Add(deadline.EndedAttemptTimeout, 100*time.Millisecond, t0)
	h.Add(deadline.EndedDeadline, 80*time.Millisecond, t0)
	c, x := h.Series()
	assert.Equal(t, uint64(1), c.Underflow)
	assert.Equal(t, uint64(1), c.Overflow)
	assert.Equal(t, learn.BucketIndex(30*time.Millisecond), c.Offset)
	assert.Equal(t, uint64(2), c.Counts[0]+c.Counts[len(c.Counts)-1], "30ms and 31ms")
	assert.Equal(t, uint64(4), c.Total())
	assert.Equal(t, learn.BucketIndex(80*time.Millisecond), x.Offset)
	assert.Equal(t, uint64(2), x.Total())
	assert.NotZero(t, x.Counts[0])
	assert.NotZero(t, x.Counts[len(x.Counts)-1])

	got := rebuilt(t, &h)
	assert.Equal(t, h, got)
	for _, q := range []float64{0.1, 0.5, 0.6} {
		a, errA := h.Quantile(q)
		b, errB := got.Quantile(q)
		assert.Equal(t, a, b)
		assert.Equal(t, errA, errB)
	}

	// The slices are copies.
	c.Counts[0] = 99
	c2, _ := h.Series()
	assert.Equal(t, uint64(1), c2.Counts[0])

	var empty learn.Histogram
	ec, ex := empty.Series()
	assert.Equal(t, learn.Series{}, ec)
	assert.Equal(t, learn.Series{}, ex)
	assert.NoError(t, empty.SetSeries(ec, ex))
}

func TestSetSeriesRefuses(t *testing.T) {
	var h learn.Histogram
	h.Add(deadline.EndedCompleted, 30*time.Millisecond, t0)
	h.Add(deadline.EndedAttemptTimeout, 100*time.Millisecond, t0.Add(time.Second))
	c, x := h.Series()
	bad := func(mod func(h *learn.Histogram, c, x *learn.Series), field string) {
		t.Helper()
		hh := h
		cc, xx := c, x
		cc.Counts, xx.Counts = append([]uint64(nil), c.Counts...), append([]uint64(nil), x.Counts...)
		mod(&hh, &cc, &xx)
		before := hh
		err := hh.SetSeries(cc, xx)
		var oe *learn.OptionError
		require.True(t, errors.As(err, &oe), "%s: %v", field, err)
		assert.Equal(t, field, oe.Field)
		assert.Equal(t, before, hh, "a refused series leaves the histogram as it was")
	}
	bad(func(_ *learn.Histogram, c, _ *learn.Series) { c.Offset = learn.MinIndex - 1 }, "completed series buckets")
	bad(func(_ *learn.Histogram, _, x *learn.Series) { x.Offset = learn.MaxIndex + 1 }, "censored series buckets")
	bad(func(_ *learn.Histogram, c, _ *learn.Series) { c.Counts[0]++ }, "completed series total")
	bad(func(_ *learn.Histogram, _, x *learn.Series) { x.Underflow++ }, "censored series total")
	bad(func(h *learn.Histogram, _, _ *learn.Series) { h.Successes = 2 }, "Histogram.Successes")
	bad(func(h *learn.Histogram, _, _ *learn.Series) { h.Max = time.Second }, "Histogram.Max")
	bad(func(h *learn.Histogram, _, _ *learn.Series) { h.Max = -1 }, "Histogram.Max")
	bad(func(h *learn.Histogram, _, _ *learn.Series) { h.MaxCensored = time.Millisecond }, "Histogram.MaxCensored")
	bad(func(h *learn.Histogram, _, _ *learn.Series) { h.First, h.Last = h.Last, h.First }, "Histogram.Last")
	bad(func(h *learn.Histogram, _, _ *learn.Series) { h.CeilingTimeouts, h.DeadlineCuts = math.MaxUint64, 1 }, "Histogram.CeilingTimeouts + DeadlineCuts")
	bad(func(_ *learn.Histogram, c, _ *learn.Series) { c.Overflow = math.MaxUint64 }, "completed series total")
	bad(func(h *learn.Histogram, c, x *learn.Series) {
		*h = learn.Histogram{First: t0}
		*c, *x = learn.Series{}, learn.Series{}
	}, "Histogram.First/Last")
}

// Merging two histograms and rebuilding them from their series commute:
// the merge tier's exactness rests on it.
func TestSeriesMergeExact(t *testing.T) {
	a := histogramOf([]byte("the first half of the attempts, some cut, some overflowing the sketch!!"))
	b := histogramOf([]byte("and the second half, recorded by another instance, on another machine."))
	var all learn.Histogram
	all.Merge(&a)
	all.Merge(&b)
	ra, rb := rebuilt(t, &a), rebuilt(t, &b)
	var merged learn.Histogram
	merged.Merge(&ra)
	merged.Merge(&rb)
	assert.Equal(t, all, merged)
}

// FuzzSeries: a histogram recorded from any attempts comes back from its
// series unchanged; any series SetSeries is given either is refused with an
// *OptionError, leaving the histogram as it was, or gives back exactly
// what it was given.
func FuzzSeries(f *testing.F) {
	f.Add([]byte("seed: a few attempts of every kind, long and short ....."), int32(learn.MinIndex), uint64(3))
	f.Add([]byte{}, int32(0), uint64(0))
	f.Add([]byte{3, 255, 255, 255, 255, 255, 255, 255, 127}, int32(learn.MaxIndex), uint64(1))
	f.Fuzz(func(t *testing.T, data []byte, offset int32, extra uint64) {
		h := histogramOf(data)
		require.Equal(t, h, rebuilt(t, &h))

		// Arbitrary series: from data's bytes, with the counters they add
		// up to (sometimes off by extra).
		var c, x learn.Series
		c.Offset, x.Offset = offset, offset+int32(extra%64)
		for i, b := range data {
			if i%2 == 0 {
				c.Counts = append(c.Counts, uint64(b))
			} else {
				x.Counts = append(x.Counts, uint64(b)%3)
			}
		}
		c.Underflow, x.Overflow = extra%5, extra%7
		var g learn.Histogram
		g.CeilingTimeouts = x.Total()
		g.Samples = c.Total() + x.Total() + extra%2
		g.Successes = c.Total() / 2
		g.Max, g.MaxCensored = time.Duration(extra), time.Duration(extra>>3)
		before := g
		if err := g.SetSeries(c, x); err != nil {
			var oe *learn.OptionError
			require.ErrorAs(t, err, &oe)
			require.Equal(t, before, g)
			return
		}
		gc, gx := g.Series()
		requireSameSeries(t, c, gc)
		requireSameSeries(t, x, gx)
		require.Equal(t, g, rebuilt(t, &g))
	})
}

// requireSameSeries checks that got holds want's counts, trimmed.
func requireSameSeries(t *testing.T, want, got learn.Series) {
	t.Helper()
	require.Equal(t, want.Underflow, got.Underflow)
	require.Equal(t, want.Overflow, got.Overflow)
	require.Equal(t, want.Total(), got.Total())
	for i, n := range want.Counts {
		idx := want.Offset + int32(i)
		var g uint64
		if j := int(idx - got.Offset); j >= 0 && j < len(got.Counts) {
			g = got.Counts[j]
		}
		require.Equal(t, n, g, "bucket %d", idx)
	}
}

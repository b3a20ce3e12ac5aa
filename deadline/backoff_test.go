package deadline_test

import (
	"math"
	"testing"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/stretchr/testify/assert"
)

func TestBackoffDelay(t *testing.T) {
	ms := time.Millisecond
	b := deadline.Backoff{Base: 50 * ms, Max: 400 * ms}
	with := func(j deadline.Jitter) deadline.Backoff { c := b; c.Jitter = j; return c }
	cases := []struct {
		name  string
		b     deadline.Backoff
		n     int
		rnd   func(int64) int64
		want  time.Duration
		bound int64 // the n passed to rnd; 0: rnd not called
	}{
		{"full, first retry, top", b, 1, maxRand, 50 * ms, int64(50*ms) + 1},
		{"full, first retry, zero", b, 1, zeroRand, 0, int64(50*ms) + 1},
		{"full doubles", b, 2, maxRand, 100 * ms, int64(100*ms) + 1},
		{"full doubles again", b, 3, maxRand, 200 * ms, int64(200*ms) + 1},
		{"full reaches max", b, 4, maxRand, 400 * ms, int64(400*ms) + 1},
		{"full capped", b, 5, maxRand, 400 * ms, int64(400*ms) + 1},
		{"full capped far out", b, math.MaxInt, maxRand, 400 * ms, int64(400*ms) + 1},
		{"n < 1 is 1", b, 0, maxRand, 50 * ms, int64(50*ms) + 1},
		{"negative n is 1", b, -7, maxRand, 50 * ms, int64(50*ms) + 1},
		{"equal, zero draw is half", with(deadline.JitterEqual), 1, zeroRand, 25 * ms, int64(25*ms) + 1},
		{"equal, top draw is the cap", with(deadline.JitterEqual), 3, maxRand, 200 * ms, int64(100*ms) + 1},
		{"none is the cap", with(deadline.JitterNone), 2, nil, 100 * ms, 0},
		{"none capped", with(deadline.JitterNone), 9, nil, 400 * ms, 0},
		{"zero backoff", deadline.Backoff{}, 3, nil, 0, 0},
		{"out-of-range draw is clamped to max", b, 1, func(int64) int64 { return math.MaxInt64 }, 400 * ms, int64(50*ms) + 1},
		{"negative draw is clamped to zero", b, 1, func(int64) int64 { return -5 }, 0, int64(50*ms) + 1},
		{"huge base does not overflow", deadline.Backoff{Base: math.MaxInt64 / 2, Max: math.MaxInt64}, 5, maxRand, math.MaxInt64 - 1, math.MaxInt64},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got int64
			rnd := tc.rnd
			if rnd != nil {
				inner := rnd
				rnd = func(n int64) int64 { got = n; return inner(n) }
			}
			assert.Equal(t, tc.want, tc.b.Delay(tc.n, rnd))
			assert.Equal(t, tc.bound, got, "bound passed to Rand")
		})
	}
}

func TestBackoffDelayGlobalSource(t *testing.T) {
	b := deadline.Backoff{Base: time.Millisecond, Max: 8 * time.Millisecond}
	for n := range 50 {
		d := b.Delay(n, nil)
		assert.GreaterOrEqual(t, d, time.Duration(0))
		assert.LessOrEqual(t, d, min(8*time.Millisecond, time.Millisecond<<min(max(n-1, 0), 10)))
	}
}

func TestJitterString(t *testing.T) {
	assert.Equal(t, "full", deadline.JitterFull.String())
	assert.Equal(t, "equal", deadline.JitterEqual.String())
	assert.Equal(t, "none", deadline.JitterNone.String())
	assert.Equal(t, "jitter(9)", deadline.Jitter(9).String(), "the value, so that an error can show it")
}

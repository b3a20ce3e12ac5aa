package deadline

import (
	"math"
	"math/rand/v2"
	"strconv"
	"time"
)

// Jitter chooses how a backoff delay is randomised below its exponential cap.
type Jitter uint8

const (
	// JitterFull sleeps uniformly in [0, cap]: the default, and the AWS
	// Builders' Library recommendation, so that clients that failed together
	// do not retry together.
	JitterFull Jitter = iota
	// JitterEqual sleeps uniformly in [cap/2, cap].
	JitterEqual
	// JitterNone sleeps exactly cap.
	JitterNone
)

// String returns "full", "equal" or "none", and "jitter(N)" for a value
// that is none of them.
func (j Jitter) String() string {
	switch j {
	case JitterFull:
		return "full"
	case JitterEqual:
		return "equal"
	case JitterNone:
		return "none"
	}
	return "jitter(" + strconv.Itoa(int(j)) + ")"
}

// Backoff is an exponential backoff with jitter. The zero Backoff never
// sleeps: retries follow at once.
//
// Before retry n (n = 1 after the first failed attempt) the cap is
// min(Max, Base·2^(n-1)); the delay is drawn below that cap by Jitter and
// never exceeds Max. A Backoff is a value: it holds no state and can be
// shared by any number of goroutines.
type Backoff struct {
	Base   time.Duration // first cap; >= 0
	Max    time.Duration // largest delay; >= Base
	Jitter Jitter        // JitterFull by default
}

// Delay returns the sleep before retry n (n >= 1) drawn with rnd, which
// returns a uniform value in [0, n) like rand.Int64N; nil uses the
// concurrency-safe global source of math/rand/v2. The result is always in
// [0, Max]; n < 1 is treated as 1.
func (b Backoff) Delay(n int, rnd func(int64) int64) time.Duration {
	if b.Base <= 0 || b.Max <= 0 {
		return 0
	}
	c := b.Base
	for i := 1; i < n && c < b.Max; i++ {
		c <<= 1
		if c <= 0 { // overflow
			c = b.Max
		}
	}
	c = min(c, b.Max)
	if rnd == nil {
		rnd = rand.Int64N
	}
	var d time.Duration
	switch b.Jitter {
	case JitterNone:
		d = c
	case JitterEqual:
		h := c / 2
		d = h + time.Duration(rnd(inclusive(c-h)))
	default:
		d = time.Duration(rnd(inclusive(c)))
	}
	return min(max(d, 0), b.Max)
}

// inclusive returns the bound n for a draw in [0, c], as an Int64N argument.
func inclusive(c time.Duration) int64 {
	if c == math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(c) + 1
}

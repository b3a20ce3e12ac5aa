package deadline

import (
	"math"
	"time"

	"github.com/deadlinebudget/budget/deadline/internal/ring"
)

// The retry budget's defaults, used when [NewRetryBudget] is given no
// option for them: Finagle's and Envoy's settings.
const (
	DefaultRetryRatio   = 0.2              // retries ≤ 20 % of first attempts …
	DefaultRetryWindow  = 10 * time.Second // … counted over the last 10 s …
	DefaultMinRetryRate = 10.0             // … plus 10 retries per second of window
)

// RetryBudget bounds the retries of many calls together, so that a fleet of
// callers does not multiply the load on a downstream that is failing: in
// any window of time, retries ≤ ratio × first attempts + minRate × window.
// Build one per downstream with [NewRetryBudget] and share it between every
// [Policy] that calls that downstream ([Policy.RetryBudget]).
//
// Every first attempt is a deposit and is always allowed. Every retry asks
// the budget and takes one token if the balance, ratio × the first attempts
// of the window plus the floor minRate × window, less the retries already
// taken in it, is at least one; otherwise the retry is denied and the call
// stops with [ReasonRetryBudget]. Counts older than the window expire a
// tenth of the window at a time (a sliding window of ten buckets, on the
// monotonic clock, measured from the budget's construction).
//
// A RetryBudget is safe for concurrent use by any number of goroutines and
// takes no lock: each bucket is a pair of atomic words, and a deposit is a
// clock read and a compare-and-swap, with no allocation. Two retries asked
// at the same instant never both take the last token (a withdrawal that
// overdraws is returned); under contention a retry may be denied although a
// token was freed at that same instant. A count saturates at 2³²−1 per
// bucket.
//
// The zero RetryBudget is not usable: a [Policy] holding one is invalid.
// Build it inside a testing/synctest bubble to run it on the bubble's
// clock.
type RetryBudget struct {
	ratio   float64
	reserve float64 // minRate × window, in retries
	window  time.Duration
	clock   ring.Clock

	deposits    ring.Counts
	withdrawals ring.Counts
}

// RetryBudgetOption configures a [RetryBudget] built by [NewRetryBudget].
type RetryBudgetOption interface{ apply(*RetryBudget) error }

type retryBudgetOption func(*RetryBudget) error

func (f retryBudgetOption) apply(b *RetryBudget) error { return f(b) }

// WithRetryRatio sets the share of first attempts that may be retried, in
// [0, 1]: 0.2 (the default) allows one retry per five first attempts, 0
// allows only the minimum rate. Anything else, NaN included, makes
// [NewRetryBudget] return a [*PolicyError].
func WithRetryRatio(ratio float64) RetryBudgetOption {
	return retryBudgetOption(func(b *RetryBudget) error {
		if !(ratio >= 0 && ratio <= 1) {
			return &PolicyError{"deadline.WithRetryRatio", ratio, "in [0, 1] (e.g. 0.2: retries ≤ 20 % of first attempts)"}
		}
		b.ratio = ratio
		return nil
	})
}

// WithRetryWindow sets the sliding window over which first attempts and
// retries are counted (default 10s). A window <= 0 makes [NewRetryBudget]
// return a [*PolicyError].
func WithRetryWindow(window time.Duration) RetryBudgetOption {
	return retryBudgetOption(func(b *RetryBudget) error {
		if window <= 0 {
			return &PolicyError{"deadline.WithRetryWindow", window, "> 0"}
		}
		b.window = window
		return nil
	})
}

// WithMinRetryRate sets the retries per second allowed whatever the ratio
// (default 10), so that a budget with little traffic can still retry: the
// window holds perSecond × window seconds of them, available in a burst. 0
// allows only the ratio. A negative, infinite or NaN rate makes
// [NewRetryBudget] return a [*PolicyError].
func WithMinRetryRate(perSecond float64) RetryBudgetOption {
	return retryBudgetOption(func(b *RetryBudget) error {
		if !(perSecond >= 0 && perSecond <= math.MaxFloat64) {
			return &PolicyError{"deadline.WithMinRetryRate", perSecond, ">= 0 and finite (retries per second)"}
		}
		b.reserve = perSecond // scaled by the window below
		return nil
	})
}

// NewRetryBudget returns a RetryBudget with the defaults
// ([DefaultRetryRatio], [DefaultRetryWindow], [DefaultMinRetryRate]) changed
// by opts, whose window starts now. An invalid option returns a
// [*PolicyError] naming it; nil options are ignored.
func NewRetryBudget(opts ...RetryBudgetOption) (*RetryBudget, error) {
	b := &RetryBudget{ratio: DefaultRetryRatio, window: DefaultRetryWindow, reserve: DefaultMinRetryRate}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(b); err != nil {
			return nil, err
		}
	}
	b.reserve *= b.window.Seconds()
	b.clock = ring.NewClock(b.window)
	return b, nil
}

// Ratio returns the share of first attempts that may be retried.
func (b *RetryBudget) Ratio() float64 { return b.ratio }

// Window returns the window over which attempts are counted.
func (b *RetryBudget) Window() time.Duration { return b.window }

// Balance returns the retries the budget would allow now: ratio × the first
// attempts of the window + minRate × window − the retries taken and the
// charges made in it, rounded down. It is negative when charges
// ([RetryBudget.Charge]) overdrew the budget, and saturates at math.MaxInt
// (a minimum rate so large that the allowance does not fit an int).
func (b *RetryBudget) Balance() int {
	return b.balance(b.clock.Epoch())
}

// Charge draws n tokens from the budget without asking, as if n retries had
// been taken: an overload signal from the downstream (a 503 or 429 with no
// Retry-After, say) makes the fleet's retries rarer at once. The balance
// may go negative; the charge expires with the window like a retry. n <= 0
// does nothing. (A [overload.Throttle] takes the same signal through its
// own Charge.)
func (b *RetryBudget) Charge(n int) {
	if n > 0 {
		b.withdrawals.Add(b.clock.Epoch(), n)
	}
}

// deposit counts a first attempt.
func (b *RetryBudget) deposit() {
	b.deposits.Add(b.clock.Epoch(), 1)
}

// withdraw asks for one retry. It reports whether the retry is allowed and
// the balance after the decision.
func (b *RetryBudget) withdraw() (bool, int) {
	e := b.clock.Epoch()
	b.withdrawals.Add(e, 1)
	bal := b.balance(e)
	if bal >= 0 {
		return true, bal
	}
	// Overdrawn: give the token back (if its bucket has not moved on).
	b.withdrawals.Add(e, -1)
	return false, bal + 1
}

// balance is the allowance of the window ending in bucket e less its
// withdrawals.
func (b *RetryBudget) balance(e uint32) int {
	dep, wd := b.deposits.Sum(e), b.withdrawals.Sum(e)
	// The small epsilon keeps a product such as 0.2 × 5 from rounding
	// down to 0.
	allow := math.Floor(b.ratio*float64(dep) + b.reserve + 1e-9)
	// Saturate at the largest int: converting an allowance of 2⁶³ or more
	// (WithMinRetryRate(1e18) over a 10s window) to int64 would overflow
	// to a hugely negative balance.
	if !(allow < 1<<63) {
		return math.MaxInt
	}
	return int(min(int64(allow)-int64(wd), math.MaxInt))
}
